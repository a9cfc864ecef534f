// The codelet set's names, operand shapes and cycle formulas: the machine model the simulator charges.
#include "tessera/codelets.hpp"

#include <fmt/format.h>

#include <bit>
#include <limits>
#include <stdexcept>

#include "tessera/target.hpp"

namespace tessera {

namespace {

struct CodeletShape {
  const char* name;
  std::uint32_t operands;
  std::uint32_t params;
};

// Indexed by the enum value; the order must follow enum class Codelet.
constexpr CodeletShape kShapes[kCodeletCount] = {
    {"matmul", 3, 3},      // {a, b, c}; {m, k, n}
    {"reduce_add", 2, 2},  // {in, out}; {parts, count}
    {"bias_add", 2, 3},    // {inout, bias}; {rows, cols, relu}
    {"relu", 1, 1},        // {inout}; {count}
    {"add", 3, 1},         // {a, b, out}; {count}
    {"copy", 2, 1},        // {in, out}; {count}
    {"reduce_bias", 4, 5}, // {in, own, bias, out}; {parts, rows, cols, own_stride, relu}
    {"matmul_transposed", 3, 3},  // {a, b, c}; {m, k, n}
    {"matmul_half", 3, 3},        // {a, b, c}; {m, k, n}
    {"bias_add_half", 2, 3},      // {inout, bias}; {rows, cols, relu}
    {"softmax", 2, 3},            // {in, out}; {rows, cols, scale}
    {"layer_norm", 4, 3},         // {in, gamma, beta, out}; {rows, cols, eps}
};

const CodeletShape& shape_of(Codelet codelet) {
  const auto index = static_cast<std::uint32_t>(codelet);
  // An out-of-range codelet here is a caller bug: readers reject unknown codelets first.
  if (index >= kCodeletCount)
    throw std::logic_error(fmt::format("codelet id {} is not in the codelet set", index));
  return kShapes[index];
}

void check_params(Codelet codelet, std::span<const std::uint32_t> params) {
  const CodeletShape& shape = shape_of(codelet);
  // Callers check param counts against codelet_param_count() before asking for sizes.
  if (params.size() != shape.params)
    throw std::logic_error(fmt::format("codelet {} takes {} params, got {}", shape.name,
                                       shape.params, params.size()));
}

std::uint64_t ceil_div(std::uint64_t numerator, std::uint64_t denominator) {
  return denominator == 0 ? 0 : (numerator + denominator - 1) / denominator;
}

std::uint64_t saturate(unsigned __int128 value) {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  return value > max ? max : static_cast<std::uint64_t>(value);
}

// --- The machine model ------------------------------------------------------------------
//
// A tile is barrel-threaded: its worker threads take turns in a pipeline of
// kBarrelPipelineDepth stages, so each worker issues one instruction every
// kBarrelPipelineDepth cycles and the tile as a whole issues worker_threads /
// kBarrelPipelineDepth instructions per cycle (one per cycle on the 6-worker IPU tile).
// Elementwise codelets split their elements evenly over the workers; each worker walks
// its share in 64-bit vectors of two float32 values. A vector costs a codelet-specific
// number of instructions (loads, the arithmetic and the store bundled as the IPU's
// load/store-with-pace instructions allow). So for `count` elements:
//
//   cycles = launch + kBarrelPipelineDepth * ceil(ceil(count / workers) / 2) * instructions
//   launch = kLaunchCyclesPerWorker * worker_threads  (the supervisor starts each worker
//            with a `run` instruction and waits for all of them at the end)
//
// With 6 workers that is about 2 / instructions elements per cycle for large counts, and a
// small call still pays for the slowest worker's whole vectors.
//
// Matrix multiplication runs on the accumulating matrix product (AMP) unit, which does
// target.fp32_macs_per_cycle float32 multiply-accumulates per cycle for the whole tile:
//
//   cycles = kMatmulOverheadCycles + ceil(m * k * n / fp32_macs_per_cycle)
//
// where the overhead covers loading the AMP's weights state, the supervisor's setup and
// draining the accumulators.
//
// matmul_transposed (c = a * b^T, b stored [n, k]) runs on the AMP like matmul after the
// workers transpose b into the AMP's [k, n] weight layout (strided loads: two
// instructions per vector of b):
//
//   cycles = matmul(m, k, n) + elementwise(n * k, kTransposeInstructions)
//
// matmul_half (half b, float32 a): the AMP multiplies half by half with float32
// accumulators at target.fp16_macs_per_cycle, as the IPU's f16v4sisoamp does, so the workers
// first convert the a chunk to half (one f32v2tof16 + store per vector), rounding it:
//
//   cycles = kMatmulOverheadCycles + elementwise(m * k, kToHalfInstructions)
//            + ceil(m * k * n / fp16_macs_per_cycle)
//
// Row codelets (softmax, layer_norm) give whole rows to the workers, each worker its rows
// one after another, so rows < workers leaves workers idle:
//
//   cycles = launch + kBarrelPipelineDepth * ceil(rows / workers) * per_row
//   softmax    per_row = vectors * (max + exp-and-sum + normalise) + 2 * kRowReduceInstructions
//                        + kDivideInstructions          (one reciprocal of the row sum)
//   layer_norm per_row = vectors * (mean + variance + normalise) + 2 * kRowReduceInstructions
//                        + kSqrtInstructions + kDivideInstructions
//
// with vectors = ceil(cols / 2) and exp, divide and square root costing several
// instructions (they are software sequences on the tile's floating-point unit).

constexpr std::uint64_t kBarrelPipelineDepth = 6;
constexpr std::uint64_t kLaunchCyclesPerWorker = 4;
constexpr std::uint64_t kFloatsPerVector = 2;
constexpr std::uint64_t kMatmulOverheadCycles = 40;

// Instructions per two-float vector.
constexpr std::uint64_t kCopyInstructions = 1;      // ld64 + st64 bundled
constexpr std::uint64_t kReluInstructions = 1;      // ld64, f32v2max with 0, st64 bundled
constexpr std::uint64_t kAddInstructions = 2;       // two loads, f32v2add, store
constexpr std::uint64_t kBiasAddInstructions = 2;   // load value and bias, f32v2add, store
constexpr std::uint64_t kBiasReluInstructions = 1;  // the fused max with 0 in the epilogue
// reduce_add: one load-and-add per part plus the store, per output vector.
constexpr std::uint64_t kReduceStoreInstructions = 1;
// reduce_bias: reduce_add's per-part load-and-add and store, plus one for the own partial
// (a strided load-and-add like any part), one for the bias (load and add) and the fused
// max with 0 when relu is set. Rows are walked separately (the own partial is strided),
// so a row of odd width pays a whole vector for its last float.
constexpr std::uint64_t kOwnPartialInstructions = 1;
constexpr std::uint64_t kBiasLoadAddInstructions = 1;
constexpr std::uint64_t kTransposeInstructions = 2;  // two strided loads, one paired store
constexpr std::uint64_t kToHalfInstructions = 1;     // ld64, f32v2tof16, st32 bundled
constexpr std::uint64_t kHalfBiasInstructions = 1;   // f16v2tof32 of the bias pair
// softmax per vector: max pass (ld64 + f32v2max), exp pass (scale and subtract the max,
// exp of two floats as a software sequence, accumulate, store), normalise (ld, mul, st).
constexpr std::uint64_t kSoftmaxMaxInstructions = 1;
constexpr std::uint64_t kSoftmaxExpInstructions = 1 + 6 + 1 + 1;
constexpr std::uint64_t kSoftmaxNormaliseInstructions = 1;
// layer_norm per vector: sum (ld + add), squared deviations (sub, mul-add), normalise
// (load x, gamma, beta; sub, mul, mul-add; store).
constexpr std::uint64_t kNormMeanInstructions = 1;
constexpr std::uint64_t kNormVarianceInstructions = 2;
constexpr std::uint64_t kNormApplyInstructions = 4;
constexpr std::uint64_t kRowReduceInstructions = 4;  // fold the two lanes and the partial sums
constexpr std::uint64_t kDivideInstructions = 8;     // reciprocal by Newton iterations
constexpr std::uint64_t kSqrtInstructions = 10;      // inverse square root by Newton iterations

std::uint64_t elementwise_cycles(std::uint64_t count, std::uint64_t instructions_per_vector,
                                 const Target& target) {
  const std::uint64_t workers = target.worker_threads == 0 ? 1 : target.worker_threads;
  const std::uint64_t launch = kLaunchCyclesPerWorker * workers;
  const std::uint64_t per_worker = ceil_div(count, workers);
  const std::uint64_t vectors = ceil_div(per_worker, kFloatsPerVector);
  return launch + saturate(static_cast<unsigned __int128>(kBarrelPipelineDepth) * vectors *
                           instructions_per_vector);
}

std::uint64_t matmul_cycles(std::uint64_t m, std::uint64_t k, std::uint64_t n, std::uint32_t macs_per_cycle) {
  const unsigned __int128 macs = static_cast<unsigned __int128>(m) * k * n;
  const std::uint64_t rate = macs_per_cycle == 0 ? 1 : macs_per_cycle;
  return kMatmulOverheadCycles + saturate((macs + rate - 1) / rate);
}

std::uint64_t row_cycles(std::uint64_t rows, std::uint64_t per_row_instructions, const Target& target) {
  const std::uint64_t workers = target.worker_threads == 0 ? 1 : target.worker_threads;
  return kLaunchCyclesPerWorker * workers +
         saturate(static_cast<unsigned __int128>(kBarrelPipelineDepth) * ceil_div(rows, workers) *
                  per_row_instructions);
}

}  // namespace

std::uint32_t float_param(float value) { return std::bit_cast<std::uint32_t>(value); }
float param_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

const char* codelet_name(Codelet codelet) { return shape_of(codelet).name; }

std::uint32_t codelet_operand_count(Codelet codelet) { return shape_of(codelet).operands; }

std::uint32_t codelet_param_count(Codelet codelet) { return shape_of(codelet).params; }

std::uint64_t codelet_operand_words(Codelet codelet, std::span<const std::uint32_t> params,
                                    std::uint32_t operand) {
  check_params(codelet, params);
  const CodeletShape& shape = shape_of(codelet);
  if (operand >= shape.operands)
    throw std::logic_error(fmt::format("codelet {} has {} operands, asked for operand {}",
                                       shape.name, shape.operands, operand));
  auto product = [](std::uint64_t a, std::uint64_t b) { return a * b; };  // fits: 32 x 32 bits
  switch (codelet) {
    case Codelet::matmul:
    case Codelet::matmul_transposed:
    case Codelet::matmul_half: {
      const std::uint64_t m = params[0], k = params[1], n = params[2];
      if (operand == 0) return product(m, k);
      if (operand == 1) return codelet == Codelet::matmul_half ? (product(k, n) + 1) / 2 : product(k, n);
      return product(m, n);
    }
    case Codelet::bias_add_half:
      return operand == 0 ? product(params[0], params[1]) : (std::uint64_t{params[1]} + 1) / 2;
    case Codelet::softmax:
      return product(params[0], params[1]);
    case Codelet::layer_norm:
      return operand == 1 || operand == 2 ? params[1] : product(params[0], params[1]);
    case Codelet::reduce_add:
      return operand == 0 ? product(params[0], params[1]) : params[1];
    case Codelet::bias_add:
      return operand == 0 ? product(params[0], params[1]) : params[1];
    case Codelet::relu:
    case Codelet::add:
    case Codelet::copy:
      return params[0];
    case Codelet::reduce_bias: {
      const std::uint64_t parts = params[0], rows = params[1], cols = params[2], stride = params[3];
      // Three 32-bit factors can exceed 64 bits; (rows - 1) * stride + cols cannot.
      if (operand == 0) return saturate(static_cast<unsigned __int128>(parts) * rows * cols);
      if (operand == 1) return rows == 0 || cols == 0 ? 0 : (rows - 1) * stride + cols;
      if (operand == 2) return cols;
      return rows * cols;
    }
  }
  throw std::logic_error("unreachable codelet");
}

std::uint64_t codelet_cycles(Codelet codelet, std::span<const std::uint32_t> params,
                             const Target& target) {
  check_params(codelet, params);
  switch (codelet) {
    case Codelet::matmul:
      return matmul_cycles(params[0], params[1], params[2], target.fp32_macs_per_cycle);
    case Codelet::matmul_transposed:
      return matmul_cycles(params[0], params[1], params[2], target.fp32_macs_per_cycle) +
             elementwise_cycles(std::uint64_t{params[2]} * params[1], kTransposeInstructions, target);
    case Codelet::matmul_half:
      return matmul_cycles(params[0], params[1], params[2], target.fp16_macs_per_cycle) +
             elementwise_cycles(std::uint64_t{params[0]} * params[1], kToHalfInstructions, target);
    case Codelet::bias_add_half:
      return elementwise_cycles(static_cast<std::uint64_t>(params[0]) * params[1],
                                kBiasAddInstructions + kHalfBiasInstructions +
                                    (params[2] != 0 ? kBiasReluInstructions : 0),
                                target);
    case Codelet::softmax: {
      const std::uint64_t vectors = ceil_div(params[1], kFloatsPerVector);
      return row_cycles(params[0],
                        vectors * (kSoftmaxMaxInstructions + kSoftmaxExpInstructions + kSoftmaxNormaliseInstructions) +
                            kRowReduceInstructions * 2 + kDivideInstructions,
                        target);
    }
    case Codelet::layer_norm: {
      const std::uint64_t vectors = ceil_div(params[1], kFloatsPerVector);
      return row_cycles(params[0],
                        vectors * (kNormMeanInstructions + kNormVarianceInstructions + kNormApplyInstructions) +
                            kRowReduceInstructions * 2 + kSqrtInstructions + kDivideInstructions,
                        target);
    }
    case Codelet::reduce_add:
      return elementwise_cycles(params[1],
                                static_cast<std::uint64_t>(params[0]) + kReduceStoreInstructions,
                                target);
    case Codelet::bias_add:
      return elementwise_cycles(static_cast<std::uint64_t>(params[0]) * params[1],
                                kBiasAddInstructions + (params[2] != 0 ? kBiasReluInstructions : 0),
                                target);
    case Codelet::relu:
      return elementwise_cycles(params[0], kReluInstructions, target);
    case Codelet::add:
      return elementwise_cycles(params[0], kAddInstructions, target);
    case Codelet::copy:
      return elementwise_cycles(params[0], kCopyInstructions, target);
    case Codelet::reduce_bias: {
      const std::uint64_t padded = std::uint64_t{params[1]} * ceil_div(params[2], kFloatsPerVector) * kFloatsPerVector;
      const std::uint64_t instructions = std::uint64_t{params[0]} + kOwnPartialInstructions + kBiasLoadAddInstructions +
                                         kReduceStoreInstructions + (params[4] != 0 ? kBiasReluInstructions : 0);
      return elementwise_cycles(padded, instructions, target);
    }
  }
  throw std::logic_error("unreachable codelet");
}

}  // namespace tessera
