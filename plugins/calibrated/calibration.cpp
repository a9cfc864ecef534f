// The feature table, the exchange features and the calibration table file.
#include "calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/codelets.hpp"
#include "tessera/graph.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera::calibration {

namespace {

using Params = std::span<const std::uint32_t>;

// Elementwise work splits evenly over the worker threads, each walking its share in 64-bit
// vectors of two float32: the slowest worker's vectors set the length.
double worker_vectors(double count, const Target& target) {
  const double workers = std::max<std::uint32_t>(target.worker_threads, 1);
  return std::ceil(std::ceil(count / workers) / 2);
}

// A matmul runs on the AMP or on the workers, whichever is faster (docs/targets.md): the
// features of the path the machine model takes, zeros for the other, so one fit prices both.
// AMP (all its units, or for float inputs half of them, as the charge chose): a call, its
// passes, the passes' weight loads and workers' cycles (a pipeline fill, then the core a row),
// zeroing (output groups times field rows times the outputs a row), and the workers' operand
// preparation (b's transpose at the transpose codelet's charge, a's cast to half in fours).
// Workers: a call, the outputs of every input-channel group, and their dot-product cycles.
Features matmul_features(Params p, const Target& t, Codelet codelet) {
  const bool half = codelet == Codelet::matmul_half;
  const bool swapped = p[3] == static_cast<std::uint32_t>(tessera::MatmulOrientation::swapped);
  const double m = p[0], k = p[1], n = p[2];
  const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
  const tessera::CodeletCharge charge = tessera::codelet_charge(codelet, p, t);
  const double in = half ? t.amp_fp16_input_channels : t.amp_fp32_input_channels;
  const double outputs = swapped ? m : n;
  double out = half ? t.amp_fp16_output_channels : t.amp_fp32_output_channels;
  double macs = std::max<std::uint32_t>(half ? t.fp16_macs_per_cycle : t.fp32_macs_per_cycle, 1);
  // The charge took half of the AMP's units when its passes are theirs (with as many passes
  // either way, half the units load half the weights and always win).
  if (!half && double(charge.amp_passes) == std::ceil(k / in) * std::ceil(outputs / (out / 2))) {
    out /= 2;
    macs /= 2;
  }
  const double output_groups = std::ceil(outputs / out), passes = std::ceil(k / in) * output_groups;
  const double rows = std::ceil((swapped ? n : m) / workers);
  const double worker = rows <= 1   ? (half ? 26 : 47)
                        : rows == 2 ? (half ? 35 : 46)
                                    : (half ? 19 : 22) + in * out / macs * rows;
  const double weight_load =
      std::ceil(in * out * (half ? 2 : 4) / std::max<std::uint32_t>(t.load_bytes_per_cycle / 2, 1));
  const double pass_cycles = passes * (weight_load + workers * worker);
  const double zero_rows = half ? 0 : output_groups * rows * out / 2;
  // b's transpose is the transpose codelet's charge for [k, n].
  const bool transpose = tessera::matmul_transposes_b(codelet, p[3]);
  const double transpose_cycles =
      transpose ? double(tessera::codelet_cycles(Codelet::transpose, std::vector<std::uint32_t>{p[1], p[2]}, t)) : 0;
  const double cast_fours = half ? std::ceil(std::ceil(m * k / workers) / 4) : 0;
  const tessera::WorkerMacShape mac = tessera::worker_mac_shape(codelet, p, t);
  const double group_outputs = double(mac.input_groups) * double(mac.outputs);
  const double dots = group_outputs * double(mac.rows_per_worker) * (7 + double(mac.group_dot_cycles));
  const double input_groups = std::ceil(k / in);
  // Half inputs zero no rows; float inputs cast nothing.
  const double zero_or_cast = half ? cast_fours : zero_rows;
  const bool on_workers = std::string_view(charge.path) == "worker-mac";
  Features features =
      on_workers
          ? Features{0, 0, 0, 0, 0, half ? cast_fours : 0, 0, 1, double(mac.input_groups), group_outputs, dots}
          : Features{1, input_groups, passes, pass_cycles, output_groups, zero_or_cast, transpose_cycles, 0, 0, 0, 0};
  // matmul_half's b is stored as its orientation streams it: never transposed, no such feature.
  if (half) features.erase(features.begin() + 6);
  return features;
}

constexpr const char* kMatmulFeatureNames =
    "amp_call,amp_input_groups,amp_passes,amp_pass_cycles,amp_output_groups,amp_zero_rows,transpose_cycles,"
    "worker_call,worker_input_groups,worker_group_outputs,worker_dot_cycles";
constexpr const char* kHalfMatmulFeatureNames =
    "amp_call,amp_input_groups,amp_passes,amp_pass_cycles,amp_output_groups,cast_fours,worker_call,"
    "worker_input_groups,worker_group_outputs,worker_dot_cycles";

// A row vector over rows (bias_add's bias, layer_norm's gamma and beta, binary_row): the flat
// walk or the column-by-column one, whichever the charge takes: binary_row's charge.
double row_vector_charge(std::uint32_t rows, std::uint32_t cols, tessera::BinaryFunction function, const Target& t) {
  return double(tessera::codelet_cycles(
      Codelet::binary_row, std::vector<std::uint32_t>{rows, cols, static_cast<std::uint32_t>(function)}, t));
}

// A per-row scalar over its row, rows or columns split (softmax, layer_norm): binary_column's charge.
double row_scalar_charge(std::uint32_t rows, std::uint32_t cols, const Target& t) {
  return double(tessera::codelet_cycles(
      Codelet::binary_column,
      std::vector<std::uint32_t>{rows, cols, static_cast<std::uint32_t>(tessera::BinaryFunction::multiply)}, t));
}

// Each row folded, whole rows or pieces of rows a worker: reduce_rows' charge for a sum.
double fold_charge(std::uint32_t rows, std::uint32_t cols, const Target& t,
                   std::uint32_t function = static_cast<std::uint32_t>(tessera::ReduceFunction::sum)) {
  return double(tessera::codelet_cycles(Codelet::reduce_rows, std::vector<std::uint32_t>{rows, cols, function}, t));
}

// A reduction's loops of four floats (one more for an odd float, one for a pair) in rounds over
// the workers; a ragged last round runs the shorter remainder loop once.
Features reduce_features(double loops, double parts, bool ragged, const Target& t) {
  const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
  double rounds = std::floor(loops / workers), remainder = 0;
  // The remainder loop (2 a part + 13) is charged at most a whole loop (3 a part + 7).
  if (std::fmod(loops, workers) != 0) (ragged && parts > 6 ? remainder : rounds) += 1;
  return {rounds, parts * rounds, remainder, parts * remainder};
}

double four_float_loops(double count) {
  const auto whole = static_cast<std::uint64_t>(count);
  return double(whole / 4 + (whole & 1) + ((whole & 2) != 0 ? 1 : 0));
}

// Both orientations and both paths, all within ~200 KB of operands.
// Bias codelets (bias_add, bias_add_half): the bias row over the rows (as binary_row's add),
// the half bias's cast to float first (as a copy of cols), then a relu step (its own call and
// vectors) when fused.
constexpr const char* kBiasFeatureNames = "call,bias_cycles,relu_call,relu_vectors";
constexpr const char* kHalfBiasFeatureNames = "call,bias_cycles,cast_cycles,relu_call,relu_vectors";

Features bias_features(Params p, const Target& t) {
  const double vectors = worker_vectors(double(p[0]) * p[1], t);
  return {1, row_vector_charge(p[0], p[1], tessera::BinaryFunction::add, t), p[2] != 0 ? 1.0 : 0.0,
          p[2] != 0 ? vectors : 0.0};
}

Features half_bias_features(Params p, const Target& t) {
  Features features = bias_features(p, t);
  const double cast = double(tessera::codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{p[1]}, t));
  features.insert(features.begin() + 2, cast);
  return features;
}

