// Benchmark: the simulator's charge for each codelet beside the estimate Graphcore's own cycle
// estimators (graphcore/poplibs, read and transcribed here) give for the same operation, and
// beside the two floors, over a grid of shapes (docs/targets.md explains every row off by
// more than 25%).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::Codelet;
using U = std::uint64_t;

U ceil_div(U a, U b) { return (a + b - 1) / b; }

// --- Our transcription of the poplibs estimators (GC200, 6 workers). --------------------------

/// poplibs ConvPartial1x1Out worker cycles for `rows` field elements (Z: the zeroing group).
double amp_worker(U rows, bool zeroing, bool half) {
  if (half) {
    const double z = zeroing ? 1 : 2;
    const double cycles = rows == 0   ? 20 + z
                          : rows == 1 ? 31 + z
                          : rows == 2 ? 40 + z
                                      : (zeroing ? 37 : 38) + 4.0 * (rows - 3);
    return cycles - 7;  // state retention
  }
  const double z = zeroing ? 8 : 0, zero_fixed = zeroing ? 2 : 0;
  if (rows == 0) return 24;
  if (rows == 1) return 47 + zero_fixed + z;
  if (rows == 2) return 46 + zero_fixed + 2 * z;
  return 46 + zero_fixed + z * rows + 8.0 * (rows - 3);
}

/// Inner loop: the field split into contiguous runs over the workers.
double amp_inner(U field, bool zeroing, bool half) {
  double most = 0, least = 1e300;
  for (U w = 0; w < 6; ++w) {
    const U rows = (w + 1) * field / 6 - w * field / 6;
    const double cycles = rows == 0 ? 0 : amp_worker(rows, zeroing, half);
    most = std::max(most, cycles);
    least = std::min(least, cycles);
  }
  return std::max(6 * most, 6 * least + 14);
}

/// poplibs' AMP supervisor estimate for a field of `field` rows, k deep, `outputs` wide.
double poplibs_amp(U field, U k, U outputs, bool half) {
  const U in = half ? 16 : 8, out = half ? 8 : 16, load = half ? 16 : 32;
  const double input_groups = ceil_div(k, in), output_groups = ceil_div(outputs, out);
  const double r1 = half ? 7 : 0, r2 = half ? 3 : 0, c = 1;
  const double inner_zero = amp_inner(field, true, half), inner = amp_inner(field, false, half);
  return 50 + 6 * (r1 + r2 * (input_groups - 1)) + 12 + c +
         (input_groups - 1) * (16 - c + output_groups * (19 + (6 + load + inner))) +
         (11 + output_groups * (19 - c + (7 + load + inner_zero)));
}

/// poplibs dense dot product of k inputs (one output channel, float partials): 64-bit loads of two
/// floats or four halves a cycle when k divides into them, else two cycles a narrower load.
double poplibs_dot(U k, bool half) {
  const U per_load = half ? 4 : 2;
  for (U width = per_load; width >= 1; width /= 2)
    if (k % width == 0) return 7 + (width >= per_load ? k / width : 2 * (k / width) + 1);
  return 0;  // unreachable: width 1 divides every k
}

/// poplibs ConvPartialHorizontalMac, float partials: the field split over the workers in one
/// worklist entry each, one output channel a group.
double poplibs_hmac(U field, U k, U outputs, bool half) {
  const double worker = 16 + 19 + ceil_div(field, 6) * (7 + poplibs_dot(k, half)) + 16;
  return (half ? 63 : 58) + 6 * 9 + 23 + 15 + outputs * (10 + 6 * worker);
}

/// popops castWorkerCycles, float to half, as a MultiVertex.
double poplibs_cast_to_half(U count) {
  const U per = ceil_div(count, 6);
  return 19 + 6 * (19 + 2.0 * (per / 4) + (per % 4 != 0 ? 3 : 0) + 23);
}

/// poplibs' supervisor transpose of float (popsparse getTransposeCycleEstimate): 2x2 grains at
/// 3 cycles, the source rows split over the six workers, a transpose each.
double poplibs_transpose(U rows, U cols) {
  const double row_grains = ceil_div(ceil_div(rows, 6), 2), col_grains = ceil_div(cols, 2);
  double worker = 0;
  if (row_grains == 1 && col_grains == 1) worker = 17 + 12;
  else if (col_grains == 1) worker = 27 + 15 + 20 + 3 * (row_grains - 2);
  else worker = 29 + 18 + row_grains * (12 + 3 * (col_grains - 2));
  return 7 + 6 * worker;
}

