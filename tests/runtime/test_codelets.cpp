// Tests of the codelet set: names, operand shapes and the cycle formulas the simulator charges.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim_fixture.hpp"
#include "tessera/codelets.hpp"

using namespace tessera;

TEST_CASE("codelets name themselves and declare operand and param counts", "[codelets]") {
  CHECK(std::string(codelet_name(Codelet::matmul)) == "matmul");
  CHECK(std::string(codelet_name(Codelet::reduce_add)) == "reduce_add");
  CHECK(std::string(codelet_name(Codelet::bias_add)) == "bias_add");
  CHECK(std::string(codelet_name(Codelet::relu)) == "relu");
  CHECK(std::string(codelet_name(Codelet::add)) == "add");
  CHECK(std::string(codelet_name(Codelet::copy)) == "copy");
  CHECK(codelet_operand_count(Codelet::matmul) == 3);
  CHECK(codelet_param_count(Codelet::matmul) == 4);
  CHECK(codelet_operand_count(Codelet::reduce_add) == 2);
  CHECK(codelet_param_count(Codelet::bias_add) == 3);
  CHECK(codelet_operand_count(Codelet::relu) == 1);
  CHECK(codelet_operand_count(Codelet::add) == 3);
  CHECK(codelet_param_count(Codelet::copy) == 1);
  CHECK_THROWS_AS(codelet_name(static_cast<Codelet>(kCodeletCount)), std::logic_error);
}

TEST_CASE("codelet operand spans follow the shape params", "[codelets]") {
  const std::vector<std::uint32_t> mkn = {3, 5, 7, 0};
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 0) == 15);
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 1) == 35);
  CHECK(codelet_operand_words(Codelet::matmul, mkn, 2) == 21);
  const std::vector<std::uint32_t> parts_count = {4, 10};
  CHECK(codelet_operand_words(Codelet::reduce_add, parts_count, 0) == 40);
  CHECK(codelet_operand_words(Codelet::reduce_add, parts_count, 1) == 10);
  const std::vector<std::uint32_t> bias = {2, 6, 1};
  CHECK(codelet_operand_words(Codelet::bias_add, bias, 0) == 12);
  CHECK(codelet_operand_words(Codelet::bias_add, bias, 1) == 6);
  CHECK(codelet_operand_words(Codelet::add, std::vector<std::uint32_t>{9}, 2) == 9);
  // Large shapes must not overflow 32 bits.
  const std::vector<std::uint32_t> big = {65536, 65536, 1, 0};
  CHECK(codelet_operand_words(Codelet::matmul, big, 0) == 4294967296ull);
  CHECK_THROWS_AS(codelet_operand_words(Codelet::matmul, std::vector<std::uint32_t>{1, 2}, 0), std::logic_error);
  CHECK_THROWS_AS(codelet_operand_words(Codelet::relu, std::vector<std::uint32_t>{4}, 1), std::logic_error);
}