// A cast's type params (DType values).
constexpr auto kFloat32 = static_cast<std::uint32_t>(tessera::DType::float32);
constexpr auto kInt32 = static_cast<std::uint32_t>(tessera::DType::int32);
constexpr auto kBool = static_cast<std::uint32_t>(tessera::DType::boolean);

const std::vector<std::vector<std::uint32_t>> kBiasShapes = {{1, 64, 0},  {2, 4096, 1}, {16, 256, 0},  {4, 1024, 1},
                                                             {8, 512, 1}, {2, 3000, 0}, {16, 1024, 0}, {1, 7, 1},
                                                             {1, 13, 0},  {3, 5000, 1}};

// Row codelets: softmax folds twice (max, sum), applies a per-row scalar twice (subtract,
// multiply), exps every element and takes a reciprocal a row; layer_norm folds twice, finds an
// inverse standard deviation a pair of rows, applies two per-row scalars and two row vectors.
constexpr const char* kSoftmaxFeatureNames = "call,fold_cycles,row_scalar_cycles,element_vectors,row_vectors";
constexpr const char* kLayerNormFeatureNames = "call,fold_cycles,row_scalar_cycles,row_vector_cycles,row_pairs";

Features softmax_features(Params p, const Target& t) {
  return {1, fold_charge(p[0], p[1], t), row_scalar_charge(p[0], p[1], t), worker_vectors(double(p[0]) * p[1], t),
          worker_vectors(p[0], t)};
}