double poplibs_matmul(U m, U k, U n, bool half) {
  // swapOperands is a plan transform chosen before the vertex kind (poplin ConvPlan.cpp), so
  // every vertex is costed in both orientations. A swapped vertex writes c^T, which poplibs'
  // planner rearranges (addTransformCycleEstimate's rearrangeOutput): here at its transpose
  // vertex's estimate; a c of one row or one column is laid out the same either way.
  const double regroup = m > 1 && n > 1 ? poplibs_transpose(n, m) : 0;
  const double swapped = std::min(poplibs_amp(n, k, m, half), poplibs_hmac(n, k, m, half)) + regroup;
  const double best = std::min({poplibs_amp(m, k, n, half), poplibs_hmac(m, k, n, half), swapped});
  return best + (half ? poplibs_cast_to_half(m * k) : 0);  // our matmul_half takes float a
}

/// popops BinaryOp1D (add, float): 11 + 6 * (29 + vectors a worker * 3).
double poplibs_add(U count) { return 11 + 6 * (29 + 3.0 * ceil_div(ceil_div(count, 6), 2)); }

/// popnn NonLinearity1D relu (the formula the source intends): 9 + 6 * (20 + 3 + 1 + vpw + 3).
double poplibs_relu(U count) { return 9 + 6 * (27 + double(ceil_div(ceil_div(count, 2), 6))); }

/// popops UnaryOp1D with a one-cycle vector loop (no poplibs copy vertex; Poplar's own copy).
double poplibs_copy(U count) { return 20 + 6 * (17 + double(ceil_div(ceil_div(count, 6), 2))); }

/// poplin ReduceAdd (multi-input): 6 * (32 + loops a worker * (3 parts + 7)), loops of 4 floats.
double poplibs_reduce(U parts, U count) { return 6 * (32 + double(ceil_div(ceil_div(count, 4), 6)) * (3 * parts + 7)); }

/// The best of BroadcastVectorInner and a BinaryOp1D on the broadcast rows, then a relu vertex.
double poplibs_bias_add(U rows, U cols, bool relu) {
  const double blocks = ceil_div(rows, 6);
  const double vector_inner = 1 + 12 + 6 * (17 + 1 + 5 + cols * (3 + 2 * blocks + 5) + 1) + 4;
  return std::min(vector_inner, poplibs_add(rows * cols)) + (relu ? poplibs_relu(rows * cols) : 0);
}

/// popops continuous reduce over whole rows (max or sum) a worker: rows * (C / 2 + 12) + 17.
double poplibs_row_reduce(U rows, U cols) { return 6 * (double(ceil_div(rows, 6)) * (cols / 2.0 + 12) + 17); }
/// BroadcastScalar2D: a per-row scalar applied at `per_vector` worker cycles a pair.
double poplibs_row_scalar(U rows, U cols, double per_vector) {
  return 6 * (20 + double(ceil_div(rows, 6)) * (28 + ceil_div(cols, 2) * per_vector));
}

/// popops UnaryOp1D (float) with an inner loop of `per_vector` worker cycles a pair
/// (unaryOpPerfInfo: SIGMOID and TANH 12, SQRT 10, ERF 18 and POWER 312 an element, SQUARE 2).
double poplibs_unary(U count, double per_vector) {
  return 20 + 6 * (17 + per_vector * double(ceil_div(ceil_div(count, 6), 2)));
}

/// popops BinaryOp1D (float) with `per_vector` worker cycles a pair (binaryOpPerfInfo: SUBTRACT
/// and MULTIPLY as ADD, 3; DIVIDE 10).
double poplibs_binary(U count, double per_vector) {
  return 11 + 6 * (29 + per_vector * double(ceil_div(ceil_div(count, 6), 2)));
}

/// popnn softmax (stable): max, subtract, exp, sum, divide.
double poplibs_softmax(U rows, U cols) {
  const double exp = 20 + 6 * (33 + 6.0 * ceil_div(ceil_div(rows * cols, 6), 2));
  return 2 * poplibs_row_reduce(rows, cols) + poplibs_row_scalar(rows, cols, 3) + exp +
         poplibs_row_scalar(rows, cols, 10);
}