TEST_CASE("codelet cycle formulas charge the documented machine model", "[codelets]") {
  const Target target = testing::four_tile_target();  // 6 workers, the GC200's AMP defaults
  using V = std::vector<std::uint32_t>;
  constexpr std::uint32_t as_is = 0, swapped = 1;
  // matmul on the AMP: 74 + 15 a further input group + output_groups * 6 * (2 + zeroing a row
  // * rows) + passes * (25 + weight load + 6 * worker), worker = 22 + 8 * rows (47 one row, 46
  // two), weight load at 64-bit loads = 8 * 16 * 4 bytes / 8 = 64; all 16 units (zeroing 8 a
  // row) or 8 of them (half the output channels and weight load, zeroing 4), the faster.
  // 128^3: 16 x 8 passes, 22 rows a worker.
  CHECK(codelet_cycles(Codelet::matmul, V{128, 128, 128, as_is}, target) ==
        74 + 15 * 15 + 8 * 6 * (2 + 8 * 22) + 16 * 8 * (25 + 64 + 6 * (22 + 8 * 22)));
  // 2 x 179 x 128: 23 x 8 passes of one row each.
  const std::uint64_t thin_as_is = 74 + 22 * 15 + 8 * 6 * (2 + 8 * 1) + 23 * 8 * (25 + 64 + 6 * 47);
  CHECK(codelet_charge(Codelet::matmul, V{2, 179, 128, as_is}, target).cycles == thin_as_is);
  CHECK(codelet_charge(Codelet::matmul, V{2, 179, 128, as_is}, target).amp_passes == 23 * 8);
  // Swapped: b [k, n] transposed by the workers first (2x2 grains, the rows split over the
  // workers: 11 + 6 * (47 + row grains * (6 + 3 * column grains))), then its 128 columns stream
  // against a's 2 rows on 8 units (2 outputs fill one group of either), leaving c^T; the product
  // adds a transpose call of c^T [128, 2] into c (one column grain: 11 + 6 * (56 + 3 * row
  // grains)), as poplibs rearranges a swapped output.
  const std::uint64_t transpose = 11 + 6 * (47 + 15 * (6 + 3 * 64));
  const std::uint64_t thin_swapped = transpose + 74 + 22 * 15 + 6 * (2 + 4 * 22) + 23 * (25 + 32 + 6 * (22 + 8 * 22));
  CHECK(codelet_cycles(Codelet::matmul, V{2, 179, 128, swapped}, target) == thin_swapped);
  CHECK(codelet_charge(Codelet::matmul, V{2, 179, 128, swapped}, target).amp_passes == 23);
  const std::uint64_t output_transpose = 11 + 6 * (56 + 3 * 11);
  CHECK(codelet_cycles(Codelet::transpose, V{128, 2}, target) == output_transpose);
  CHECK(matmul_product_cycles(Codelet::matmul, V{2, 179, 128, swapped}, target) == thin_swapped + output_transpose);
  CHECK(matmul_product_cycles(Codelet::matmul, V{2, 179, 128, as_is}, target) == thin_as_is);
  CHECK(thin_swapped + output_transpose < thin_as_is);
  CHECK(faster_matmul_orientation(Codelet::matmul, 2, 179, 128, target) == MatmulOrientation::swapped);
  CHECK(faster_matmul_orientation(Codelet::matmul, 128, 128, 128, target) == MatmulOrientation::as_is);
  // The worker MAC (b [n, k]): 58 + 6 * 9 + 23 a call, then per input group 15 + per output
  // column (10 + 6 * (51 + rows a worker * (7 + dot))), a dot of an even group 7 + one a pair.
  const CodeletCharge thin = codelet_charge(Codelet::matmul_transposed, V{2, 64, 2, as_is}, target);
  CHECK(thin.cycles == 135 + 15 + 2 * (10 + 6 * (51 + 1 * (7 + 7 + 32))));
  CHECK(std::string(thin.path) == "worker-mac");
  // An odd k is cut into two even groups (64, zero-padded) rather than loaded a value at a time.
  CHECK(codelet_cycles(Codelet::matmul_transposed, V{2, 63, 2, as_is}, target) ==
        135 + 2 * (15 + 2 * (10 + 6 * (51 + 1 * (7 + 7 + 16)))));
  const WorkerMacShape odd = worker_mac_shape(Codelet::matmul_transposed, V{2, 63, 2, as_is}, target);
  CHECK(odd.input_groups == 2);
  CHECK(odd.group_dot_cycles == 7 + 16);
  // The field (a's rows as_is, b's columns swapped) splits over the workers, not the outputs.
  CHECK(worker_mac_shape(Codelet::matmul_transposed, V{2, 64, 3, as_is}, target).rows_per_worker == 1);
  CHECK(worker_mac_shape(Codelet::matmul_transposed, V{2, 64, 3, as_is}, target).outputs == 3);
  CHECK(worker_mac_shape(Codelet::matmul_transposed, V{2, 64, 30, swapped}, target).rows_per_worker == 5);
  // matmul_half on the workers: a cast of a (Cast1D: 19 + 6 * (42 + 2 a four of the worker's
  // share + 2 for the remainder tests)), then four halves a cycle of b [n, k] (swapped): 63 + 6
  // * 9 + 23, then 15 + 1 output * (10 + 6 * (51 + 2 rows * (7 + 7 + 16))).
  const CodeletCharge thin_half = codelet_charge(Codelet::matmul_half, V{1, 64, 8, swapped}, target);
  CHECK(thin_half.cycles == 19 + 6 * (42 + 2 * 3 + 2) + 140 + 15 + 1 * (10 + 6 * (51 + 2 * (7 + 7 + 16))));
  CHECK(std::string(thin_half.path) == "worker-mac");
  // b [k, n] (as_is, n > 1) has no contiguous pair of a column's values: a value every two cycles.
  CHECK(worker_mac_shape(Codelet::matmul_half, V{1, 64, 8, as_is}, target).group_dot_cycles == 8 + 2 * 64);
  CHECK(worker_mac_shape(Codelet::matmul, V{1, 64, 1, as_is}, target).group_dot_cycles == 7 + 32);
  CHECK(codelet_charge(Codelet::matmul_half, V{1, 64, 8, as_is}, target).cycles > thin_half.cycles);
  // matmul_transposed (b [n, k]) needs the transpose as_is, not swapped; here the workers win both.
  CHECK(codelet_cycles(Codelet::matmul_transposed, V{2, 4096, 3, as_is}, target) ==
        135 + 15 + 3 * (10 + 6 * (51 + 1 * (7 + 7 + 2048))));
  CHECK(codelet_cycles(Codelet::matmul_transposed, V{2, 64, 256, swapped}, target) <
        codelet_cycles(Codelet::matmul_transposed, V{2, 64, 256, as_is}, target));
  // matmul_half: a cast to half, then 8 x 16 passes of weight load 16 * 8 * 2 / 8 = 32, worker
  // 19 + 4 * rows, and 6 * (7 + 3 a further input group) of state the workers rebuild.
  CHECK(codelet_cycles(Codelet::matmul_half, V{128, 128, 128, as_is}, target) ==
        19 + 6 * (42 + 2 * 683 + 2) + 74 + 7 * 15 + 6 * (7 + 3 * 7) + 8 * 16 * (25 + 32 + 6 * (19 + 4 * 22)));
  // Constant weights stored as the orientation streams them pay no transpose: swapped reads
  // b [n, k] (matmul_transposed; matmul_half's b follows its orientation).
  CHECK(constant_weight_matmul(false, MatmulOrientation::as_is) == Codelet::matmul);
  CHECK(constant_weight_matmul(false, MatmulOrientation::swapped) == Codelet::matmul_transposed);
  CHECK(constant_weight_matmul(true, MatmulOrientation::swapped) == Codelet::matmul_half);
  CHECK(matmul_transposes_b(Codelet::matmul, swapped));
  CHECK_FALSE(matmul_transposes_b(Codelet::matmul_transposed, swapped));
  CHECK_FALSE(matmul_transposes_b(Codelet::matmul_half, swapped));
  CHECK(matmul_b_is_n_by_k(Codelet::matmul_half, swapped));
  CHECK_FALSE(matmul_b_is_n_by_k(Codelet::matmul_half, as_is));
  CHECK(codelet_cycles(Codelet::matmul_transposed, V{2, 179, 128, swapped}, target) == thin_swapped - transpose);
  // Elementwise: supervisor + 6 * (worker fixed + loops of the busiest worker * cycles a loop).
  // copy is Cast1D float to float: 19 + 6 * (42 + a pair a cycle of a share in fours + 1).
  CHECK(codelet_cycles(Codelet::copy, V{1200}, target) == 19 + 6 * (42 + 100 + 1));
  // relu is UnaryOp1DInPlace: 20 + 6 * (55 + 2 a pair).
  CHECK(codelet_cycles(Codelet::relu, V{13}, target) == 20 + 6 * (55 + 2 * 2));
  CHECK(codelet_cycles(Codelet::add, V{1200}, target) == 11 + 6 * (29 + 100 * 3));
  // bias_add is BinaryOp1DInPlace (58 fixed) over the rows as one tensor, here faster than
  // BroadcastVectorInner's column-by-column walk.
  CHECK(codelet_cycles(Codelet::bias_add, V{2, 600, 0}, target) == 11 + 6 * (58 + 100 * 3));
  // A fused codelet is charged as its steps one after another: the bias, then a relu; a half
  // bias is cast to float first (as a copy of its 600 values).
  const std::uint64_t relu_1200 = 20 + 6 * (55 + 100 * 2);
  CHECK(codelet_cycles(Codelet::bias_add, V{2, 600, 1}, target) == 11 + 6 * (58 + 100 * 3) + relu_1200);
  CHECK(codelet_cycles(Codelet::bias_add_half, V{2, 600, 1}, target) ==
        11 + 6 * (58 + 100 * 3) + 19 + 6 * (42 + 50 + 1) + relu_1200);
  // Reductions: loops of four floats, 3 cycles a part + 7, split over the workers, 32 fixed.
  CHECK(codelet_cycles(Codelet::reduce_add, V{4, 1200}, target) == 6 * (32 + 50 * (3 * 4 + 7)));
  // A count not a multiple of four adds a loop for its pair; the ragged last round is the
  // remainder loop, 2 a part + 13, never more than a whole loop.
  CHECK(codelet_cycles(Codelet::reduce_add, V{9, 1202}, target) == 6 * (32 + (2 * 9 + 13) + 50 * (3 * 9 + 7)));
  CHECK(codelet_cycles(Codelet::reduce_add, V{4, 1202}, target) == 6 * (32 + (3 * 4 + 7) + 50 * (3 * 4 + 7)));
  // reduce_bias: the own partial is one more part (its contiguous rows one run), then the bias.
  CHECK(codelet_cycles(Codelet::reduce_bias, V{3, 2, 600, 600, 0}, target) ==
        6 * (32 + 50 * (3 * 4 + 7)) + 11 + 6 * (58 + 100 * 3));
  CHECK(codelet_operand_words(Codelet::reduce_bias, V{3, 2, 5, 9, 0}, 0) == 30);
  CHECK(codelet_operand_words(Codelet::reduce_bias, V{3, 2, 5, 9, 0}, 1) == 14);
  CHECK(codelet_operand_words(Codelet::reduce_bias, V{3, 2, 5, 9, 0}, 2) == 5);
  CHECK(codelet_operand_words(Codelet::reduce_bias, V{3, 2, 5, 9, 0}, 3) == 10);
  // Folds: 6 * (17 + rows a worker * (12 + a pair a cycle)); a per-row scalar 11 + 6 * (15 +
  // rows a worker * (7 + 2 a pair)), the rows or each row's columns split, the faster.
  // softmax: max and sum, subtract and multiply by the reciprocal of the sum, exp in place over
  // the elements (20 + 6 * (55 + 6 a pair)), the reciprocal of the 7 sums (6 a pair).
  const std::uint64_t fold_7x10 = 6 * (17 + 2 * (12 + 5));
  const std::uint64_t scalar_7x10 = 11 + 6 * (15 + 2 * (7 + 5 * 2));
  CHECK(codelet_cycles(Codelet::softmax, V{7, 10, 0}, target) ==
        2 * fold_7x10 + 2 * scalar_7x10 + (20 + 6 * (55 + 6 * 6)) + (20 + 6 * (55 + 6 * 1)));
  // Fewer rows than workers: each row in pieces (here 3 of 1000 floats), then a fold of the pieces.
  CHECK(codelet_cycles(Codelet::reduce_rows, V{2, 3000, 0}, target) == 6 * (17 + 12 + 500) + 6 * (17 + 2 + 12 + 1));
  // ... and a per-row scalar splits each row's columns: 11 + 6 * (15 + 2 rows * (7 + 250 pairs * 2)).
  CHECK(codelet_cycles(Codelet::binary_column, V{2, 3000, 1}, target) == 11 + 6 * (15 + 2 * (7 + 250 * 2)));
  // layer_norm: sums of values and squares (folds), the inverse deviation (6 * (10 + 5 a pair of
  // rows a worker)), subtract and multiply per row, then gamma and beta as row vectors.
  CHECK(codelet_cycles(Codelet::layer_norm, V{6, 10, 0}, target) ==
        2 * 6 * (17 + 12 + 5) + 6 * (10 + 5) + 2 * (11 + 6 * (15 + 7 + 10)) + 2 * (11 + 6 * (58 + 5 * 3)));
  // Fewer workers: a longer share each.
  Target three_workers = target;
  three_workers.worker_threads = 3;
  CHECK(codelet_cycles(Codelet::copy, V{1200}, three_workers) == 19 + 3 * (42 + 200 + 1));
  // A faster load path shortens the weight load only.
  Target wide = target;
  wide.load_bytes_per_cycle = 32;
  CHECK(codelet_cycles(Codelet::matmul, V{128, 128, 128, as_is}, target) -
            codelet_cycles(Codelet::matmul, V{128, 128, 128, as_is}, wide) ==
        16 * 8 * 32);
}