Features layer_norm_features(Params p, const Target& t) {
  return {1, fold_charge(p[0], p[1], t), row_scalar_charge(p[0], p[1], t),
          row_vector_charge(p[0], p[1], tessera::BinaryFunction::multiply, t) +
              row_vector_charge(p[0], p[1], tessera::BinaryFunction::add, t),
          worker_vectors(p[0], t)};
}

std::vector<std::vector<std::uint32_t>> row_shapes(std::uint32_t float_bits) {
  std::vector<std::vector<std::uint32_t>> shapes = {{1, 16}, {64, 64},  {6, 256},  {13, 100},
                                                    {32, 7}, {128, 32}, {2, 1024}, {40, 300}};
  for (auto& shape : shapes) shape.push_back(float_bits);
  return shapes;
}

const std::vector<std::vector<std::uint32_t>> kMatmulShapes = {
    {1, 16, 16, 0},
    {2, 64, 32, 0},
    {4, 128, 64, 0},
    {8, 256, 16, 1},
    {16, 64, 128, 0},
    {2, 512, 64, 0},
    {1, 1024, 32, 0},
    {16, 128, 128, 0},
    {32, 256, 32, 1},
    {4, 32, 512, 1},
    {3, 100, 7, 1},
    {2, 2048, 8, 1},
    {64, 64, 64, 0},
    {2, 179, 128, 1},
    {128, 64, 96, 0},
    {1, 8, 1, 0},
    {6, 256, 90, 1},
    {2, 256, 90, 0},
    // the worker MAC over one column: odd k in several input-channel groups
    {3, 77, 1, 0},
    {2, 4095, 1, 0},
    {5, 999, 1, 0},
    {1, 63, 1, 0},
    {7, 1500, 1, 0},
    {3, 1002, 2, 1},
    {2, 998, 3, 1}};

// A conv call runs on the AMP, on the AMP over combined groups or on the workers, whichever the
// machine model finds faster: a call and the path's cycles, zeros for the others (docs/targets.md,
// the conv codelet). Then the bias and relu steps, as bias_add's.
Features conv_features(Params p, const Target& t) {
  using namespace tessera;
  const double pixels = double(p[kConvOutRows]) * p[kConvOutWidth], outs = p[kConvOutChannels];
  const bool epilogue = (p[kConvFlags] & (kConvHasBias | kConvRelu)) != 0, relu = (p[kConvFlags] & kConvRelu) != 0;
  const double vectors = worker_vectors(pixels * outs, t);
  // The path's own cycles, the charge less its bias_add step (the charge drops taps that read
  // only padding and adds rearrangements, which no linear feature of the params follows).
  const tessera::CodeletCharge charge = tessera::codelet_charge(Codelet::conv, p, t);
  const std::vector<std::uint32_t> bias_params = {static_cast<std::uint32_t>(pixels), p[kConvOutChannels],
                                                  relu ? 1u : 0u};
  const double path_cycles =
      double(charge.cycles) -
      (epilogue ? double(tessera::codelet_charge(Codelet::bias_add, bias_params, t).cycles) : 0.0);
  const std::string_view path = charge.path;
  Features features = path == "worker-mac" ? Features{0, 0, 1, path_cycles, 0, 0}
                      : path == "amp"      ? Features{1, path_cycles, 0, 0, 0, 0}
                                           : Features{0, 0, 0, 0, 1, path_cycles};
  for (double f : {epilogue ? 1.0 : 0.0, epilogue ? vectors : 0.0, relu ? 1.0 : 0.0, relu ? vectors : 0.0})
    features.push_back(f);
  return features;
}

