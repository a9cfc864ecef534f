// The codelet set's names, operand shapes and cycle formulas: the machine model the simulator charges.
#include "tessera/codelets.hpp"

#include <fmt/format.h>

#include <algorithm>
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
    {"matmul", 3, 4},             // {a, b, c}; {m, k, n, orientation}
    {"reduce_add", 2, 2},         // {in, out}; {parts, count}
    {"bias_add", 2, 3},           // {inout, bias}; {rows, cols, relu}
    {"relu", 1, 1},               // {inout}; {count}
    {"add", 3, 1},                // {a, b, out}; {count}
    {"copy", 2, 1},               // {in, out}; {count}
    {"reduce_bias", 4, 5},        // {in, own, bias, out}; {parts, rows, cols, own_stride, relu}
    {"matmul_transposed", 3, 4},  // {a, b, c}; {m, k, n, orientation}
    {"matmul_half", 3, 4},        // {a, b, c}; {m, k, n, orientation}
    {"bias_add_half", 2, 3},      // {inout, bias}; {rows, cols, relu}
    {"softmax", 2, 3},            // {in, out}; {rows, cols, scale}
    {"layer_norm", 4, 3},         // {in, gamma, beta, out}; {rows, cols, eps}
    {"unary", 2, 3},              // {in, out}; {count, function, exponent}
    {"binary", 3, 2},             // {a, b, out}; {count, function}
    {"binary_row", 2, 3},         // {inout, row}; {rows, cols, function}
    {"reduce_rows", 2, 3},        // {in, out}; {rows, cols, mean}
    {"binary_column", 2, 3},      // {inout, column}; {rows, cols, function}
    {"transpose", 2, 2},          // {in, out}; {rows, cols}
    {"conv", 4, kConvParams},     // {in, weights, bias, out}; ConvParam
    {"pool", 2, kPoolParams},     // {in, out}; PoolParam
    {"clip", 2, 3},               // {in, out}; {count, low, high}
};

const CodeletShape& shape_of(Codelet codelet) {
  const auto index = static_cast<std::uint32_t>(codelet);
  // An out-of-range codelet here is a caller bug: readers reject unknown codelets first.
  if (index >= kCodeletCount) throw std::logic_error(fmt::format("codelet id {} is not in the codelet set", index));
  return kShapes[index];
}

void check_params(Codelet codelet, std::span<const std::uint32_t> params) {
  const CodeletShape& shape = shape_of(codelet);
  // Callers check param counts against codelet_param_count() before asking for sizes.
  if (params.size() != shape.params)
    throw std::logic_error(fmt::format("codelet {} takes {} params, got {}", shape.name, shape.params, params.size()));
}

std::uint64_t ceil_div(std::uint64_t numerator, std::uint64_t denominator) {
  return denominator == 0 ? 0 : (numerator + denominator - 1) / denominator;
}

std::uint64_t saturate(unsigned __int128 value) {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  return value > max ? max : static_cast<std::uint64_t>(value);
}

// --- The machine model (v2) ---------------------------------------------------------------
//
// Shapes and constants follow Graphcore's own cycle estimators for the GC200 (poplibs:
// lib/poplin/PerformanceEstimation.hpp, lib/popops/*CycleEstimators*, lib/popnn); each
// constant's source is in docs/targets.md. Our formulas are our own codelets' costs.
//
// A tile is barrel-threaded: each of its `worker_threads` workers issues one instruction
// every `worker_threads` tile cycles, so a codelet whose slowest worker needs w worker cycles
// takes worker_threads * w tile cycles, plus what the supervisor does before and after.
//
// Elementwise codelets (add, relu, copy, bias_add) split their elements evenly over the
// workers, each walking its share in 64-bit vectors of two floats:
//
//   cycles = supervisor + workers * (worker_fixed + vectors_per_worker * cycles_per_vector)
//
// Reductions (reduce_add, reduce_bias) walk loops of four floats (two 64-bit loads), each
// loop loading that float of every part: (3 * parts + 7) worker cycles a loop, loops split
// over the workers, 32 worker cycles fixed (the shape of poplibs' ReduceAdd).
//
// Row steps (a row's max or sum, a per-row scalar applied to the row) give whole rows to the
// workers: ceil(rows / workers) rows for the slowest, each row a fixed cost plus cycles per
// vector.
//
// A fused codelet (bias_add with relu, reduce_bias, softmax, layer_norm) is charged as its
// steps run one after another, each as that step alone is charged: fusion saves buffers and
// calls in the package, not cycles (poplibs runs a vertex per step, loops no faster than ours).
//
// Matmuls run on the AMP in passes. One pass loads input_channels x output_channels weights
// into the unit (at load_bytes_per_cycle: weight bytes / 16 cycles for the GC200), then the
// workers stream their share of the field through it, one field row every
//   core = input_channels * output_channels / macs_per_cycle   worker cycles,
// after an accumulator-pipeline fill:
//
//   pass   = pass_overhead + weight_load + workers * max(worker_fill, worker_base + core * r)
//   cycles = call_overhead + output_groups * (group_overhead + zeroing)
//            + input_groups * output_groups * pass
//
// with r = ceil(field / workers), input_groups = ceil(k / input_channels) and
// output_groups = ceil(outputs / output_channels). The orientation says what the field is:
// as_is streams a's m rows against b's n columns as weights; swapped streams b's n columns
// against a's m rows, leaving c^T [n, m] (a transpose call lays it out as c, as poplibs'
// planner charges a swapped product its output's rearrangement). A field whose
// k values are not contiguous in memory (b [k, n] swapped, b [n, k] as_is) is first
// transposed by the workers; matmul_half's b is stored as its orientation streams it, so it
// never is. Half weights (matmul_half) first cast a to half.
//
// A matmul may instead run on the workers (worker MAC): outputs split evenly over them,
// each a dot product of k at one worker cycle per two floats (two per float when k is odd:
// no 64-bit pairs), plus a fixed cost per output; matmul_half casts a, then takes four
// halves a cycle. The codelet takes whichever path is faster; for tiny products that is the
// workers.