/// poplin layer norm: mean and mean square reductions, inverse std deviation, whiten
/// (subtract, multiply by the row's scalar), then gamma and beta as broadcast vectors.
double poplibs_layer_norm(U rows, U cols) {
  const double inverse_std = 6 + 4 + 5.0 * ceil_div(rows, 2);
  return 2 * poplibs_row_reduce(rows, cols) + inverse_std + 2 * poplibs_row_scalar(rows, cols, 3) +
         2 * poplibs_bias_add(rows, cols, false);
}

// --- The table. ---------------------------------------------------------------------------------

struct Row {
  std::string codelet, shape;
  tessera::CodeletCharge ours;
  double poplibs = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const std::string target_path = argc > 1 ? argv[1] : std::string(TESSERA_SOURCE_DIR) + "/configs/targets/t1472.yaml";
  const tessera::Target target = tessera::load_target(target_path);
  std::vector<Row> rows;
  auto charge = [&](Codelet codelet, std::vector<std::uint32_t> params) {
    return tessera::codelet_charge(codelet, params, target);
  };
  const std::vector<std::uint32_t> batches = {1, 2, 4, 16, 64, 256};
  const std::vector<std::uint32_t> widths = {16, 64, 256, 1024, 4096};
  for (bool half : {false, true})
    for (std::uint32_t m : batches)
      for (std::uint32_t k : widths)
        for (std::uint32_t n : widths) {
          if (std::uint64_t{m} * k * n > (1ull << 26)) continue;  // more than a tile's memory holds
          // Constant weights, stored as each orientation streams them (as the planner lays them out):
          // the faster of the two, as poplibs picks the better of swapOperands.
          // A swapped product is its matmul call and the transpose of c^T after it.
          tessera::CodeletCharge best;
          const char* best_orientation = "as-is";
          for (auto orientation : {tessera::MatmulOrientation::as_is, tessera::MatmulOrientation::swapped}) {
            const Codelet codelet = tessera::constant_weight_matmul(half, orientation);
            const std::vector<std::uint32_t> params = {m, k, n, static_cast<std::uint32_t>(orientation)};
            tessera::CodeletCharge c = charge(codelet, params);
            c.cycles = tessera::matmul_product_cycles(codelet, params, target);
            if (best.cycles == 0 || c.cycles < best.cycles) {
              best = c;
              best_orientation = orientation == tessera::MatmulOrientation::as_is ? "as-is" : "swapped";
            }
          }
          rows.push_back({half ? "matmul_half" : "matmul",
                          "m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                              " orientation=" + best_orientation,
                          best, poplibs_matmul(m, k, n, half)});
        }
  for (std::uint32_t m : batches)
    for (std::uint32_t width : widths) {
      const std::uint32_t count = m * width;
      const std::string shape = "rows=" + std::to_string(m) + " cols=" + std::to_string(width);
      rows.push_back({"relu", "count=" + std::to_string(count), charge(Codelet::relu, {count}), poplibs_relu(count)});
      rows.push_back({"add", "count=" + std::to_string(count), charge(Codelet::add, {count}), poplibs_add(count)});
      rows.push_back({"copy", "count=" + std::to_string(count), charge(Codelet::copy, {count}), poplibs_copy(count)});
      for (std::uint32_t relu : {0u, 1u})
        rows.push_back({relu ? "bias_add+relu" : "bias_add", shape, charge(Codelet::bias_add, {m, width, relu}),
                        poplibs_bias_add(m, width, relu != 0)});
      rows.push_back({"softmax", shape, charge(Codelet::softmax, {m, width, tessera::float_param(1.0f)}),
                      poplibs_softmax(m, width)});
      rows.push_back({"layer_norm", shape, charge(Codelet::layer_norm, {m, width, tessera::float_param(1e-5f)}),
                      poplibs_layer_norm(m, width)});
      // Functions: per vector of two, as poplibs' float inner loops (the bench's own transcription).
      const std::vector<std::pair<tessera::UnaryFunction, double>> unaries = {{tessera::UnaryFunction::sigmoid, 12},
                                                                              {tessera::UnaryFunction::tanh, 12},
                                                                              {tessera::UnaryFunction::erf, 36},
                                                                              {tessera::UnaryFunction::sqrt, 10},
                                                                              {tessera::UnaryFunction::pow, 624}};
      for (const auto& [function, per_vector] : unaries)
        rows.push_back(
            {std::string("unary:") + tessera::unary_function_name(function), "count=" + std::to_string(count),
             charge(Codelet::unary, {count, static_cast<std::uint32_t>(function), tessera::float_param(3.0f)}),
             poplibs_unary(count, per_vector)});
      for (const auto& [function, per_vector, per_row_scalar] :
           std::vector<std::tuple<tessera::BinaryFunction, double, double>>{
               {tessera::BinaryFunction::subtract, 3, 3}, {tessera::BinaryFunction::divide, 10, 10}}) {
        const auto f = static_cast<std::uint32_t>(function);
        const std::string name = tessera::binary_function_name(function);
        rows.push_back({"binary:" + name, "count=" + std::to_string(count), charge(Codelet::binary, {count, f}),
                        poplibs_binary(count, per_vector)});
        // A row vector: the best of BroadcastVectorInner and BinaryOp1D (DIVIDE broadcast: 6 a pair).
        rows.push_back({"binary_row:" + name, shape, charge(Codelet::binary_row, {m, width, f}),
                        function == tessera::BinaryFunction::divide ? poplibs_binary(count, 6)
                                                                    : poplibs_bias_add(m, width, false)});
        // A column: a scalar per row, BroadcastScalar2D.
        rows.push_back({"binary_column:" + name, shape, charge(Codelet::binary_column, {m, width, f}),
                        poplibs_row_scalar(m, width, per_row_scalar)});
      }
      rows.push_back({"reduce_rows", shape, charge(Codelet::reduce_rows, {m, width, 0}), poplibs_row_reduce(m, width)});
      // A swapped product's c^T [width, m] laid out as c.
      rows.push_back({"transpose", "rows=" + std::to_string(width) + " cols=" + std::to_string(m),
                      charge(Codelet::transpose, {width, m}), poplibs_transpose(width, m)});
      for (std::uint32_t parts : {2u, 4u, 16u}) {
        rows.push_back({"reduce_add", "parts=" + std::to_string(parts) + " count=" + std::to_string(count),
                        charge(Codelet::reduce_add, {parts, count}), poplibs_reduce(parts, count)});
        rows.push_back({"reduce_bias", "parts=" + std::to_string(parts) + " " + shape,
                        charge(Codelet::reduce_bias, {parts, m, width, width, 0}),
                        poplibs_reduce(parts + 1, count) + poplibs_add(count)});
      }
    }