// The feature table: one line per codelet. A new codelet needs its line here (calibrate
// refuses to run without one); keep each microbenchmark call under ~200 KB of operands.
const CodeletLine kCodeletLines[] = {
    {Codelet::matmul, kMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul); }, kMatmulShapes},
    // Reductions walk loops of four floats split over the workers, each loop a load of every part.
    {Codelet::reduce_add,
     "call,rounds,part_rounds,remainder,part_remainder",
     [](Params p, const Target& t) -> Features {
       Features features = reduce_features(four_float_loops(p[1]), p[0], p[1] % 4 != 0, t);
       features.insert(features.begin(), 1);
       return features;
     },
     {{2, 64},
      {4, 1000},
      {8, 512},
      {16, 300},
      {3, 4096},
      {2, 8000},
      {12, 2048},
      {23, 1024},
      {1, 7},
      {5, 9000},
      {3, 1001},
      {6, 30},
      {9, 4099},
      {17, 262},
      {23, 1001},
      {12, 30}}},
    {Codelet::bias_add, kBiasFeatureNames, bias_features, kBiasShapes},
    {Codelet::relu,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {4096}, {12000}, {30000}}},
    {Codelet::add,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {4096}, {12000}, {16000}}},
    // A copy: the workers' shares in fours, a pair a cycle, an odd value's remainder.
    {Codelet::copy,
     "call,pairs,odd",
     [](Params p, const Target& t) -> Features {
       const double share =
           std::min<double>(p[0], 4 * std::ceil(std::ceil(p[0] / 4.0) / std::max<std::uint32_t>(t.worker_threads, 1)));
       return {1, std::floor(share / 2), std::fmod(share, 2)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {2048}, {4096}, {6000}}},  // four operands: kept small enough to fit a tile
    // Rows are one run when the own partial's rows are contiguous, else each row rounds up to
    // loops; the own partial is one more part; then the bias step and the relu step, as bias_add's.
    {Codelet::reduce_bias,
     "call,rounds,part_rounds,remainder,part_remainder,bias_cycles,relu_call,relu_vectors",
     [](Params p, const Target& t) -> Features {
       const bool one_run = p[3] == p[2] || p[1] == 1;
       const double loops = one_run ? four_float_loops(double(p[1]) * p[2]) : p[1] * four_float_loops(p[2]);
       const bool ragged = static_cast<std::uint64_t>(one_run ? double(p[1]) * p[2] : p[2]) % 4 != 0;
       Features features = reduce_features(loops, p[0] + 1.0, ragged, t);
       const double vectors = worker_vectors(double(p[1]) * p[2], t);
       features.insert(features.begin(), 1);
       features.push_back(row_vector_charge(p[1], p[2], tessera::BinaryFunction::add, t));
       features.push_back(p[4] != 0 ? 1.0 : 0.0);
       features.push_back(p[4] != 0 ? vectors : 0.0);
       return features;
     },
     {{2, 2, 3, 64, 1},
      {22, 2, 3, 64, 1},
      {4, 16, 64, 64, 0},
      {8, 8, 100, 120, 1},
      {3, 4, 513, 600, 0},
      {16, 2, 256, 256, 1},
      {1, 1, 7, 7, 0},
      {23, 2, 178, 178, 1},
      {5, 16, 200, 200, 0},
      {10, 3, 50, 64, 1},
      {6, 9, 30, 30, 1},
      {3, 5, 13, 13, 0},
      {12, 1, 1001, 1001, 1}}},
    {Codelet::matmul_transposed, kMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul_transposed); },
     kMatmulShapes},
    {Codelet::matmul_half, kHalfMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul_half); }, kMatmulShapes},
    {Codelet::bias_add_half, kHalfBiasFeatureNames, half_bias_features, kBiasShapes},
    // A transpose walks 2x2 grains, the rows split over the workers: a fixed cost by case (one
    // grain, one column of grains, wider), then per row of grains, and per grain when wider.
    {Codelet::transpose,
     "single_grain,narrow,wide,narrow_row_grains,wide_row_grains,wide_grains",
     [](Params p, const Target& t) -> Features {
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
       const double row_grains = std::ceil(std::ceil(p[0] / workers) / 2), col_grains = std::ceil(p[1] / 2.0);
       const bool wide = col_grains > 1, narrow = !wide && row_grains > 1;
       return {!wide && !narrow ? 1.0 : 0.0, narrow ? 1.0 : 0.0,      wide ? 1.0 : 0.0,
               narrow ? row_grains : 0.0,    wide ? row_grains : 0.0, wide ? row_grains * col_grains : 0.0};
     },
     {{1, 1},
      {2, 1},
      {16, 2},
      {128, 1},
      {1024, 2},
      {2, 16},
      {64, 8},
      {256, 16},
      {33, 7},
      {256, 64},
      {90, 6},
      {1024, 16}}},
    {Codelet::softmax, kSoftmaxFeatureNames, softmax_features, row_shapes(0x3e000000)},          // scale 0.125
    {Codelet::layer_norm, kLayerNormFeatureNames, layer_norm_features, row_shapes(0x3727c5ac)},  // eps 1e-5
    // Functions (unary, binary): the slowest worker's vectors times the function's cycles a
    // vector (tessera::function_cycles_per_vector); erf and a general power loop an element at a
    // time, and a general power is a binary vertex (its own call). Unary's third param is the
    // exponent's bits (2.0 squares, 1.5 takes the general power).
    {Codelet::unary,
     "call,power_call,function_cycles",
     [](Params p, const Target& t) -> Features {
       const double per_vector = double(tessera::function_cycles_per_vector(Codelet::unary, p));
       const bool power = p[1] == static_cast<std::uint32_t>(tessera::UnaryFunction::pow) && per_vector > 2;
       const bool per_element = power || tessera::unary_loops_by_element(static_cast<tessera::UnaryFunction>(p[1]));
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
       const double cycles =
           per_element ? std::ceil(p[0] / workers) * per_vector / 2 : worker_vectors(p[0], t) * per_vector;
       return {1, power ? 1.0 : 0.0, cycles};
     },
     {{1, 0, 0},
      {64, 0, 0},
      {1000, 1, 0},
      {4096, 2, 0},
      {333, 3, 0},
      {2000, 4, 0x40000000},
      {700, 4, 0x3fc00000},
      {12000, 1, 0},
      {7, 2, 0},
      {5000, 3, 0}}},
    {Codelet::binary,
     "call,function_cycles",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t) * double(tessera::function_cycles_per_vector(Codelet::binary, p))};
     },
     {{1, 0}, {7, 1}, {64, 2}, {333, 0}, {1000, 1}, {4096, 2}, {12000, 0}, {16000, 1}, {9000, 2}}},
    // A row vector: the flat walk or the column-by-column one, whichever the machine model takes.
    {Codelet::binary_row,
     "call,row_vector_cycles",
     [](Params p, const Target& t) -> Features {
       return {1, row_vector_charge(p[0], p[1], static_cast<tessera::BinaryFunction>(p[2]), t)};
     },
     {{1, 64, 0},
      {2, 4096, 1},
      {16, 256, 2},
      {4, 1024, 0},
      {8, 512, 1},
      {2, 3000, 2},
      {16, 1024, 1},
      {1, 7, 0},
      {1, 13, 2},
      {3, 5000, 1}}},
    // Each row folded (whole rows a worker, or pieces of rows and a second fold: the fold's
    // charge), then for a mean a multiply by 1 / cols over the rows.
    {Codelet::reduce_rows,
     "call,fold_cycles,mean_call,mean_vectors",
     [](Params p, const Target& t) -> Features {
       // A mean is a sum's fold then a multiply; the other functions' steps are charged with their fold.
       const bool mean = p[2] == static_cast<std::uint32_t>(tessera::ReduceFunction::mean);
       return {1, fold_charge(p[0], p[1], t, mean ? 0 : p[2]), mean ? 1.0 : 0.0, mean ? worker_vectors(p[0], t) : 0.0};
     },
     {{1, 16, 0},
      {64, 64, 1},
      {6, 256, 0},
      {13, 100, 1},
      {32, 7, 0},
      {128, 32, 1},
      {2, 1024, 0},
      {40, 300, 1},
      {300, 12, 0},
      {90, 90, 1}}},
    // A per-row scalar: the rows or the columns split over the workers, whichever is faster;
    // per row a scalar's set-up (more when the row's floats are not 64-bit aligned), per vector
    // the function's cycles.
    {Codelet::binary_column,
     "call,rows,misaligned_rows,function_cycles",
     [](Params p, const Target& t) -> Features {
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1), rows = p[0], cols = p[1];
       const double per_vector = double(tessera::function_cycles_per_vector(Codelet::binary_column, p));
       const double per_row = cols == std::floor(cols / 2) * 2 ? 7 : 25;
       const double by_rows_rows = std::ceil(rows / workers),
                    by_rows_cycles = by_rows_rows * std::ceil(cols / 2) * per_vector;
       const double by_cols_rows = rows, by_cols_cycles = rows * std::ceil(std::ceil(cols / workers) / 2) * per_vector;
       const bool by_rows = by_rows_rows * per_row + by_rows_cycles <= by_cols_rows * per_row + by_cols_cycles;
       const double worker_rows = by_rows ? by_rows_rows : by_cols_rows;
       return {1, per_row == 7 ? worker_rows : 0.0, per_row == 7 ? 0.0 : worker_rows,
               by_rows ? by_rows_cycles : by_cols_cycles};
     },
     {{1, 16, 0},
      {64, 64, 1},
      {6, 256, 2},
      {13, 100, 3},
      {32, 7, 0},
      {128, 32, 2},
      {2, 1024, 1},
      {40, 300, 2},
      {300, 12, 3},
      {90, 90, 0}}},
    {Codelet::conv,
     "amp_call,amp_cycles,worker_call,worker_cycles,combined_call,combined_cycles,epilogue_call,epilogue_vectors,"
     "relu_call,relu_vectors",
     conv_features,
     {{4, 8, 6, 8, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, 16, 0, 3},
      {2, 14, 2, 14, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 64, 64, 0, 2},
      {7, 7, 7, 7, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 3},
      {3, 16, 7, 32, 3, 16, 3, 3, 2, 2, 1, 1, 1, 1, 3, 16, 0, 3},
      {1, 4, 1, 4, 128, 256, 1, 1, 1, 1, 1, 1, 0, 0, 128, 256, 0, 0},
      {8, 8, 10, 10, 8, 24, 3, 3, 1, 1, 1, 1, 0, 0, 8, 24, 0, 1},
      {5, 5, 11, 11, 3, 8, 7, 7, 2, 2, 1, 1, 3, 3, 3, 8, 0, 3},
      {6, 6, 10, 10, 16, 16, 3, 3, 1, 1, 2, 2, 0, 0, 16, 16, 0, 2},
      {4, 10, 4, 10, 32, 8, 1, 1, 1, 1, 1, 1, 0, 0, 4, 2, 1, 0},
      {2, 56, 4, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, 64, 0, 3},
      {14, 14, 14, 14, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2},
      {1, 7, 3, 7, 96, 24, 3, 3, 1, 1, 1, 1, 1, 1, 96, 24, 0, 1},
      {2, 3, 4, 7, 24, 8, 3, 3, 2, 2, 1, 1, 0, 0, 3, 1, 0, 3},
      {12, 12, 12, 12, 40, 40, 1, 1, 1, 1, 1, 1, 0, 0, 40, 40, 0, 3},
      {1, 1, 3, 3, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 128, 32, 0, 2},
      {2, 2, 2, 2, 256, 128, 1, 1, 1, 1, 1, 1, 0, 0, 256, 128, 0, 1},
      {16, 16, 18, 18, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 3, 4, 0, 0},
      {5, 9, 5, 9, 24, 24, 5, 5, 1, 1, 1, 1, 2, 2, 1, 1, 0, 3},
      {3, 3, 7, 7, 12, 48, 3, 3, 2, 2, 1, 1, 0, 0, 12, 48, 0, 2},
      {1, 28, 3, 28, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 32, 16, 0, 0},
      {6, 1, 6, 1, 64, 32, 1, 1, 1, 1, 1, 1, 0, 0, 64, 32, 0, 3},
      {7, 7, 7, 7, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 8, 8, 0, 1},
      {4, 4, 8, 8, 8, 6, 2, 2, 2, 2, 1, 1, 0, 0, 2, 2, 1, 2},
      {10, 10, 12, 12, 20, 10, 3, 3, 1, 1, 1, 1, 1, 1, 20, 10, 0, 3},
      {2, 28, 4, 28, 48, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},
      {7, 7, 15, 15, 96, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 3},
      {1, 56, 3, 56, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2},
      {4, 14, 8, 28, 144, 144, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0},
      {3, 3, 7, 7, 64, 64, 5, 5, 1, 1, 1, 1, 2, 2, 1, 1, 0, 3}}},
    {Codelet::clip,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1, 0, 0x40c00000}, {7, 0, 0x40c00000}, {64, 0xbf800000, 0x3f800000}, {333, 0, 0x40c00000}, {1000, 0, 0x40c00000},
      {4096, 0xff800000, 0}, {12000, 0, 0x40c00000}, {16000, 0, 0x7f800000}}},
    // A cast walks its share as copy does (Cast1D), whatever the types.
    {Codelet::cast,
     "call,pairs,odd",
     [](Params p, const Target& t) -> Features {
       const double share =
           std::min<double>(p[0], 4 * std::ceil(std::ceil(p[0] / 4.0) / std::max<std::uint32_t>(t.worker_threads, 1)));
       return {1, std::floor(share / 2), std::fmod(share, 2)};
     },
     {{1, kFloat32, kInt32},
      {7, kInt32, kFloat32},
      {64, kFloat32, kBool},
      {333, kBool, kFloat32},
      {1000, kInt32, kBool},
      {4096, kFloat32, kInt32},
      {12000, kBool, kInt32},
      {9000, kInt32, kFloat32}}},
    // A select walks its share an element at a time.
    {Codelet::select,
     "call,elements",
     [](Params p, const Target& t) -> Features {
       return {1, std::ceil(p[0] / double(std::max<std::uint32_t>(t.worker_threads, 1)))};
     },
     {{1}, {7}, {64}, {333}, {1000}, {2048}, {4096}, {6000}}},  // four operands: kept small enough to fit a tile
    // An embedding lookup: the busiest worker's indices, each its fixed cost and its row's pairs
    // (a single index splits its row over the workers).
    {Codelet::multi_slice,
     "call,indices,pairs",
     [](Params p, const Target& t) -> Features {
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
       const double indices = p[2] == 1 ? 1 : std::ceil(p[2] / workers);
       const double pairs = p[2] == 1 ? std::ceil(std::ceil(p[1] / 2.0) / workers) : std::ceil(p[1] / 2.0);
       return {1, indices, indices * pairs};
     },
     {{16, 16, 1, 0, 16},
      {64, 7, 5, 0, 64},
      {100, 32, 64, 50, 200},
      {512, 4, 300, 0, 512},
      {40, 96, 12, 0, 40},
      {8, 250, 3, 8, 32},
      {200, 16, 1000, 0, 200},
      {1000, 2, 2048, 0, 1000}}},
    // Pooling: the busiest worker's worklists (popnn getPoolingCycles), as the charge walks them.
    {Codelet::pool,
     "call,worklist_cycles",
     [](Params p, const Target& t) -> Features {
       using namespace tessera;
       // popnn's getPoolingCycles over the busiest worker's worklists: the charge itself.
       return {1, double(codelet_charge(Codelet::pool, p, t).cycles)};
     },
     {{2, 4, 5, 8, 16, 3, 3, 2, 2, 1, 1, 1, 1, 0},
      {1, 1, 7, 7, 64, 7, 7, 1, 1, 1, 1, 0, 0, 1},
      {4, 4, 8, 8, 32, 2, 2, 2, 2, 1, 1, 0, 0, 0},
      {3, 7, 9, 14, 8, 3, 3, 2, 2, 1, 1, 1, 1, 2},
      {1, 1, 1, 1, 512, 1, 1, 1, 1, 1, 1, 0, 0, 1},
      {8, 8, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 0},
      {2, 28, 5, 56, 24, 3, 3, 2, 2, 1, 1, 1, 1, 0},
      {1, 1, 2, 2, 256, 2, 2, 1, 1, 1, 1, 0, 0, 1},
      {6, 6, 13, 13, 12, 3, 3, 2, 2, 1, 1, 1, 1, 2},
      {14, 14, 14, 14, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1}}},
};