TEST_CASE("no codelet call is charged below its MACs at peak or its input bytes at the load bandwidth", "[codelets]") {
  const Target target = testing::four_tile_target();
  std::mt19937 random(20261203);
  auto draw = [&](std::uint32_t low, std::uint32_t high) {
    // Log-uniform, so small and large shapes both appear.
    std::uniform_real_distribution<double> exponent(std::log(double(low)), std::log(double(high) + 1));
    return std::clamp(static_cast<std::uint32_t>(std::exp(exponent(random))), low, high);
  };
  auto pick = [&](std::uint32_t low, std::uint32_t high) {
    return std::uniform_int_distribution<std::uint32_t>(low, high)(random);
  };
  std::uint64_t checked = 0;
  for (std::uint32_t id = 0; id < kCodeletCount; ++id) {
    const auto codelet = static_cast<Codelet>(id);
    for (int trial = 0; trial < 600; ++trial) {
      std::vector<std::uint32_t> params;
      std::uint64_t macs = 0, input_words = 0, peak = target.fp32_macs_per_cycle;
      const std::uint32_t rows = draw(1, 512), cols = draw(1, 4096);
      switch (codelet) {
        case Codelet::matmul:
        case Codelet::matmul_transposed:
        case Codelet::matmul_half: {
          const std::uint32_t m = draw(1, 256), k = draw(1, 4096), n = draw(1, 4096);
          params = {m, k, n, static_cast<std::uint32_t>(trial % 2)};
          macs = std::uint64_t{m} * k * n;
          const bool half = codelet == Codelet::matmul_half;
          input_words = std::uint64_t{m} * k + (half ? (std::uint64_t{k} * n + 1) / 2 : std::uint64_t{k} * n);
          if (half) peak = target.fp16_macs_per_cycle;
          break;
        }
        case Codelet::reduce_add: {
          const std::uint32_t parts = draw(1, 64), count = draw(1, 30000);
          params = {parts, count};
          input_words = std::uint64_t{parts} * count;
          break;
        }
        case Codelet::reduce_bias: {
          const std::uint32_t parts = draw(1, 64), r = draw(1, 64), c = draw(1, 2048);
          params = {parts, r, c, c + draw(1, 64) - 1, static_cast<std::uint32_t>(trial % 2)};
          input_words = std::uint64_t{parts} * r * c + std::uint64_t{r} * c + c;
          break;
        }
        case Codelet::bias_add:
        case Codelet::bias_add_half:
          params = {rows, cols, static_cast<std::uint32_t>(trial % 2)};
          input_words = std::uint64_t{rows} * cols + (codelet == Codelet::bias_add_half ? (cols + 1) / 2 : cols);
          break;
        case Codelet::softmax:
          params = {rows, cols, float_param(1.0f)};
          input_words = std::uint64_t{rows} * cols;
          break;
        case Codelet::layer_norm:
          params = {rows, cols, float_param(1e-5f)};
          input_words = std::uint64_t{rows} * cols + 2 * cols;
          break;
        case Codelet::relu:
        case Codelet::copy:
          params = {draw(1, 100000)};
          input_words = params[0];
          break;
        case Codelet::clip:
          params = {draw(1, 100000), float_param(0.0f), float_param(6.0f)};
          input_words = params[0];
          break;
        case Codelet::cast: {  // float32, int32 and bool each way
          const std::array types{static_cast<std::uint32_t>(DType::float32), static_cast<std::uint32_t>(DType::int32),
                                 static_cast<std::uint32_t>(DType::boolean)};
          params = {draw(1, 100000), types[trial % 3], types[(trial + 1) % 3]};
          input_words = params[0];
          break;
        }
        case Codelet::select:
          params = {draw(1, 100000)};
          input_words = 3 * std::uint64_t{params[0]};
          break;
        case Codelet::multi_slice: {  // the indices and the rows they pick, not the whole table
          const std::uint32_t table_rows = draw(1, 100000), count = draw(1, 4096), begin = pick(0, table_rows - 1);
          params = {pick(1, table_rows - begin), cols, count, begin, table_rows};
          input_words = std::uint64_t{count} + std::uint64_t{count} * cols;
          break;
        }
        case Codelet::add:
          params = {draw(1, 100000)};
          input_words = 2 * std::uint64_t{params[0]};
          break;
        case Codelet::unary:
          params = {draw(1, 100000), static_cast<std::uint32_t>(trial) % kUnaryFunctionCount,
                    float_param(trial % 2 != 0 ? 2.0f : 1.5f)};
          input_words = params[0];
          break;
        case Codelet::binary:
          params = {draw(1, 100000), static_cast<std::uint32_t>(trial) % kBinaryFunctionCount};
          input_words = 2 * std::uint64_t{params[0]};
          break;
        case Codelet::binary_row:
          params = {rows, cols, static_cast<std::uint32_t>(trial) % kBinaryFunctionCount};
          input_words = std::uint64_t{rows} * cols + cols;
          break;
        case Codelet::reduce_rows:
          params = {rows, cols, static_cast<std::uint32_t>(trial % 2)};
          input_words = std::uint64_t{rows} * cols;
          break;
        case Codelet::binary_column:
          params = {rows, cols, static_cast<std::uint32_t>(trial) % kBinaryFunctionCount};
          input_words = std::uint64_t{rows} * cols + rows;
          break;
        case Codelet::transpose:
          params = {rows, cols};
          input_words = std::uint64_t{rows} * cols;
          break;
        case Codelet::conv:
        case Codelet::pool: {
          // A patch of one image: any kernel, stride, dilation and padding, groups spanning the patch.
          const std::uint32_t out_rows = draw(1, 16), out_width = draw(1, 64), kernel_h = draw(1, 7),
                              kernel_w = draw(1, 7), stride = draw(1, 2), dilation = draw(1, 2);
          const std::uint32_t in_rows =
              std::max(1u, (out_rows - 1) * stride + (kernel_h - 1) * dilation + 1 - pick(0, 1));
          const std::uint32_t in_width = (out_width - 1) * stride + (kernel_w - 1) * dilation + 1;
          const std::uint32_t top = pick(0, 1), left = pick(0, kernel_w - 1);
          if (codelet == Codelet::pool) {
            const std::uint32_t channels = draw(1, 256);
            params = {
                out_rows, out_width, in_rows,  in_width, channels, kernel_h, kernel_w,
                stride,   stride,    dilation, dilation, top,      left,     static_cast<std::uint32_t>(trial % 3)};
            input_words = std::uint64_t{in_rows} * in_width * channels;
            break;
          }
          const std::uint32_t group_in = draw(1, 64), group_out = draw(1, 64), outs = draw(1, 128);
          const std::uint32_t first = pick(0, group_out - 1), groups = (outs - 1 + first) / group_out + 1;
          const std::uint32_t channels = groups * group_in;
          params = {out_rows, out_width, in_rows,  in_width,  channels, outs,
                    kernel_h, kernel_w,  stride,   stride,    dilation, dilation,
                    top,      left,      group_in, group_out, first,    static_cast<std::uint32_t>(trial % 4)};
          // Only the taps that read the patch for some output count (poplin's canonicalize).
          const auto live = [](std::uint32_t outputs, std::uint32_t size, std::uint32_t kernel, std::uint32_t step,
                               std::uint32_t dilation, std::uint32_t offset) {
            std::uint64_t count = 0;
            for (std::uint32_t i = 0; i < kernel; ++i) {
              bool reads = false;
              for (std::uint32_t r = 0; r < outputs && !reads; ++r) {
                const std::int64_t at = std::int64_t{r} * step + std::int64_t{i} * dilation - offset;
                reads = at >= 0 && at < size;
              }
              count += reads ? 1 : 0;
            }
            return count;
          };
          const std::uint64_t taps = live(out_rows, in_rows, kernel_h, stride, dilation, top) *
                                     live(out_width, in_width, kernel_w, stride, dilation, left);
          macs = std::uint64_t{out_rows} * out_width * outs * taps * group_in;
          input_words = std::uint64_t{in_rows} * in_width * channels + taps * group_in * outs;
          REQUIRE(window_params_problem(codelet, params).empty());
          break;
        }
      }
      const std::uint64_t cycles = codelet_cycles(codelet, params, target);
      const std::uint64_t mac_floor = (macs + peak - 1) / peak;
      const std::uint64_t load_floor =
          (input_words * 4 + target.load_bytes_per_cycle - 1) / target.load_bytes_per_cycle;
      INFO(codelet_name(codelet) << " params " << Catch::Detail::stringify(params));
      REQUIRE(cycles >= mac_floor);
      REQUIRE(cycles >= load_floor);
      const CodeletCharge charge = codelet_charge(codelet, params, target);
      REQUIRE(charge.mac_floor == mac_floor);
      REQUIRE(charge.load_floor == load_floor);
      ++checked;
    }
  }
  CHECK(checked == 600 * kCodeletCount);
}