  std::printf(
      "# codelet fidelity: target=%s; ours = the simulator's charge, poplibs = our transcription of "
      "Graphcore's estimators for the same operation (the best vertex they have), floors = MACs at peak "
      "and input bytes at load_bytes_per_cycle\n",
      target.name.c_str());
  std::map<std::string, std::vector<double>> ratios;
  std::size_t below_floor = 0;
  for (const Row& row : rows) {
    const double ratio = row.ours.cycles / row.poplibs;
    ratios[row.codelet].push_back(ratio);
    const bool floor_ok = row.ours.cycles >= row.ours.mac_floor && row.ours.cycles >= row.ours.load_floor;
    below_floor += floor_ok ? 0 : 1;
    std::printf(
        "codelet=%s %s path=%s ours=%llu poplibs=%.0f ratio=%.3f mac_floor=%llu load_floor=%llu within_25pct=%s%s\n",
        row.codelet.c_str(), row.shape.c_str(), row.ours.path, static_cast<unsigned long long>(row.ours.cycles),
        row.poplibs, ratio, static_cast<unsigned long long>(row.ours.mac_floor),
        static_cast<unsigned long long>(row.ours.load_floor), std::fabs(ratio - 1) <= 0.25 ? "yes" : "no",
        floor_ok ? "" : " BELOW_FLOOR");
  }
  std::size_t within = 0, total = 0;
  for (const auto& [codelet, values] : ratios) {
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    const std::size_t in =
        std::count_if(values.begin(), values.end(), [](double r) { return std::fabs(r - 1) <= 0.25; });
    within += in;
    total += values.size();
    std::printf("summary codelet=%s shapes=%zu within_25pct=%zu min_ratio=%.3f max_ratio=%.3f\n", codelet.c_str(),
                values.size(), in, *low, *high);
  }
  std::printf("summary shapes=%zu within_25pct=%zu below_a_floor=%zu\n", total, within, below_floor);
  return below_floor == 0 ? 0 : 1;
}