[[noreturn]] void fail(const std::string& file, const YAML::Node& node, const std::string& message) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) throw Error(file + ": " + message);
  throw Error(fmt::format("{}:{}:{}: {}", file, mark.line + 1, mark.column + 1, message));
}

YAML::Node required(const std::string& file, const YAML::Node& map, const char* key) {
  if (!map.IsMap()) fail(file, map, "expected a mapping");
  YAML::Node node = map[key];
  if (!node.IsDefined()) fail(file, map, fmt::format("missing key '{}'", key));
  return node;
}

template <typename T>
T scalar(const std::string& file, const YAML::Node& map, const char* key) {
  const YAML::Node node = required(file, map, key);
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(file, node, fmt::format("'{}' has the wrong type", key));
  }
}

Formula read_formula(const std::string& file, const YAML::Node& node) {
  Formula formula;
  const YAML::Node features = required(file, node, "features");
  const YAML::Node coefficients = required(file, node, "coefficients");
  if (!features.IsSequence() || !coefficients.IsSequence() || features.size() != coefficients.size() ||
      features.size() == 0)
    fail(file, node, "'features' and 'coefficients' must be lists of the same, non-zero length");
  for (std::size_t i = 0; i < features.size(); ++i) {
    formula.features.push_back(features[i].as<std::string>());
    try {
      formula.coefficients.push_back(coefficients[i].as<double>());
    } catch (const YAML::Exception&) {
      fail(file, coefficients[i], "a coefficient must be a number");
    }
    if (!std::isfinite(formula.coefficients.back())) fail(file, coefficients[i], "a coefficient must be finite");
  }
  formula.samples = scalar<std::uint64_t>(file, node, "samples");
  formula.max_relative_error = scalar<double>(file, node, "max_relative_error");
  return formula;
}