TEST_CASE("multi_slice charges poplibs' MultiSlice estimate with the codelet's worker split", "[codelets][embedding]") {
  const Target target = testing::four_tile_target();  // 6 workers, 64-bit loads: two floats a vector
  // poplibs getMultiSliceCycleEstimate (float): 6 x (30 + offsets a worker x (19 + 2 x ceil(cols / 2))).
  auto charge = [&](std::uint32_t cols, std::uint32_t count) {
    return codelet_cycles(Codelet::multi_slice, std::vector<std::uint32_t>{100, cols, count, 0, 100}, target);
  };
  CHECK(charge(16, 64) == 6 * (30 + 11 * (19 + 2 * 8)));  // 64 offsets: 11 on the busiest worker
  CHECK(charge(16, 6) == 6 * (30 + 1 * (19 + 2 * 8)));    // one each
  CHECK(charge(3, 7) == 6 * (30 + 2 * (19 + 2 * 2)));     // an odd row: its last float a vector of its own
  CHECK(charge(64, 1) == 6 * (30 + 1 * (19 + 2 * 6)));    // one offset: its 32 vectors over the workers
  CHECK(charge(768, 512) == 6 * (30 + 86 * (19 + 2 * 384)));
  // The row's span is not loaded: only the indices and the rows picked.
  const CodeletCharge big_table =
      codelet_charge(Codelet::multi_slice, std::vector<std::uint32_t>{30522, 16, 128, 0, 30522}, target);
  CHECK(big_table.load_floor == (128 + 128 * 16) * 4 / 16);
  const std::vector<std::uint32_t> params{10, 3, 7, 20, 40};
  CHECK(codelet_operand_words(Codelet::multi_slice, params, 0) == 30);
  CHECK(codelet_operand_words(Codelet::multi_slice, params, 1) == 7);
  CHECK(codelet_operand_words(Codelet::multi_slice, params, 2) == 21);
}