// Supervisor and worker fixed costs, in worker cycles unless named tile cycles.
constexpr std::uint64_t kSupervisorCycles = 11;  // tile cycles: start and join the workers
constexpr std::uint64_t kAddWorkerFixed = 29, kAddPerVector = 3;
constexpr std::uint64_t kReluWorkerFixed = 26, kReluPerVector = 1;
constexpr std::uint64_t kCopyWorkerFixed = 17, kCopyPerVector = 1;
constexpr std::uint64_t kBiasAddWorkerFixed = 29, kBiasAddPerVector = 3;  // like add, bias re-read
constexpr std::uint64_t kHalfBiasPerVector = 1;                           // f16v2tof32 of the bias pair
constexpr std::uint64_t kReduceWorkerFixed = 32, kReduceLoopFixed = 7, kReducePerPart = 3;
constexpr std::uint64_t kReduceFloatsPerLoop = 4;
constexpr std::uint64_t kCastWorkerFixed = 42;  // f32 -> f16: two cycles per four floats
constexpr std::uint64_t kCastCyclesPerFour = 2;
// Transposes walk 2x2 grains of floats, the source rows split over the workers (poplibs'
// supervisor transpose): 3 cycles a grain, 6 more a pair of rows when the block is wider than
// one grain, 47 a worker (56 for a single column grain, 29 for a single grain).
constexpr std::uint64_t kTransposeWorkerFixed = 47, kTransposeNarrowFixed = 56, kTransposeSingleGrain = 29;
constexpr std::uint64_t kTransposePerGrain = 3, kTransposePerRowPair = 6;
// Row steps: a row's fold (max or sum), a per-row scalar's set-up, a square root and a divide (5 each).
struct RowStep {
  std::uint64_t worker_fixed, per_row;
};
constexpr RowStep kFoldStep{17, 12};    // popops continuous reduce: 17 a worker, 12 a row
constexpr RowStep kScalarStep{20, 28};  // popops BroadcastScalar2D: 20 a worker, 28 a row
constexpr std::uint64_t kInverseSqrtCycles = 10;
constexpr std::uint64_t kReduceRowPerVector = 1;         // a row sum walks 64-bit pairs
constexpr std::uint64_t kSquaredDeviationPerVector = 2;  // subtract the mean, then multiply-accumulate
constexpr std::uint64_t kScalarPerVector = 3;            // subtract or multiply by the row's scalar, as add
constexpr std::uint64_t kExpPerVector = 6;
// Unary and binary functions, worker cycles per vector of two floats: poplibs' float inner
// loops (popopsCycleEstimators: SIGMOID and TANH 12, SQRT 10 per two; ERF 18 and POWER 312 per
// element; SQUARE 2 per two; DIVIDE 10 per two, 6 when broadcast). Multiply and subtract walk
// like add and bias_add.
constexpr std::uint64_t kUnaryWorkerFixed = 26;  // relu's loop set-up
constexpr std::uint64_t kSigmoidPerVector = 12, kTanhPerVector = 12, kSqrtPerVector = 10, kErfPerVector = 2 * 18;
constexpr std::uint64_t kSquarePerVector = 2, kPowerPerVector = 2 * 312;
constexpr std::uint64_t kDividePerVector = 10, kDivideRowPerVector = 6;
// The AMP.
constexpr std::uint64_t kAmpCallOverhead = 63;       // tile cycles: vertex state, worklists
constexpr std::uint64_t kAmpGroupOverhead = 30;      // tile cycles per output group
constexpr std::uint64_t kAmpPassOverheadFloat = 25;  // tile cycles per pass, float inputs
constexpr std::uint64_t kAmpPassOverheadHalf = 43;   // half inputs also re-point half pointers
constexpr std::uint64_t kAmpWorkerFillFloat = 46, kAmpWorkerBaseFloat = 22;
constexpr std::uint64_t kAmpWorkerFillHalf = 25, kAmpWorkerBaseHalf = 18;
constexpr std::uint64_t kAmpZeroingFixed = 2;  // worker cycles; float zeroes per row too
// The worker MAC path.
// poplibs HorizontalMac: 16 + 19 + 16 a worker's run, 7 a row plus the dot product's own 7.
constexpr std::uint64_t kMacCallOverhead = 58, kMacCallOverheadHalf = 63, kMacWorkerFixed = 51, kMacPerOutput = 14;
constexpr std::uint64_t kHalvesPerLoad = 4;

constexpr std::uint64_t kFloatsPerVector = 2;
constexpr std::uint64_t kFloatBytes = 4, kHalfBytes = 2;

std::uint64_t workers_of(const Target& target) { return target.worker_threads == 0 ? 1 : target.worker_threads; }