void emit_formula(YAML::Emitter& out, const Formula& formula) {
  out << YAML::BeginMap;
  out << YAML::Key << "features" << YAML::Value << YAML::Flow << formula.features;
  out << YAML::Key << "coefficients" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (double c : formula.coefficients) out << fmt::format("{:.9g}", c);
  out << YAML::EndSeq;
  out << YAML::Key << "samples" << YAML::Value << formula.samples;
  out << YAML::Key << "max_relative_error" << YAML::Value << fmt::format("{:.6f}", formula.max_relative_error);
  out << YAML::EndMap;
}

}  // namespace

const CodeletLine* codelet_line(Codelet codelet) {
  for (const CodeletLine& line : kCodeletLines)
    if (line.codelet == codelet) return &line;
  return nullptr;
}

const char* exchange_feature_names() { return "phase,lower_bound"; }

Features exchange_features(const ExchangePhase& phase, const Target& target) {
  return {1, double(lower_bound(phase, target))};
}

double Formula::cycles(const Features& values) const {
  double sum = 0;
  for (std::size_t i = 0; i < coefficients.size() && i < values.size(); ++i) sum += coefficients[i] * values[i];
  return sum;
}

std::vector<std::string> split_names(const char* names) {
  std::vector<std::string> out;
  std::string current;
  for (const char* c = names; *c; ++c) {
    if (*c == ',') {
      out.push_back(current);
      current.clear();
    } else {
      current += *c;
    }
  }
  out.push_back(current);
  return out;
}