TEST_CASE("elementwise function codelets charge poplibs' float inner loops", "[codelets]") {
  const Target target = testing::four_tile_target();
  const std::uint64_t workers = target.worker_threads;
  // count elements over the workers, in loops of `per_loop` values: supervisor + workers x (fixed
  // + loops x cycles a loop). UnaryOp1D: supervisor 20, 17 fixed; BinaryOp1D: 11, 29.
  auto expected = [&](std::uint64_t count, std::uint64_t supervisor, std::uint64_t fixed, std::uint64_t per_loop,
                      std::uint64_t values = 2) {
    return supervisor + workers * (fixed + ((count + workers - 1) / workers + values - 1) / values * per_loop);
  };
  using V = std::vector<std::uint32_t>;
  const auto sigmoid = static_cast<std::uint32_t>(UnaryFunction::sigmoid),
             erf = static_cast<std::uint32_t>(UnaryFunction::erf);
  const auto power = static_cast<std::uint32_t>(UnaryFunction::pow);
  CHECK(codelet_cycles(Codelet::unary, V{1200, sigmoid, 0}, target) == expected(1200, 20, 17, 12));
  // erf loops an element at a time, 18 each; a power other than 2 is BinaryOp1D POWER, 312 an element.
  CHECK(codelet_cycles(Codelet::unary, V{1200, erf, 0}, target) == expected(1200, 20, 17, 18, 1));
  CHECK(codelet_cycles(Codelet::unary, V{1201, erf, 0}, target) == expected(1201, 20, 17, 18, 1));
  CHECK(codelet_cycles(Codelet::unary, V{1200, power, float_param(2.0f)}, target) == expected(1200, 20, 17, 2));
  CHECK(codelet_cycles(Codelet::unary, V{1200, power, float_param(3.0f)}, target) == expected(1200, 11, 29, 312, 1));
  const auto multiply = static_cast<std::uint32_t>(BinaryFunction::multiply),
             divide = static_cast<std::uint32_t>(BinaryFunction::divide);
  CHECK(codelet_cycles(Codelet::binary, V{1000, multiply}, target) == codelet_cycles(Codelet::add, V{1000}, target));
  CHECK(codelet_cycles(Codelet::binary, V{1000, divide}, target) == expected(1000, 11, 29, 10));
  // A row vector: the rows as one tensor in place (BinaryOp1DInPlace, 58 fixed), or column by
  // column (BroadcastVectorInner), the faster: tiny rows take the columns, 13 + 6 * (26 + 3
  // columns * (8 + 2 a row)); a divide over 2 rows a worker 13 + 6 * (29 + 50 pairs * (11 + 6)).
  CHECK(codelet_cycles(Codelet::binary_row, V{1, 3, static_cast<std::uint32_t>(BinaryFunction::add)}, target) ==
        13 + 6 * (26 + 3 * (8 + 2 * 1)));
  CHECK(codelet_cycles(Codelet::binary_row, V{10, 100, multiply}, target) == expected(1000, 11, 58, 3));
  CHECK(codelet_cycles(Codelet::binary_row, V{10, 100, divide}, target) == 13 + 6 * (29 + 50 * (11 + 6)));
  // A row reduction: whole rows per worker, 17 fixed, 12 a row and one cycle a pair (no supervisor:
  // worker vertices); a mean multiplies the sums by 1 / cols (11 + 6 * (20 + 2 a pair)).
  const std::uint64_t rows_each = (12 + workers - 1) / workers;
  CHECK(codelet_cycles(Codelet::reduce_rows, V{12, 64, 0}, target) == workers * (17 + rows_each * (12 + 32)));
  CHECK(codelet_cycles(Codelet::reduce_rows, V{12, 64, 1}, target) ==
        workers * (17 + rows_each * (12 + 32)) + 11 + workers * (20 + 2 * 1));
  CHECK(codelet_operand_words(Codelet::reduce_rows, V{12, 64, 1}, 1) == 12);
  CHECK(codelet_operand_words(Codelet::binary_row, V{12, 64, 1}, 1) == 64);
  // A column broadcast: each row's scalar applied to the row (BroadcastVectorOuter: 15 fixed, 7
  // a row, 2 a pair, divide 7 a value), the column one value a row.
  const auto add = static_cast<std::uint32_t>(BinaryFunction::add);
  CHECK(codelet_cycles(Codelet::binary_column, V{12, 64, add}, target) ==
        11 + workers * (15 + rows_each * (7 + 32 * 2)));
  CHECK(codelet_cycles(Codelet::binary_column, V{12, 64, divide}, target) ==
        11 + workers * (15 + rows_each * (7 + 32 * 14)));
  CHECK(codelet_operand_words(Codelet::binary_column, V{12, 64, 1}, 1) == 12);
}