std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return saturate(static_cast<unsigned __int128>(a) * b); }
std::uint64_t add(std::uint64_t a, std::uint64_t b) { return saturate(static_cast<unsigned __int128>(a) + b); }

/// A multi-worker codelet over `count` elements split evenly.
std::uint64_t elementwise_cycles(std::uint64_t count, std::uint64_t worker_fixed, std::uint64_t per_vector,
                                 const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t vectors = ceil_div(ceil_div(count, workers), kFloatsPerVector);
  return add(kSupervisorCycles, mul(workers, add(worker_fixed, mul(vectors, per_vector))));
}

/// Transposing a [rows, cols] block of floats into [cols, rows].
std::uint64_t transpose_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t row_grains = ceil_div(ceil_div(rows, workers), 2), col_grains = ceil_div(cols, 2);
  std::uint64_t worker = kTransposeSingleGrain;
  if (col_grains == 1 && row_grains > 1) worker = add(kTransposeNarrowFixed, mul(row_grains, kTransposePerGrain));
  else if (col_grains > 1)
    worker =
        add(kTransposeWorkerFixed, mul(row_grains, add(kTransposePerRowPair, mul(col_grains, kTransposePerGrain))));
  return add(kSupervisorCycles, mul(workers, worker));
}

/// A reduction of `parts` over `loops` four-float loops.
std::uint64_t reduce_cycles(std::uint64_t loops, std::uint64_t parts, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t per_loop = add(kReduceLoopFixed, mul(kReducePerPart, parts));
  return add(kSupervisorCycles, mul(workers, add(kReduceWorkerFixed, mul(ceil_div(loops, workers), per_loop))));
}

/// A row step: `rows` split whole over the workers, each a fixed cost plus `per_vector` a vector.
std::uint64_t row_cycles(std::uint64_t rows, std::uint64_t cols, RowStep step, std::uint64_t extra_per_row,
                         std::uint64_t per_vector, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t row = add(step.per_row + extra_per_row, mul(ceil_div(cols, kFloatsPerVector), per_vector));
  return add(kSupervisorCycles, mul(workers, add(step.worker_fixed, mul(ceil_div(rows, workers), row))));
}

/// bias_add's steps: the bias (a float or half vector) added to every row, then relu if fused.
std::uint64_t bias_cycles(std::uint64_t rows, std::uint64_t cols, bool half, bool relu, const Target& target) {
  const std::uint64_t count = mul(rows, cols);
  const std::uint64_t bias =
      elementwise_cycles(count, kBiasAddWorkerFixed, kBiasAddPerVector + (half ? kHalfBiasPerVector : 0), target);
  return relu ? add(bias, elementwise_cycles(count, kReluWorkerFixed, kReluPerVector, target)) : bias;
}

/// softmax's steps: the row's max, scale and subtract it, exp, the row's sum, divide by it.
std::uint64_t softmax_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t fold = row_cycles(rows, cols, kFoldStep, 0, kReduceRowPerVector, target);
  const std::uint64_t subtract = row_cycles(rows, cols, kScalarStep, 0, kScalarPerVector, target);
  const std::uint64_t exp = elementwise_cycles(mul(rows, cols), kUnaryWorkerFixed, kExpPerVector, target);
  const std::uint64_t divide = row_cycles(rows, cols, kScalarStep, 0, kDividePerVector, target);
  return add(add(mul(2, fold), subtract), add(exp, divide));
}

/// layer_norm's steps: the row's mean, its squared deviation, subtract the mean, multiply by
/// the inverse standard deviation (found per row), then gamma and beta as bias vectors.
std::uint64_t layer_norm_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t mean = row_cycles(rows, cols, kFoldStep, 0, kReduceRowPerVector, target);
  const std::uint64_t deviation = row_cycles(rows, cols, kFoldStep, 0, kSquaredDeviationPerVector, target);
  const std::uint64_t subtract = row_cycles(rows, cols, kScalarStep, 0, kScalarPerVector, target);
  const std::uint64_t scale = row_cycles(rows, cols, kScalarStep, kInverseSqrtCycles, kScalarPerVector, target);
  const std::uint64_t gamma_beta = mul(2, bias_cycles(rows, cols, false, false, target));
  return add(add(mean, deviation), add(add(subtract, scale), gamma_beta));
}

struct Amp {
  std::uint64_t input_channels, output_channels, macs_per_cycle, weight_bytes;
  std::uint64_t pass_overhead, worker_fill, worker_base;
  bool zeroes_rows;  ///< float partials are zeroed row by row on the first input group
  /// Worker cycles a field row takes in one pass: the pass's MACs at the peak rate.
  std::uint64_t core() const { return input_channels * output_channels / std::max<std::uint64_t>(macs_per_cycle, 1); }
};

Amp amp_of(Codelet codelet, const Target& target) {
  if (codelet == Codelet::matmul_half)
    return {target.amp_fp16_input_channels,
            target.amp_fp16_output_channels,
            target.fp16_macs_per_cycle,
            kHalfBytes,
            kAmpPassOverheadHalf,
            kAmpWorkerFillHalf,
            kAmpWorkerBaseHalf,
            false};
  return {target.amp_fp32_input_channels,
          target.amp_fp32_output_channels,
          target.fp32_macs_per_cycle,
          kFloatBytes,
          kAmpPassOverheadFloat,
          kAmpWorkerFillFloat,
          kAmpWorkerBaseFloat,
          true};
}