std::string table_yaml(const Table& table) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "calibration_table" << YAML::Value << kTableFormatVersion;
  out << YAML::Key << "target" << YAML::Value << table.target;
  out << YAML::Key << "target_hash" << YAML::Value << fmt::format("{:016x}", table.target_hash);
  out << YAML::Key << "codelet_set_version" << YAML::Value << table.codelet_set_version;
  out << YAML::Key << "scheduler" << YAML::Value << table.scheduler;
  out << YAML::Key << "codelets" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, formula] : table.codelets) {
    out << YAML::Key << name << YAML::Value;
    emit_formula(out, formula);
  }
  out << YAML::EndMap;
  out << YAML::Key << "exchange" << YAML::Value;
  emit_formula(out, table.exchange);
  out << YAML::Key << "barrier_cycles" << YAML::Value << fmt::format("{:.9g}", table.barrier_cycles);
  out << YAML::EndMap;
  return std::string(
             "# Calibrated cost-model table: cycles = coefficients . features, fitted by `tessera calibrate`\n"
             "# on simulator microbenchmarks. Generated; do not edit (re-run the command instead).\n") +
         out.c_str() + "\n";
}

Table read_table(const std::string& path, const std::string& make_command) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(fmt::format("calibration table {} not found; make it with `{}`", path, make_command));
  YAML::Node root;
  try {
    root = YAML::Load(read_yaml_text(path, "a calibration table"));  // bounded size and aliases
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!root.IsMap()) fail(path, root, "a calibration table must be a mapping (written by `tessera calibrate`)");
  const auto version = scalar<std::uint32_t>(path, root, "calibration_table");
  if (version != kTableFormatVersion)
    fail(path, root["calibration_table"],
         fmt::format("table format {} is not the {} this build reads; re-run `{}`", version, kTableFormatVersion,
                     make_command));
  Table table;
  table.file = path;
  table.target = scalar<std::string>(path, root, "target");
  const std::string hash = scalar<std::string>(path, root, "target_hash");
  try {
    std::size_t used = 0;
    table.target_hash = std::stoull(hash, &used, 16);
    if (used != hash.size()) throw std::invalid_argument(hash);
  } catch (const std::exception&) {
    fail(path, root["target_hash"], "'target_hash' must be 16 hex digits");
  }
  table.codelet_set_version = scalar<std::uint32_t>(path, root, "codelet_set_version");
  table.scheduler = scalar<std::string>(path, root, "scheduler");
  const YAML::Node codelets = required(path, root, "codelets");
  if (!codelets.IsMap()) fail(path, codelets, "'codelets' must map codelet names to formulas");
  for (const auto& entry : codelets) table.codelets[entry.first.as<std::string>()] = read_formula(path, entry.second);
  table.exchange = read_formula(path, required(path, root, "exchange"));
  table.barrier_cycles = scalar<double>(path, root, "barrier_cycles");
  return table;
}

}  // namespace tessera::calibration