TEST_CASE("further unary functions, max, min, prelu and row folds charge poplibs' loops or their steps", "[codelets]") {
  const Target target = testing::four_tile_target();
  const std::uint64_t workers = target.worker_threads;
  auto expected = [&](std::uint64_t count, std::uint64_t supervisor, std::uint64_t fixed, std::uint64_t per_loop,
                      std::uint64_t values = 2) {
    return supervisor + workers * (fixed + ((count + workers - 1) / workers + values - 1) / values * per_loop);
  };
  using V = std::vector<std::uint32_t>;
  auto unary = [&](UnaryFunction f) {
    return codelet_cycles(Codelet::unary, V{1200, static_cast<std::uint32_t>(f), float_param(1.0f)}, target);
  };
  // unaryOpPerfInfo, float: EXPONENT 6 and LOGARITHM 12 a pair; ABSOLUTE 1 + 4, SIN 2300 + 4 an
  // element; FLOOR 2 + 4 and SIGNUM 5 + 4 a natural vector.
  CHECK(unary(UnaryFunction::exp) == expected(1200, 20, 17, 6));
  CHECK(unary(UnaryFunction::log) == expected(1200, 20, 17, 12));
  CHECK(unary(UnaryFunction::neg) == expected(1200, 20, 17, 2));
  CHECK(unary(UnaryFunction::abs) == expected(1200, 20, 17, 5, 1));
  CHECK(unary(UnaryFunction::sin) == expected(1200, 20, 17, 2304, 1));
  CHECK(unary(UnaryFunction::cos) == unary(UnaryFunction::sin));
  CHECK(unary(UnaryFunction::floor) == expected(1200, 20, 17, 6));
  CHECK(unary(UnaryFunction::round) == unary(UnaryFunction::ceil));
  CHECK(unary(UnaryFunction::sign) == expected(1200, 20, 17, 9));
  // Composites are their steps: softplus = exp (6) + add (5) + log (12) a pair; mish adds tanh and a multiply.
  CHECK(unary(UnaryFunction::softplus) == expected(1200, 20, 17, 23));
  CHECK(unary(UnaryFunction::mish) == expected(1200, 20, 17, 23 + 12 + 5));
  CHECK(unary(UnaryFunction::elu) < unary(UnaryFunction::celu));
  CHECK(unary(UnaryFunction::softsign) > unary(UnaryFunction::abs));
  // MAXIMUM and MINIMUM 4 a pair on BinaryOp1D; prelu their steps (max, min, multiply, add).
  const auto max = static_cast<std::uint32_t>(BinaryFunction::max),
             prelu = static_cast<std::uint32_t>(BinaryFunction::prelu);
  CHECK(codelet_cycles(Codelet::binary, V{1000, max}, target) == expected(1000, 11, 29, 4));
  CHECK(codelet_cycles(Codelet::binary, V{1000, static_cast<std::uint32_t>(BinaryFunction::min)}, target) ==
        expected(1000, 11, 29, 4));
  CHECK(codelet_cycles(Codelet::binary, V{1000, prelu}, target) == expected(1000, 11, 29, 18));
  // No BroadcastVectorInner for max: a row operand walks the flat in-place loop.
  CHECK(codelet_cycles(Codelet::binary_row, V{1, 3, max}, target) == expected(3, 11, 58, 4));
  // Folds by MAX, MIN, MUL and SQUARE_ADD walk as ADD's; l2 adds a square root a row, l1 the
  // magnitudes first, log_sum_exp a second fold and the exponentials.
  auto fold = [&](ReduceFunction f) {
    return codelet_cycles(Codelet::reduce_rows, V{12, 64, static_cast<std::uint32_t>(f)}, target);
  };
  const std::uint64_t sum = fold(ReduceFunction::sum);
  CHECK(fold(ReduceFunction::max) == sum);
  CHECK(fold(ReduceFunction::min) == sum);
  CHECK(fold(ReduceFunction::prod) == sum);
  CHECK(fold(ReduceFunction::sum_square) == sum);
  CHECK(fold(ReduceFunction::l2) == sum + expected(12, 20, 17, 10));
  CHECK(fold(ReduceFunction::l1) == sum + expected(12 * 64, 20, 17, 5, 1));
  CHECK(fold(ReduceFunction::log_sum_exp) > 2 * sum);
}

TEST_CASE("block and half-weight codelets declare their operands", "[codelets]") {
  const std::vector<std::uint32_t> mkn = {3, 5, 7, 0};
  CHECK(codelet_operand_words(Codelet::matmul_transposed, mkn, 1) == 35);
  CHECK(codelet_operand_words(Codelet::matmul_half, mkn, 1) == 18);  // 35 halves, padded to a word
  CHECK(codelet_operand_words(Codelet::bias_add_half, std::vector<std::uint32_t>{2, 5, 0}, 1) == 3);
  CHECK(codelet_operand_count(Codelet::layer_norm) == 4);
  CHECK(codelet_operand_words(Codelet::layer_norm, std::vector<std::uint32_t>{4, 10, 0}, 2) == 10);
  CHECK(codelet_operand_words(Codelet::softmax, std::vector<std::uint32_t>{4, 10, 0}, 1) == 40);
  CHECK(param_float(float_param(0.125f)) == 0.125f);
}