/// The AMP path: `field` rows streamed against `outputs` columns of weights, `k` deep.
std::uint64_t amp_cycles(const Amp& amp, std::uint64_t field, std::uint64_t k, std::uint64_t outputs,
                         const Target& target, std::uint64_t& passes) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t input_groups = ceil_div(k, amp.input_channels);
  const std::uint64_t output_groups = ceil_div(outputs, amp.output_channels);
  passes = mul(input_groups, output_groups);
  const std::uint64_t rows = ceil_div(field, workers);
  const std::uint64_t core = amp.core();
  const std::uint64_t weight_load = ceil_div(amp.input_channels * amp.output_channels * amp.weight_bytes,
                                             std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  const std::uint64_t worker = std::max(amp.worker_fill, add(amp.worker_base, mul(core, rows)));
  const std::uint64_t pass = add(add(amp.pass_overhead, weight_load), mul(workers, worker));
  const std::uint64_t zeroing = mul(workers, add(kAmpZeroingFixed, amp.zeroes_rows ? mul(core, rows) : 0));
  return add(add(kAmpCallOverhead, mul(output_groups, add(kAmpGroupOverhead, zeroing))), mul(passes, pass));
}

/// Casting `count` floats to half, split evenly over the workers in fours.
std::uint64_t cast_to_half_cycles(std::uint64_t count, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t fours = ceil_div(ceil_div(count, workers), 4);
  return add(kSupervisorCycles, mul(workers, add(kCastWorkerFixed, mul(fours, kCastCyclesPerFour))));
}

/// The worker MAC path: m x n dot products of `dot` worker cycles split over the workers (half:
/// both operands half, a cast first).
std::uint64_t worker_mac_cycles(std::uint64_t m, std::uint64_t dot, std::uint64_t n, bool half, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  return add(half ? kMacCallOverheadHalf : kMacCallOverhead,
             mul(workers, add(kMacWorkerFixed, mul(ceil_div(mul(m, n), workers), add(kMacPerOutput, dot)))));
}

CodeletCharge matmul_charge(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t m = params[0], k = params[1], n = params[2];
  const bool swapped = params[kMatmulOrientationParam] == static_cast<std::uint32_t>(MatmulOrientation::swapped);
  const Amp amp = amp_of(codelet, target);
  CodeletCharge charge;
  // Work the AMP's operands need first: a cast of a to half, or a transpose of b when its
  // k values are not contiguous for the field (matmul_transposes_b).
  const bool half = codelet == Codelet::matmul_half;
  const std::uint64_t cast = half ? cast_to_half_cycles(mul(m, k), target) : 0;
  std::uint64_t prepare = cast;
  if (matmul_transposes_b(codelet, params[kMatmulOrientationParam]))
    prepare = add(prepare, transpose_cycles(k, n, target));
  std::uint64_t passes = 0;
  const std::uint64_t on_amp =
      add(prepare, swapped ? amp_cycles(amp, n, k, m, target, passes) : amp_cycles(amp, m, k, n, target, passes));
  const std::uint64_t on_workers =
      add(cast, worker_mac_cycles(m, matmul_worker_dot_cycles(codelet, params), n, half, target));
  if (on_workers < on_amp) {
    charge.cycles = on_workers;
    charge.path = "worker-mac";
  } else {
    charge.cycles = on_amp;
    charge.path = "amp";
    charge.amp_passes = passes;
  }
  charge.mac_floor = ceil_div(mul(mul(m, k), n), std::max<std::uint64_t>(amp.macs_per_cycle, 1));
  const std::uint64_t b_bytes =
      codelet == Codelet::matmul_half ? mul(ceil_div(mul(k, n), 2), kFloatBytes) : mul(mul(k, n), kFloatBytes);
  charge.load_floor =
      ceil_div(add(mul(mul(m, k), kFloatBytes), b_bytes), std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  return charge;
}

// Convolutions and pooling. A conv call runs on the AMP over kernel positions or on the
// workers, whichever is faster, as poplibs' planner picks a vertex per tile:
//
// AMP (poplin PerformanceEstimation.hpp, getConvPartialnx1SupervisorCycleInnerLoopEstimate and
// ...OuterLoopEstimate): per kernel position and pass (an input-channel group by an output-
// channel group of the AMP's shape) the weights load (bytes / load_bytes_per_cycle + 15), then
// each worker streams its share of the output field: ceil(pixels / workers) pixels in
// ceil(rows / workers) worklist entries, 19 + 45 an entry + core a pixel past three an entry.
//   inner = KH * (14 + KW * (12 + load + workers * worker))
//   cycles = overhead + conv_groups * (16 + in_groups * (14 + out_groups * (14 + inner))) + zeroing
// Workers (getConvPartialHorizontalMacSupervisor*Estimate): per conv group, 48 tile cycles and
// each worker's pixels, for every kernel position, a dot product of the group's input channels
// (two floats a cycle) per output channel, 20 a worklist entry.
// Depthwise (one input channel a group: poplin's ConvPartialVerticalMac shape,
// getConvPartialVerticalMacSupervisor*Estimate): the conv groups side by side in the channels of
// a pixel, two a cycle; the workers share out output rows x kernel positions, 15 cycles an item,
// and their partials are summed after (10 + (9 + 2 (workers - 1)) a four outputs).
// The bias and ReLU are a bias_add step over the output after any of them.
// Pooling (popnn PoolingDef.hpp getPoolingCycles: 3 cycles a vector, a row loop's overhead per
// worklist row): per kernel position, each worker takes its share of output pixel x channel-pair
// vectors, 3 cycles a vector, 30 a worklist row.
constexpr std::uint64_t kConvAmpOverhead = 90, kConvWeightLoadFixed = 15;
constexpr std::uint64_t kConvKernelRow = 14, kConvKernelPosition = 12, kConvGroupFixed = 16, kConvInGroupFixed = 14,
                        kConvOutGroupFixed = 14;
constexpr std::uint64_t kConvWorkerFixed = 19, kConvEntryFixed = 45, kConvEntryPixelsInFixed = 3;
constexpr std::uint64_t kHmacOverhead = 60, kHmacGroupFixed = 48, kHmacWorkerFixed = 16, kHmacEntryFixed = 20,
                        kHmacPerOutput = 2;
constexpr std::uint64_t kPoolOverhead = 50, kPoolPerRow = 30, kPoolPerVector = 3;
constexpr std::uint64_t kVmacOverhead = 50, kVmacItemFixed = 15, kVmacReduceFixed = 10, kVmacReducePerFour = 9,
                        kVmacReducePerWorker = 2;

CodeletCharge conv_charge(std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t out_rows = params[kConvOutRows], pixels = mul(out_rows, params[kConvOutWidth]);
  const std::uint64_t out_channels = params[kConvOutChannels], group_in = params[kConvGroupInChannels];
  const std::uint64_t group_out = std::max<std::uint64_t>(params[kConvGroupOutChannels], 1);
  const std::uint64_t kernel_h = params[kConvKernelH], kernel_w = params[kConvKernelW];
  const std::uint64_t positions = mul(kernel_h, kernel_w);
  const std::uint64_t conv_groups =
      out_channels == 0 ? 0 : (out_channels - 1 + params[kConvFirstOutChannel]) / group_out + 1;
  const std::uint64_t outs_per_group = std::min(out_channels, group_out);
  const std::uint64_t entries = std::max<std::uint64_t>(ceil_div(out_rows, workers), 1);
  const std::uint64_t pixels_per_worker = ceil_div(pixels, workers);
  const Amp amp = amp_of(Codelet::matmul, target);
  const std::uint64_t in_groups = ceil_div(group_in, amp.input_channels);
  const std::uint64_t out_groups = ceil_div(outs_per_group, amp.output_channels);
  const std::uint64_t load = add(ceil_div(amp.input_channels * amp.output_channels * amp.weight_bytes,
                                          std::max<std::uint32_t>(target.load_bytes_per_cycle, 1)),
                                 kConvWeightLoadFixed);
  const std::uint64_t beyond = pixels_per_worker > 3 * entries ? pixels_per_worker - 3 * entries : 0;
  const std::uint64_t worker = add(add(kConvWorkerFixed, mul(entries, kConvEntryFixed)), mul(beyond, amp.core()));
  const std::uint64_t inner =
      mul(kernel_h, add(kConvKernelRow, mul(kernel_w, add(add(kConvKernelPosition, load), mul(workers, worker)))));
  const std::uint64_t per_group =
      add(kConvGroupFixed, mul(in_groups, add(kConvInGroupFixed, mul(out_groups, add(kConvOutGroupFixed, inner)))));
  const std::uint64_t zeroing = mul(workers, ceil_div(ceil_div(mul(pixels, out_channels), workers), kFloatsPerVector));
  const std::uint64_t on_amp = add(add(kConvAmpOverhead, mul(conv_groups, per_group)), zeroing);
  const std::uint64_t dot = add(ceil_div(group_in, kFloatsPerVector), kHmacPerOutput);
  const std::uint64_t hmac_worker =
      add(kHmacWorkerFixed,
          mul(positions, add(mul(kHmacEntryFixed, entries), mul(mul(pixels_per_worker, outs_per_group), dot))));
  const std::uint64_t on_workers =
      add(kHmacOverhead, mul(conv_groups, add(kHmacGroupFixed, mul(workers, hmac_worker))));
  // Depthwise: only where every group has one input channel.
  std::uint64_t vertical = std::numeric_limits<std::uint64_t>::max();
  if (group_in == 1) {
    const std::uint64_t items = ceil_div(mul(out_rows, positions), workers);
    const std::uint64_t per_item =
        add(kVmacItemFixed, mul(params[kConvOutWidth], ceil_div(mul(conv_groups, outs_per_group), kFloatsPerVector)));
    const std::uint64_t reduction = add(
        kVmacReduceFixed,
        mul(add(kVmacReducePerFour, mul(kVmacReducePerWorker, workers - 1)), ceil_div(mul(pixels, out_channels), 4)));
    vertical = add(add(kVmacOverhead, mul(workers, mul(items, per_item))), reduction);
  }
  const std::uint32_t flags = params[kConvFlags];
  const std::uint64_t epilogue = (flags & (kConvHasBias | kConvRelu)) != 0
                                     ? bias_cycles(pixels, out_channels, false, (flags & kConvRelu) != 0, target)
                                     : 0;
  CodeletCharge charge;
  if (vertical < std::min(on_workers, on_amp)) {
    charge.cycles = add(vertical, epilogue);
    charge.path = "vertical-mac";
  } else if (on_workers < on_amp) {
    charge.cycles = add(on_workers, epilogue);
    charge.path = "worker-mac";
  } else {
    charge.cycles = add(on_amp, epilogue);
    charge.path = "amp";
    charge.amp_passes = mul(mul(conv_groups, positions), mul(in_groups, out_groups));
  }
  charge.mac_floor = ceil_div(mul(mul(pixels, out_channels), mul(positions, group_in)),
                              std::max<std::uint64_t>(amp.macs_per_cycle, 1));
  const std::uint64_t input_words = add(mul(mul(params[kConvInRows], params[kConvInWidth]), params[kConvInChannels]),
                                        mul(mul(positions, group_in), out_channels));
  charge.load_floor = ceil_div(mul(input_words, kFloatBytes), std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  return charge;
}

CodeletCharge pool_charge(std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t pixels = mul(params[kPoolOutRows], params[kPoolOutWidth]);
  const std::uint64_t positions = mul(params[kPoolKernelH], params[kPoolKernelW]);
  const std::uint64_t vectors = mul(pixels, ceil_div(params[kPoolChannels], kFloatsPerVector));
  const std::uint64_t rows = std::max<std::uint64_t>(ceil_div(params[kPoolOutRows], workers), 1);
  // An average scales each output vector once more by 1 / count.
  const bool average = params[kPoolMode] != static_cast<std::uint32_t>(PoolMode::max);
  const std::uint64_t per_worker = ceil_div(vectors, workers);
  const std::uint64_t worker =
      add(mul(positions, add(mul(kPoolPerRow, rows), mul(kPoolPerVector, per_worker))), average ? per_worker : 0);
  CodeletCharge charge;
  charge.path = "workers";
  charge.cycles = add(kPoolOverhead, mul(workers, worker));
  charge.load_floor =
      ceil_div(mul(mul(mul(params[kPoolInRows], params[kPoolInWidth]), params[kPoolChannels]), kFloatBytes),
               std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  return charge;
}

}  // namespace

std::string window_params_problem(Codelet codelet, std::span<const std::uint32_t> params) {
  if (codelet != Codelet::conv && codelet != Codelet::pool) return "";
  check_params(codelet, params);
  const bool conv = codelet == Codelet::conv;
  const std::uint32_t first_geometry = conv ? kConvKernelH : kPoolKernelH;
  for (std::uint32_t i = first_geometry; i < first_geometry + 6; ++i)
    if (params[i] == 0) return "its kernel, strides and dilations must be positive";
  if (!conv) return params[kPoolMode] < kPoolModeCount ? "" : fmt::format("unknown pool mode {}", params[kPoolMode]);
  const std::uint64_t group_out = params[kConvGroupOutChannels], group_in = params[kConvGroupInChannels];
  if (group_out == 0 || group_in == 0) return "its groups' channel counts must be positive";
  if (params[kConvFirstOutChannel] >= group_out) return "its first output channel must lie inside its first group";
  if (params[kConvOutChannels] == 0) return "";
  const std::uint64_t groups =
      (params[kConvOutChannels] - 1 + std::uint64_t{params[kConvFirstOutChannel]}) / group_out + 1;
  if (groups * group_in > params[kConvInChannels])
    return fmt::format("its {} groups of {} input channels reach past the patch's {} channels", groups, group_in,
                       params[kConvInChannels]);
  return "";
}

std::uint32_t float_param(float value) { return std::bit_cast<std::uint32_t>(value); }
float param_float(std::uint32_t bits) { return std::bit_cast<float>(bits); }

const char* codelet_name(Codelet codelet) { return shape_of(codelet).name; }

std::uint32_t function_param(Codelet codelet) {
  return codelet == Codelet::binary_row || codelet == Codelet::binary_column ? 2 : 1;
}

std::uint64_t worker_dot_cycles(std::uint64_t k, bool half) {
  const std::uint64_t per_load = half ? kHalvesPerLoad : kFloatsPerVector;
  for (std::uint64_t width = per_load; width > 1; width /= 2)
    if (k % width == 0) return width == per_load ? k / width : 2 * (k / width) + 1;
  return 2 * k + 1;
}

std::uint64_t matmul_worker_dot_cycles(Codelet codelet, std::span<const std::uint32_t> params) {
  const std::uint64_t k = params[1];
  // b [k, n]: a column's values are n apart, so no 64-bit pair is contiguous.
  const bool contiguous = matmul_b_is_n_by_k(codelet, params[kMatmulOrientationParam]) || params[2] == 1;
  return contiguous ? worker_dot_cycles(k, codelet == Codelet::matmul_half) : 2 * k + 1;
}

const char* unary_function_name(UnaryFunction function) {
  constexpr const char* kNames[kUnaryFunctionCount] = {"sigmoid", "tanh", "erf", "sqrt", "pow"};
  const auto index = static_cast<std::uint32_t>(function);
  return index < kUnaryFunctionCount ? kNames[index] : "?";
}

const char* binary_function_name(BinaryFunction function) {
  constexpr const char* kNames[kBinaryFunctionCount] = {"subtract", "multiply", "divide", "add"};
  const auto index = static_cast<std::uint32_t>(function);
  return index < kBinaryFunctionCount ? kNames[index] : "?";
}

std::uint32_t codelet_operand_count(Codelet codelet) { return shape_of(codelet).operands; }

std::uint32_t codelet_param_count(Codelet codelet) { return shape_of(codelet).params; }

std::uint64_t codelet_operand_words(Codelet codelet, std::span<const std::uint32_t> params, std::uint32_t operand) {
  check_params(codelet, params);
  const CodeletShape& shape = shape_of(codelet);
  if (operand >= shape.operands)
    throw std::logic_error(
        fmt::format("codelet {} has {} operands, asked for operand {}", shape.name, shape.operands, operand));
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
    case Codelet::unary:
    case Codelet::binary:
      return params[0];
    case Codelet::binary_row:
      return operand == 0 ? product(params[0], params[1]) : params[1];
    case Codelet::reduce_rows:
    case Codelet::binary_column:
      return operand == 0 ? product(params[0], params[1]) : params[0];
    case Codelet::transpose:
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
    case Codelet::clip:
      return params[0];
    case Codelet::conv: {
      const std::uint64_t out_channels = params[kConvOutChannels];
      if (operand == 0)
        return saturate(static_cast<unsigned __int128>(product(params[kConvInRows], params[kConvInWidth])) *
                        params[kConvInChannels]);
      if (operand == 1)
        return saturate(static_cast<unsigned __int128>(product(params[kConvKernelH], params[kConvKernelW])) *
                        product(params[kConvGroupInChannels], out_channels));
      if (operand == 2) return (params[kConvFlags] & kConvHasBias) != 0 ? out_channels : 0;
      return saturate(static_cast<unsigned __int128>(product(params[kConvOutRows], params[kConvOutWidth])) *
                      out_channels);
    }
    case Codelet::pool: {
      const bool in = operand == 0;
      return saturate(static_cast<unsigned __int128>(
                          product(params[in ? kPoolInRows : kPoolOutRows], params[in ? kPoolInWidth : kPoolOutWidth])) *
                      params[kPoolChannels]);
    }
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

std::uint64_t function_cycles_per_vector(Codelet codelet, std::span<const std::uint32_t> params) {
  check_params(codelet, params);
  if (codelet == Codelet::unary) {
    switch (static_cast<UnaryFunction>(params[1])) {
      case UnaryFunction::sigmoid:
        return kSigmoidPerVector;
      case UnaryFunction::tanh:
        return kTanhPerVector;
      case UnaryFunction::erf:
        return kErfPerVector;
      case UnaryFunction::sqrt:
        return kSqrtPerVector;
      case UnaryFunction::pow:
        return param_float(params[2]) == 2.0f ? kSquarePerVector : kPowerPerVector;  // by 2: a square
    }
    return kPowerPerVector;  // an unknown function is refused at load; the slowest is charged
  }
  const bool divide = params[function_param(codelet)] == static_cast<std::uint32_t>(BinaryFunction::divide);
  if (codelet == Codelet::binary) return divide ? kDividePerVector : kAddPerVector;
  if (codelet == Codelet::binary_row) return divide ? kDivideRowPerVector : kBiasAddPerVector;
  if (codelet == Codelet::binary_column) return divide ? kDividePerVector : kScalarPerVector;
  throw std::logic_error(fmt::format("codelet {} has no function", codelet_name(codelet)));
}

std::uint32_t codelet_code_bytes(Codelet codelet) {
  // Indexed by the enum value: the AMP's supervisor and worker loops are the largest.
  // unary holds every function's loop (erf's polynomial, pow's log and exp), binary four.
  // conv holds the AMP's nx1 loops and the horizontal MAC's; pool its max and average loops.
  constexpr std::uint32_t kCodeBytes[kCodeletCount] = {1536, 512,  384, 256, 256, 192, 640, 1792, 1792, 448, 768,
                                                       896,  1024, 384, 384, 320, 384, 320, 2560, 768,  256};
  shape_of(codelet);  // an id outside the set is a caller bug
  return kCodeBytes[static_cast<std::uint32_t>(codelet)];
}

std::uint32_t vertex_state_bytes(Codelet codelet) {
  return 8 + 4 * (codelet_operand_count(codelet) + codelet_param_count(codelet));
}

bool is_matmul(Codelet codelet) {
  return codelet == Codelet::matmul || codelet == Codelet::matmul_transposed || codelet == Codelet::matmul_half;
}

CodeletCharge codelet_charge(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  check_params(codelet, params);
  if (is_matmul(codelet)) return matmul_charge(codelet, params, target);
  if (codelet == Codelet::conv) return conv_charge(params, target);
  if (codelet == Codelet::pool) return pool_charge(params, target);
  CodeletCharge charge;
  const bool by_rows = codelet == Codelet::softmax || codelet == Codelet::layer_norm ||
                       codelet == Codelet::reduce_rows || codelet == Codelet::binary_column;
  charge.path = by_rows ? "rows" : "workers";
  // Bytes of the input operands (in-place operands are inputs; outputs are only stored).
  std::uint64_t input_words = 0;
  if (codelet == Codelet::reduce_bias) {
    // The own partial is read at a stride: its span is not what is loaded.
    const std::uint64_t rows_cols = mul(params[1], params[2]);
    input_words = add(add(mul(params[0], rows_cols), rows_cols), params[2]);
  } else {
    const std::uint32_t operands = codelet_operand_count(codelet);
    const bool in_place = codelet == Codelet::bias_add || codelet == Codelet::bias_add_half ||
                          codelet == Codelet::relu || codelet == Codelet::binary_row ||
                          codelet == Codelet::binary_column;
    for (std::uint32_t operand = 0; operand < operands; ++operand)
      if (in_place || operand + 1 < operands)
        input_words = add(input_words, codelet_operand_words(codelet, params, operand));
  }
  charge.load_floor = ceil_div(mul(input_words, kFloatBytes), std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  switch (codelet) {
    case Codelet::bias_add:
    case Codelet::bias_add_half:
      charge.cycles = bias_cycles(params[0], params[1], codelet == Codelet::bias_add_half, params[2] != 0, target);
      break;
    case Codelet::softmax:
      charge.cycles = softmax_cycles(params[0], params[1], target);
      break;
    case Codelet::layer_norm:
      charge.cycles = layer_norm_cycles(params[0], params[1], target);
      break;
    case Codelet::reduce_add:
      charge.cycles = reduce_cycles(ceil_div(params[1], kReduceFloatsPerLoop), params[0], target);
      break;
    case Codelet::reduce_bias: {
      // Rows are walked separately (the own partial is strided); the own partial is one more part.
      const std::uint64_t loops = mul(params[1], ceil_div(params[2], kReduceFloatsPerLoop));
      charge.cycles = add(reduce_cycles(loops, std::uint64_t{params[0]} + 1, target),
                          bias_cycles(params[1], params[2], false, params[4] != 0, target));
      break;
    }
    case Codelet::relu:
      charge.cycles = elementwise_cycles(params[0], kReluWorkerFixed, kReluPerVector, target);
      break;
    case Codelet::add:
      charge.cycles = elementwise_cycles(params[0], kAddWorkerFixed, kAddPerVector, target);
      break;
    case Codelet::copy:
      charge.cycles = elementwise_cycles(params[0], kCopyWorkerFixed, kCopyPerVector, target);
      break;
    case Codelet::clip:
      // popops' Clamp: a max and a min a vector beside the load and store, as add's loop.
      charge.cycles = elementwise_cycles(params[0], kAddWorkerFixed, kAddPerVector, target);
      break;
    case Codelet::unary:
      charge.cycles =
          elementwise_cycles(params[0], kUnaryWorkerFixed, function_cycles_per_vector(codelet, params), target);
      break;
    case Codelet::binary:
      charge.cycles =
          elementwise_cycles(params[0], kAddWorkerFixed, function_cycles_per_vector(codelet, params), target);
      break;
    case Codelet::binary_row:
      charge.cycles = elementwise_cycles(mul(params[0], params[1]), kBiasAddWorkerFixed,
                                         function_cycles_per_vector(codelet, params), target);
      break;
    case Codelet::binary_column:
      // A row step: each row's scalar applied to the row (poplibs BroadcastScalar2D).
      charge.cycles =
          row_cycles(params[0], params[1], kScalarStep, 0, function_cycles_per_vector(codelet, params), target);
      break;
    case Codelet::transpose:
      charge.cycles = transpose_cycles(params[0], params[1], target);
      break;
    case Codelet::reduce_rows:
      // One fold per row, then a multiply by 1/cols for a mean.
      charge.cycles = row_cycles(params[0], params[1], kFoldStep, params[2] != 0 ? 1 : 0, kReduceRowPerVector, target);
      break;
    default:
      throw std::logic_error("unreachable codelet");
  }
  return charge;
}

std::uint64_t codelet_cycles(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  return codelet_charge(codelet, params, target).cycles;
}

std::uint64_t matmul_product_cycles(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t cycles = codelet_cycles(codelet, params, target);
  if (!matmul_leaves_transpose(params)) return cycles;
  const std::uint32_t transposed[] = {params[2], params[0]};  // c^T is [n, m]
  return add(cycles, codelet_cycles(Codelet::transpose, transposed, target));
}

bool matmul_leaves_transpose(std::span<const std::uint32_t> params) {
  // c^T of one row or one column is laid out as c already.
  return params[kMatmulOrientationParam] == static_cast<std::uint32_t>(MatmulOrientation::swapped) && params[0] > 1 &&
         params[2] > 1;
}

MatmulOrientation faster_matmul_orientation(Codelet codelet, std::uint32_t m, std::uint32_t k, std::uint32_t n,
                                            const Target& target) {
  const std::uint32_t as_is[] = {m, k, n, static_cast<std::uint32_t>(MatmulOrientation::as_is)};
  const std::uint32_t swapped[] = {m, k, n, static_cast<std::uint32_t>(MatmulOrientation::swapped)};
  // Ties keep as_is: its outputs leave the AMP as rows of c, no transpose after.
  return matmul_product_cycles(codelet, swapped, target) < matmul_product_cycles(codelet, as_is, target)
             ? MatmulOrientation::swapped
             : MatmulOrientation::as_is;
}

bool matmul_transposes_b(Codelet codelet, std::uint32_t orientation) {
  if (codelet == Codelet::matmul_half) return false;
  const bool swapped = orientation == static_cast<std::uint32_t>(MatmulOrientation::swapped);
  return swapped == (codelet != Codelet::matmul_transposed);
}

bool matmul_b_is_n_by_k(Codelet codelet, std::uint32_t orientation) {
  return codelet == Codelet::matmul_transposed ||
         (codelet == Codelet::matmul_half && orientation == static_cast<std::uint32_t>(MatmulOrientation::swapped));
}

Codelet constant_weight_matmul(bool half_weights, MatmulOrientation orientation) {
  if (half_weights) return Codelet::matmul_half;
  return orientation == MatmulOrientation::swapped ? Codelet::matmul_transposed : Codelet::matmul;
}

}  // namespace tessera
