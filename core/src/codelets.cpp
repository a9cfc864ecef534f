// The codelet set's names, operand shapes and cycle formulas: the machine model the simulator charges.
#include "tessera/codelets.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <stdexcept>
#include <vector>

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
    {"cast", 2, 3},               // {in, out}; {count, from, to}
    {"select", 4, 1},             // {condition, a, b, out}; {count}
    {"multi_slice", 3, 5},        // {table, indices, out}; {rows, cols, count, row_begin, table_rows}
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
// Elementwise codelets split their elements evenly over the workers, each walking its share
// in loops of two floats (one element for functions poplibs loops per element):
//
//   cycles = supervisor + workers * (worker_fixed + loops_per_worker * cycles_per_loop)
//
// with poplibs' vertex for the codelet: BinaryOp1D (add, binary), BinaryOp1DInPlace (bias_add's
// flat form, binary_row), UnaryOp1D (unary), UnaryOp1DInPlace (relu, softmax's exp and
// reciprocal), Cast1D (copy; matmul_half's cast of a).
//
// Reductions (reduce_add, reduce_bias) walk loops of four floats (two 64-bit loads), each
// loop loading that float of every part: (3 * parts + 7) worker cycles a loop, loops split
// over the workers, 32 worker cycles fixed; a count that is not a multiple of four adds a loop
// for its odd float and one for its pair, and a last round that leaves workers idle runs the
// shorter remainder loop (2 * parts + 13) once (the shape of poplibs' ReduceAdd).
//
// A row's fold (max or sum) gives whole rows to the workers; with fewer rows than workers each
// row is cut into pieces of at least two floats, one a worker, and a second fold adds the
// pieces (poplibs' two-stage reductions). A per-row scalar applied to its row splits the rows
// over the workers, or the columns when that is faster (poplibs' BroadcastVectorOuter by row
// or by column); a row vector applied to every row walks the rows as one flat tensor, or
// column by column over the rows when that is faster (BroadcastVectorInner).
//
// A fused codelet (bias_add with relu, reduce_bias, softmax, layer_norm) is charged as its
// steps run one after another, each as that step alone is charged: fusion saves buffers and
// calls in the package, not cycles (poplibs runs a vertex per step, loops no faster than ours).
//
// Matmuls run on the AMP in passes. One pass loads input_channels x output_channels weights
// into the unit (with 64-bit loads: load_bytes_per_cycle / 2, 8 bytes for the GC200, as poplibs
// loads them unless use128BitConvUnitLoad is set), then the workers stream their share of the
// field through it, one field row every
//   core = input_channels * output_channels / macs_per_cycle   worker cycles,
// after an accumulator-pipeline fill:
//
//   pass   = pass_overhead + weight_load + workers * worker(r)
//   cycles = call_overhead + (input_groups - 1) * input_group_overhead
//            + output_groups * workers * zeroing(r) + input_groups * output_groups * pass
//
// with r = ceil(field / workers), worker(r) the fill for one or two rows and
// worker_base + core * r from three, input_groups = ceil(k / input_channels) and
// output_groups = ceil(outputs / output_channels). Float inputs may use all the AMP's units
// or half of them (half the output channels, half the weight load, the same core a row): the
// call takes the faster. The orientation says what the field is:
// as_is streams a's m rows against b's n columns as weights; swapped streams b's n columns
// against a's m rows, leaving c^T [n, m] (a transpose call lays it out as c, as poplibs'
// planner charges a swapped product its output's rearrangement). A field whose
// k values are not contiguous in memory (b [k, n] swapped, b [n, k] as_is) is first
// transposed by the workers; matmul_half's b is stored as its orientation streams it, so it
// never is. Half weights (matmul_half) first cast a to half.
//
// A matmul may instead run on the workers (worker MAC, poplibs' horizontal MAC): the field
// rows split over the workers, each worker looping over the output columns, each a dot product
// of k in input-channel groups: k is cut into groups of equal size (zero-padded), a group of
// even size walks pairs of floats (fours of halves) a cycle, an odd one a value every two
// cycles, and the call takes the number of groups that is fastest. The codelet takes whichever
// path is faster; for tiny products that is the workers.

// Supervisor and worker fixed costs, in worker cycles unless named tile cycles (docs/targets.md
// names the poplibs estimator of each).
constexpr std::uint64_t kSupervisorCycles = 11;       // tile cycles: start and join the workers
constexpr std::uint64_t kUnarySupervisorCycles = 20;  // UnaryOp1D's supervisor: 9 more
constexpr std::uint64_t kAddWorkerFixed = 29, kAddPerVector = 3;
constexpr std::uint64_t kInPlaceBinaryWorkerFixed = 58;  // BinaryOp1DInPlace (bias_add, binary_row)
constexpr std::uint64_t kInPlaceUnaryWorkerFixed = 55;   // UnaryOp1DInPlace (relu, exp, reciprocal)
constexpr std::uint64_t kReluPerVector = 2;
constexpr std::uint64_t kBiasAddPerVector = 3;  // like add, the bias re-read
// Cast1D: 19 tile cycles to start, 23 + 19 a worker, the workers' shares in fours; float to half
// two cycles a four, float to float (copy) and half to float one a pair; each remainder bit a
// cycle to test and two to convert.
constexpr std::uint64_t kCastSupervisorCycles = 19, kCastWorkerFixed = 42;
constexpr std::uint64_t kCastToHalfPerFour = 2, kCopyPerPair = 1;
constexpr std::uint64_t kReduceWorkerFixed = 32, kReduceLoopFixed = 7, kReducePerPart = 3;
constexpr std::uint64_t kReduceRemainderFixed = 13, kReduceRemainderPerPart = 2;
constexpr std::uint64_t kReduceFloatsPerLoop = 4;
// Transposes walk 2x2 grains of floats, the source rows split over the workers (poplibs'
// supervisor transpose): 3 cycles a grain, 6 more a pair of rows when the block is wider than
// one grain, 47 a worker (56 for a single column grain, 29 for a single grain).
constexpr std::uint64_t kTransposeWorkerFixed = 47, kTransposeNarrowFixed = 56, kTransposeSingleGrain = 29;
constexpr std::uint64_t kTransposePerGrain = 3, kTransposePerRowPair = 6;
// A row fold (popops ContinuousReduce): 17 a worker's run, 12 a row, a pair a cycle, 2 for an odd row.
constexpr std::uint64_t kFoldWorkerFixed = 17, kFoldPerRow = 12, kFoldOddRow = 2;
constexpr std::uint64_t kFoldMinPieceFloats = 2;
// A per-row scalar (popops BroadcastVectorOuter): 15 a worker's run, 7 a row (25 when its floats
// are not 64-bit aligned), 2 a pair (1 + 1 of loop overhead), divide 7 an element.
constexpr std::uint64_t kRowScalarWorkerFixed = 15, kRowScalarPerRow = 7, kRowScalarPerMisalignedRow = 25;
constexpr std::uint64_t kScalarPerVector = 2, kScalarDividePerVector = 14;
// A row vector walked column by column (popops BroadcastVectorInner, float): 13 tile cycles to
// start, 17 + 9 a worker, 3 + 5 a column and 2 a row a column; divide 19 + 10 a worker and 11 a
// pair of columns plus 6 a further row (an odd count of columns: 9 a column plus 4 a further row).
constexpr std::uint64_t kVectorInnerSupervisor = 13, kVectorInnerWorkerFixed = 26;  // add; subtract 27, multiply 44
constexpr std::uint64_t kVectorInnerSubtractWorkerFixed = 27, kVectorInnerMultiplyWorkerFixed = 44;
constexpr std::uint64_t kVectorInnerPerColumn = 8, kVectorInnerPerRow = 2;
constexpr std::uint64_t kVectorInnerDivideWorkerFixed = 29, kVectorInnerDividePerPair = 11;
constexpr std::uint64_t kVectorInnerDividePerPairRow = 6;
constexpr std::uint64_t kVectorInnerDividePerOddColumn = 9, kVectorInnerDividePerOddColumnRow = 4;
// layer_norm's inverse standard deviation (poplin InverseStdDeviation): 10 a worker, 5 a pair of rows.
constexpr std::uint64_t kInverseStdWorkerFixed = 10, kInverseStdPerPair = 5;
// reduce_rows' mean (popops BroadcastScalar1DInPlace MULTIPLY): 20 a worker, 2 a pair.
constexpr std::uint64_t kScaleWorkerFixed = 20, kScalePerVector = 2;
constexpr std::uint64_t kExpPerVector = 6, kReciprocalPerVector = 6;
// Unary and binary functions, worker cycles per vector of two floats: poplibs' float inner
// loops (popopsCycleEstimators: SIGMOID and TANH 12, SQRT 10 per two; ERF 18 and POWER 312 per
// element; SQUARE 2 per two; DIVIDE 10 per two, 6 when broadcast). Multiply and subtract walk
// like add and bias_add. UnaryOp1D has 17 fixed a worker; pow other than a square is BinaryOp1D.
constexpr std::uint64_t kUnaryWorkerFixed = 17;
constexpr std::uint64_t kSigmoidPerVector = 12, kTanhPerVector = 12, kSqrtPerVector = 10, kErfPerVector = 2 * 18;
constexpr std::uint64_t kSquarePerVector = 2, kPowerPerVector = 2 * 312;
constexpr std::uint64_t kDividePerVector = 10, kDivideRowPerVector = 6;
// Further unary functions (popopsCycleEstimators unaryOpPerfInfo, float): an entry {c, false, 2}
// is c a pair; {c, true} (the natural vector) c + 4 a pair; {c, false} c + 4 an element.
// LOGARITHM 12, NEGATE 2 (a pair); ABSOLUTE 1 (an element); FLOOR, CEIL and ROUND 2, SIGNUM 5
// (natural vectors); SIN and COS 2300 (an element); EXPONENT_MINUS_ONE 4 (an element).
constexpr std::uint64_t kLogPerVector = 12, kNegatePerVector = 2, kAbsPerVector = 2 * (1 + 4);
constexpr std::uint64_t kRoundingPerVector = 2 + 4, kSignPerVector = 5 + 4, kSinePerVector = 2 * (2300 + 4);
constexpr std::uint64_t kExpMinusOnePerVector = 2 * (4 + 4);
// TAN 3900 (a natural vector); ASIN 102 (an element); IS_INF and IS_NAN 3 (natural vectors);
// binaryOpPerfInfo ATAN2 FLOAT {272, false, 2} (a pair), atan(x) being atan2(x, 1).
constexpr std::uint64_t kTanPerVector = 3900 + 4, kAsinPerVector = 2 * (102 + 4), kAtanPerVector = 272;
constexpr std::uint64_t kFloatClassPerVector = 3 + 4;
// Binary MAXIMUM and MINIMUM {4, false, 2}; ADD and MULTIPLY {1, true} as a step of a composite: 5 a pair.
constexpr std::uint64_t kMaxMinPerVector = 4, kArithmeticStepPerVector = 1 + 4;
// Functions ONNX defines from others are charged as the popops steps that compute them.
constexpr std::uint64_t kSoftplusPerVector = kExpPerVector + kArithmeticStepPerVector + kLogPerVector;
constexpr std::uint64_t kSoftsignPerVector = kAbsPerVector + kArithmeticStepPerVector + kDividePerVector;
// elu: a select of x and alpha * expm1(x) (charged as max(x, 0) + min(alpha * expm1(x), 0)); celu scales x by 1 / alpha
// first.
constexpr std::uint64_t kEluPerVector = kExpMinusOnePerVector + 2 * kArithmeticStepPerVector + 2 * kMaxMinPerVector;
constexpr std::uint64_t kCeluPerVector = kEluPerVector + kArithmeticStepPerVector;
// x * (x > alpha): GREATER_THAN {14, false, 4} (7 a pair), then a multiply.
constexpr std::uint64_t kThresholdPerVector = 14 / 2 + kArithmeticStepPerVector;
constexpr std::uint64_t kMishPerVector = kSoftplusPerVector + kTanhPerVector + kArithmeticStepPerVector;
// acos = pi/2 - asin; sinh and cosh = (e^x -+ 1/e^x) / 2; asinh and acosh = log(x + sqrt(x^2 +- 1));
// atanh = log((1 + x) / (1 - x)) / 2.
constexpr std::uint64_t kAcosPerVector = kAsinPerVector + kArithmeticStepPerVector;
constexpr std::uint64_t kHyperbolicPerVector = kExpPerVector + kReciprocalPerVector + 2 * kArithmeticStepPerVector;
constexpr std::uint64_t kInverseHyperbolicPerVector = 3 * kArithmeticStepPerVector + kSqrtPerVector + kLogPerVector;
constexpr std::uint64_t kAtanhPerVector = 3 * kArithmeticStepPerVector + kDividePerVector + kLogPerVector;
// prelu: max(a, 0) + b * min(a, 0).
constexpr std::uint64_t kPreluPerVector = 2 * kMaxMinPerVector + 2 * kArithmeticStepPerVector;
// Typed functions (popopsCycleEstimators.hpp binaryOpPerfInfo, GC200): comparisons of floats 14
// cycles a loop of four (EQUAL, LESS_THAN, ... FLOAT), of int32 22 (EQUAL, LESS_THAN, GREATER_THAN
// INT) or 26 (LESS_THAN_EQUAL, GREATER_THAN_EQUAL INT) a four; int32 ADD, SUBTRACT, MULTIPLY 7 an
// element, DIVIDE 277 an element; LOGICAL_AND, LOGICAL_OR and NOT_EQUAL of bools (our xor) 5 a
// four. LOGICAL_NOT (unaryOpInPlacePerfInfo, BOOL) 17 a vector.
constexpr std::uint64_t kFloatComparePerFour = 14, kIntComparePerFour = 22, kIntCompareOrEqualPerFour = 26;
constexpr std::uint64_t kIntArithmeticPerElement = 7, kIntDividePerElement = 277, kLogicalPerFour = 5;
// binaryOpPerfInfo: MAXIMUM and MINIMUM INT {7, false, 1}; REMAINDER FLOAT {133, false, 2} (a pair),
// INT {292, false, 1}; POWER FLOAT {312, false, 1} (kPowerPerVector). Python's modulo (ONNX Mod of
// integers) is the remainder, a sign test and an add of the divisor: two int steps more.
constexpr std::uint64_t kIntMaxMinPerElement = 7, kRemainderPerVector = 133, kIntRemainderPerElement = 292;
constexpr std::uint64_t kLogicalNotPerVector = 17;
// Select (popopsCycleEstimators.cpp selectCycles): 5 + 6 a run, 5 an element (three loads, a
// movz, a store); our codelet splits its elements over the workers like every elementwise one.
constexpr std::uint64_t kSelectWorkerFixed = 11, kSelectPerElement = 5;
// MultiSlice (poplibs lib/popops/PerformanceEstimation.cpp getMultiSliceCycleEstimate, float: 64-bit
// vectors of two floats, 2 cycles a vector): 30 worker cycles of prologue and epilogue, 19 an offset
// plus its row's vectors, times the workers. The codelet (lib/popops/codelets/MultiSlice.cpp) gives
// each worker ceil(count / workers) offsets, or with a single offset a share of its row's vectors
// (splitSingleRegion). Every offset is charged as in range: ours writes zeros for a row it does not
// hold (the sum over row-split tiles needs them), a store a vector where poplibs skips at 8 cycles.
constexpr std::uint64_t kMultiSliceWorkerFixed = 30, kMultiSlicePerOffset = 19, kMultiSlicePerVector = 2;
// The AMP (poplibs getConvPartial1x1SupervisorCycleEstimate), tile cycles unless named worker.
constexpr std::uint64_t kAmpCallOverhead = 74;        // vertex state, worklists, the first input group
constexpr std::uint64_t kAmpInputGroupOverhead = 15;  // each further input group
constexpr std::uint64_t kAmpPassOverhead = 25;        // per pass: pointers, worker start and sync
constexpr std::uint64_t kAmpHalfRetentionFirst = 7, kAmpHalfRetentionPerGroup = 3;  // worker cycles, half
constexpr std::uint64_t kAmpWorkerOneRowFloat = 47, kAmpWorkerTwoRowsFloat = 46, kAmpWorkerBaseFloat = 22;
constexpr std::uint64_t kAmpWorkerOneRowHalf = 26, kAmpWorkerTwoRowsHalf = 35, kAmpWorkerBaseHalf = 19;
constexpr std::uint64_t kAmpZeroingFixed = 2;  // worker cycles; float zeroes per row too
// The worker MAC path (poplibs HorizontalMac): 58 (half 63) + 6 x 9 + 23 a call, 15 an input
// group, 10 an output column a group, 16 + 19 + 16 a worker's run, 7 a row plus the dot
// product's own 7 (8 when it loads values one at a time).
constexpr std::uint64_t kMacCallOverhead = 58 + 6 * 9 + 23, kMacCallOverheadHalf = 63 + 6 * 9 + 23;
constexpr std::uint64_t kMacInputGroupOverhead = 15, kMacOutputOverhead = 10;
constexpr std::uint64_t kMacWorkerFixed = 51, kMacPerRow = 7, kMacDotFixed = 7;
constexpr std::uint64_t kHalvesPerLoad = 4;

constexpr std::uint64_t kFloatsPerVector = 2;
constexpr std::uint64_t kFloatBytes = 4, kHalfBytes = 2;

std::uint64_t workers_of(const Target& target) { return target.worker_threads == 0 ? 1 : target.worker_threads; }

std::uint64_t mul(std::uint64_t a, std::uint64_t b) { return saturate(static_cast<unsigned __int128>(a) * b); }
std::uint64_t add(std::uint64_t a, std::uint64_t b) { return saturate(static_cast<unsigned __int128>(a) + b); }

/// A multi-worker codelet over `count` elements split evenly, each worker `per_loop` cycles a
/// loop of `loop_elements` (two floats; one for functions poplibs loops an element at a time).
std::uint64_t elementwise_cycles(std::uint64_t count, std::uint64_t worker_fixed, std::uint64_t per_loop,
                                 const Target& target, std::uint64_t supervisor = kSupervisorCycles,
                                 std::uint64_t loop_elements = kFloatsPerVector) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t loops = ceil_div(ceil_div(count, workers), loop_elements);
  return add(supervisor, mul(workers, add(worker_fixed, mul(loops, per_loop))));
}

/// A binary function's inner loop: cycles a loop and the elements it walks (typed functions
/// loop over fours or single elements, the float ones over pairs).
struct FunctionLoop {
  std::uint64_t cycles, elements;
};
FunctionLoop binary_loop(BinaryFunction function) {
  switch (function) {
    case BinaryFunction::equal:
    case BinaryFunction::less:
    case BinaryFunction::less_or_equal:
    case BinaryFunction::greater:
    case BinaryFunction::greater_or_equal:
      return {kFloatComparePerFour, 4};
    case BinaryFunction::int_add:
    case BinaryFunction::int_subtract:
    case BinaryFunction::int_multiply:
      return {kIntArithmeticPerElement, 1};
    case BinaryFunction::int_divide:
      return {kIntDividePerElement, 1};
    case BinaryFunction::int_max:
    case BinaryFunction::int_min:
      return {kIntMaxMinPerElement, 1};
    case BinaryFunction::power:
      return {kPowerPerVector / 2, 1};
    case BinaryFunction::remainder:
      return {kRemainderPerVector, kFloatsPerVector};
    case BinaryFunction::int_remainder:
      return {kIntRemainderPerElement, 1};
    case BinaryFunction::int_modulo:
      return {kIntRemainderPerElement + 2 * kIntArithmeticPerElement, 1};
    case BinaryFunction::int_equal:
    case BinaryFunction::int_less:
    case BinaryFunction::int_greater:
      return {kIntComparePerFour, 4};
    case BinaryFunction::int_less_or_equal:
    case BinaryFunction::int_greater_or_equal:
      return {kIntCompareOrEqualPerFour, 4};
    case BinaryFunction::logical_and:
    case BinaryFunction::logical_or:
    case BinaryFunction::logical_xor:
      return {kLogicalPerFour, 4};
    case BinaryFunction::divide:
      return {kDividePerVector, kFloatsPerVector};
    case BinaryFunction::max:
    case BinaryFunction::min:
      return {kMaxMinPerVector, kFloatsPerVector};
    case BinaryFunction::prelu:
      return {kPreluPerVector, kFloatsPerVector};
    case BinaryFunction::subtract:
    case BinaryFunction::multiply:
    case BinaryFunction::add:
      break;
  }
  return {kAddPerVector, kFloatsPerVector};
}
/// The float functions (subtract, multiply, divide, add, max, min, prelu).
bool is_float_function(BinaryFunction function) { return function <= BinaryFunction::prelu; }

/// An in-place unary step (relu, exp, a reciprocal): UnaryOp1DInPlace.
std::uint64_t in_place_unary_cycles(std::uint64_t count, std::uint64_t per_vector, const Target& target) {
  return elementwise_cycles(count, kInPlaceUnaryWorkerFixed, per_vector, target, kUnarySupervisorCycles);
}

/// Cast1D over `count` values, the workers' shares in fours: to half two cycles a four, else
/// (float to float, half to float) a pair a cycle; each remainder bit a test, two to convert.
std::uint64_t cast_cycles(std::uint64_t count, bool to_half, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t share = std::min(count, mul(4, ceil_div(ceil_div(count, 4), workers)));
  const std::uint64_t width = to_half ? 4 : 2;
  std::uint64_t worker = add(kCastWorkerFixed, mul(share / width, to_half ? kCastToHalfPerFour : kCopyPerPair));
  for (std::uint64_t bit = 1; bit < width; bit *= 2) worker += 1 + ((share % width) & bit ? 2 : 0);
  return add(kCastSupervisorCycles, mul(workers, worker));
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

/// The four-float loops of a run of `count` floats: fours, one for an odd float, one for a pair.
std::uint64_t reduce_loops(std::uint64_t count) {
  return count / kReduceFloatsPerLoop + (count & 1) + ((count & 2) != 0 ? 1 : 0);
}

/// A reduction of `parts` over `loops` loops split over the workers. When the run is `ragged`
/// (not a multiple of four floats) a last round that leaves workers idle is the remainder loop.
std::uint64_t reduce_cycles(std::uint64_t loops, std::uint64_t parts, bool ragged, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  std::uint64_t rounds = loops / workers, worker = kReduceWorkerFixed;
  const std::uint64_t loop = add(kReduceLoopFixed, mul(kReducePerPart, parts));
  if (loops % workers != 0) {
    // The remainder loop walks fewer floats: never charged above a whole loop.
    if (ragged) worker = add(worker, std::min(loop, add(kReduceRemainderFixed, mul(kReduceRemainderPerPart, parts))));
    else ++rounds;
  }
  return mul(workers, add(worker, mul(rounds, loop)));
}

/// Folding each of `rows` rows (max or sum): whole rows to the workers, or with fewer rows than
/// workers each row cut into pieces of at least two floats, then a second fold of the pieces.
std::uint64_t fold_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  auto run = [&](std::uint64_t run_rows, std::uint64_t run_cols) {
    const std::uint64_t fixed = kFoldWorkerFixed + (run_cols % 2 == 1 ? kFoldOddRow : 0);
    return mul(workers, add(fixed, mul(run_rows, add(kFoldPerRow, run_cols / 2))));
  };
  if (rows == 0 || rows >= workers) return run(ceil_div(rows, workers), cols);
  const std::uint64_t pieces = std::max<std::uint64_t>(1, std::min(workers / rows, cols / kFoldMinPieceFloats));
  const std::uint64_t first = run(1, ceil_div(cols, pieces));
  return pieces == 1 ? first : add(first, run(1, pieces));
}

/// A per-row scalar applied to its row at `per_vector` cycles a pair: the rows split over the
/// workers, or each row's columns, whichever is faster.
std::uint64_t row_scalar_cycles(std::uint64_t rows, std::uint64_t cols, std::uint64_t per_vector,
                                const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t per_row = cols % kFloatsPerVector == 0 ? kRowScalarPerRow : kRowScalarPerMisalignedRow;
  auto split = [&](std::uint64_t worker_rows, std::uint64_t row_floats) {
    const std::uint64_t row = add(per_row, mul(ceil_div(row_floats, kFloatsPerVector), per_vector));
    return add(kSupervisorCycles, mul(workers, add(kRowScalarWorkerFixed, mul(worker_rows, row))));
  };
  return std::min(split(ceil_div(rows, workers), cols), split(rows, ceil_div(cols, workers)));
}

/// A row vector applied in place to every row by `function`: the rows as one flat tensor, or
/// column by column over each worker's rows, whichever is faster.
std::uint64_t row_vector_cycles(std::uint64_t rows, std::uint64_t cols, BinaryFunction function, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  // BroadcastVectorInner has no max, min or prelu: the flat elementwise loop is the only way.
  if (function == BinaryFunction::max || function == BinaryFunction::min)
    return elementwise_cycles(mul(rows, cols), kInPlaceBinaryWorkerFixed, kMaxMinPerVector, target);
  if (function == BinaryFunction::prelu)
    return elementwise_cycles(mul(rows, cols), kInPlaceBinaryWorkerFixed, kPreluPerVector, target);
  const bool divide = function == BinaryFunction::divide;
  const std::uint64_t flat = elementwise_cycles(mul(rows, cols), kInPlaceBinaryWorkerFixed,
                                                divide ? kDividePerVector : kBiasAddPerVector, target);
  const std::uint64_t blocks = ceil_div(rows, workers), further = blocks > 0 ? blocks - 1 : 0;
  const std::uint64_t fixed = function == BinaryFunction::multiply   ? kVectorInnerMultiplyWorkerFixed
                              : function == BinaryFunction::subtract ? kVectorInnerSubtractWorkerFixed
                                                                     : kVectorInnerWorkerFixed;
  std::uint64_t worker = 0;
  if (!divide) worker = add(fixed, mul(cols, add(kVectorInnerPerColumn, mul(kVectorInnerPerRow, blocks))));
  else if (cols % 2 == 0)
    worker = add(kVectorInnerDivideWorkerFixed,
                 mul(cols / 2, add(kVectorInnerDividePerPair, mul(further, kVectorInnerDividePerPairRow))));
  else
    worker = add(kVectorInnerDivideWorkerFixed,
                 mul(cols, add(kVectorInnerDividePerOddColumn, mul(further, kVectorInnerDividePerOddColumnRow))));
  return std::min(flat, add(kVectorInnerSupervisor, mul(workers, worker)));
}

/// bias_add's steps: the bias (cast from half first) added to every row, then relu if fused.
std::uint64_t bias_cycles(std::uint64_t rows, std::uint64_t cols, bool half, bool relu, const Target& target) {
  std::uint64_t bias = row_vector_cycles(rows, cols, BinaryFunction::add, target);
  if (half) bias = add(bias, cast_cycles(cols, false, target));
  return relu ? add(bias, in_place_unary_cycles(mul(rows, cols), kReluPerVector, target)) : bias;
}

/// reduce_rows' steps: a fold of each row (ADD, MAX, MIN, MUL and SQUARE_ADD fold alike), then
/// a per-row step: a multiply by 1 / cols (mean), a square root (l2), a logarithm and the max
/// added back (log_sum_exp, which folds the max, subtracts it and exponentiates first); l1
/// takes magnitudes first.
std::uint64_t reduce_rows_cycles(std::uint64_t rows, std::uint64_t cols, ReduceFunction function,
                                 const Target& target) {
  const std::uint64_t fold = fold_cycles(rows, cols, target);
  auto per_row = [&](std::uint64_t per_vector) {
    return elementwise_cycles(rows, kUnaryWorkerFixed, per_vector, target, kUnarySupervisorCycles);
  };
  switch (function) {
    case ReduceFunction::mean:
      return add(fold, elementwise_cycles(rows, kScaleWorkerFixed, kScalePerVector, target));
    case ReduceFunction::l1:
      return add(fold, elementwise_cycles(mul(rows, cols), kUnaryWorkerFixed, kAbsPerVector / 2, target,
                                          kUnarySupervisorCycles, 1));
    case ReduceFunction::l2:
      return add(fold, per_row(kSqrtPerVector));
    case ReduceFunction::log_sum_exp:
      return add(add(mul(2, fold), row_scalar_cycles(rows, cols, kScalarPerVector, target)),
                 add(in_place_unary_cycles(mul(rows, cols), kExpPerVector, target),
                     add(per_row(kLogPerVector), per_row(kArithmeticStepPerVector))));
    default:
      return fold;
  }
}

/// softmax's steps: the row's max, subtract it (scaled), exp in place, the row's sum, its
/// reciprocal (one a row), then multiply by it.
std::uint64_t softmax_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t fold = fold_cycles(rows, cols, target);
  const std::uint64_t scale_rows = row_scalar_cycles(rows, cols, kScalarPerVector, target);
  const std::uint64_t exp = in_place_unary_cycles(mul(rows, cols), kExpPerVector, target);
  const std::uint64_t reciprocal = in_place_unary_cycles(rows, kReciprocalPerVector, target);
  return add(add(mul(2, fold), mul(2, scale_rows)), add(exp, reciprocal));
}

/// layer_norm's steps: the rows' sums of values and of squares, the inverse standard deviation
/// (one a row), subtract the mean and multiply by it, then gamma and beta as row vectors.
std::uint64_t layer_norm_cycles(std::uint64_t rows, std::uint64_t cols, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t statistics = mul(2, fold_cycles(rows, cols, target));
  const std::uint64_t inverse_std =
      mul(workers, add(kInverseStdWorkerFixed, mul(ceil_div(ceil_div(rows, workers), 2), kInverseStdPerPair)));
  const std::uint64_t whiten = mul(2, row_scalar_cycles(rows, cols, kScalarPerVector, target));
  const std::uint64_t gamma_beta = add(row_vector_cycles(rows, cols, BinaryFunction::multiply, target),
                                       row_vector_cycles(rows, cols, BinaryFunction::add, target));
  return add(add(statistics, inverse_std), add(whiten, gamma_beta));
}

struct Amp {
  std::uint64_t input_channels, output_channels, macs_per_cycle, weight_bytes;
  std::uint64_t worker_one_row, worker_two_rows, worker_base;
  std::uint64_t zero_per_row;  ///< worker cycles a row to zero float partials on the first input group
  bool half;
  /// Worker cycles a field row takes in one pass: the pass's MACs at the peak rate.
  std::uint64_t core() const { return input_channels * output_channels / std::max<std::uint64_t>(macs_per_cycle, 1); }
  /// A worker's cycles in one pass over `rows` field rows: the pipeline fill, then `core` a row.
  std::uint64_t worker(std::uint64_t rows) const {
    return rows <= 1 ? worker_one_row : rows == 2 ? worker_two_rows : worker_base + core() * rows;
  }
};

/// The AMP for a codelet; `half_units` takes half of the float units (half the output channels).
Amp amp_of(Codelet codelet, const Target& target, bool half_units) {
  if (codelet == Codelet::matmul_half)
    return {target.amp_fp16_input_channels,
            target.amp_fp16_output_channels,
            target.fp16_macs_per_cycle,
            kHalfBytes,
            kAmpWorkerOneRowHalf,
            kAmpWorkerTwoRowsHalf,
            kAmpWorkerBaseHalf,
            0,
            true};
  const std::uint64_t units = half_units ? 2 : 1;
  const std::uint64_t output_channels = target.amp_fp32_output_channels / units;
  // Zeroing a row's partials stores two floats a cycle.
  return {target.amp_fp32_input_channels,
          output_channels,
          target.fp32_macs_per_cycle / units,
          kFloatBytes,
          kAmpWorkerOneRowFloat,
          kAmpWorkerTwoRowsFloat,
          kAmpWorkerBaseFloat,
          output_channels / kFloatsPerVector,
          false};
}

/// The AMP path: `field` rows streamed against `outputs` columns of weights, `k` deep.
std::uint64_t amp_cycles(const Amp& amp, std::uint64_t field, std::uint64_t k, std::uint64_t outputs,
                         const Target& target, std::uint64_t& passes) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t input_groups = std::max<std::uint64_t>(ceil_div(k, amp.input_channels), 1);
  const std::uint64_t output_groups = ceil_div(outputs, std::max<std::uint64_t>(amp.output_channels, 1));
  passes = mul(input_groups, output_groups);
  const std::uint64_t rows = ceil_div(field, workers);
  // Weights load with 64-bit loads: half the target's widest load.
  const std::uint64_t weight_load = ceil_div(amp.input_channels * amp.output_channels * amp.weight_bytes,
                                             std::max<std::uint32_t>(target.load_bytes_per_cycle / 2, 1));
  const std::uint64_t pass = add(add(kAmpPassOverhead, weight_load), mul(workers, amp.worker(rows)));
  const std::uint64_t zeroing = amp.zero_per_row ? mul(workers, add(kAmpZeroingFixed, mul(amp.zero_per_row, rows))) : 0;
  std::uint64_t cycles = add(kAmpCallOverhead, mul(input_groups - 1, kAmpInputGroupOverhead));
  if (amp.half)
    cycles = add(cycles, mul(workers, add(kAmpHalfRetentionFirst, mul(kAmpHalfRetentionPerGroup, input_groups - 1))));
  return add(add(cycles, mul(output_groups, zeroing)), mul(passes, pass));
}

/// The best AMP configuration: all units, or for float inputs half of them.
std::uint64_t best_amp_cycles(Codelet codelet, std::uint64_t field, std::uint64_t k, std::uint64_t outputs,
                              const Target& target, std::uint64_t& passes) {
  std::uint64_t best = amp_cycles(amp_of(codelet, target, false), field, k, outputs, target, passes);
  const bool halves = codelet != Codelet::matmul_half && target.amp_fp32_output_channels % 2 == 0 &&
                      target.fp32_macs_per_cycle % 2 == 0 && target.amp_fp32_output_channels > 1;
  if (!halves) return best;
  std::uint64_t half_passes = 0;
  const std::uint64_t half_units = amp_cycles(amp_of(codelet, target, true), field, k, outputs, target, half_passes);
  if (half_units < best) {
    best = half_units;
    passes = half_passes;
  }
  return best;
}

/// Worker cycles of one output's dot product over a group of `size` values of k: 64-bit loads
/// (two floats, four halves) a cycle where the group divides into them, else narrower loads at
/// two cycles; values loaded one at a time when b's k values are not contiguous.
std::uint64_t group_dot_cycles(std::uint64_t size, bool half, bool contiguous) {
  if (!contiguous) return kMacDotFixed + 1 + 2 * size;
  const std::uint64_t per_load = half ? kHalvesPerLoad : kFloatsPerVector;
  for (std::uint64_t width = per_load; width > 1; width /= 2)
    if (size % width == 0) return kMacDotFixed + (width == per_load ? size / width : 1 + 2 * (size / width));
  return kMacDotFixed + 1 + 2 * size;
}

/// The worker MAC path's cycles for a shape.
std::uint64_t worker_mac_cycles(const WorkerMacShape& shape, bool half, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t run = add(kMacWorkerFixed, mul(shape.rows_per_worker, add(kMacPerRow, shape.group_dot_cycles)));
  const std::uint64_t group =
      add(kMacInputGroupOverhead, mul(shape.outputs, add(kMacOutputOverhead, mul(workers, run))));
  return add(half ? kMacCallOverheadHalf : kMacCallOverhead, mul(shape.input_groups, group));
}

CodeletCharge matmul_charge(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t m = params[0], k = params[1], n = params[2];
  const bool swapped = params[kMatmulOrientationParam] == static_cast<std::uint32_t>(MatmulOrientation::swapped);
  CodeletCharge charge;
  // Work the AMP's operands need first: a cast of a to half, or a transpose of b when its
  // k values are not contiguous for the field (matmul_transposes_b).
  const bool half = codelet == Codelet::matmul_half;
  const std::uint64_t cast = half ? cast_cycles(mul(m, k), true, target) : 0;
  std::uint64_t prepare = cast;
  if (matmul_transposes_b(codelet, params[kMatmulOrientationParam]))
    prepare = add(prepare, transpose_cycles(k, n, target));
  std::uint64_t passes = 0;
  const std::uint64_t on_amp = add(prepare, swapped ? best_amp_cycles(codelet, n, k, m, target, passes)
                                                    : best_amp_cycles(codelet, m, k, n, target, passes));
  const std::uint64_t on_workers =
      add(cast, worker_mac_cycles(worker_mac_shape(codelet, params, target), half, target));
  if (on_workers < on_amp) {
    charge.cycles = on_workers;
    charge.path = "worker-mac";
  } else {
    charge.cycles = on_amp;
    charge.path = "amp";
    charge.amp_passes = passes;
  }
  const Amp amp = amp_of(codelet, target, false);
  charge.mac_floor = ceil_div(mul(mul(m, k), n), std::max<std::uint64_t>(amp.macs_per_cycle, 1));
  const std::uint64_t b_bytes =
      codelet == Codelet::matmul_half ? mul(ceil_div(mul(k, n), 2), kFloatBytes) : mul(mul(k, n), kFloatBytes);
  charge.load_floor =
      ceil_div(add(mul(mul(m, k), kFloatBytes), b_bytes), std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  return charge;
}

// Convolutions and pooling. A conv call runs on the AMP over kernel positions or on the
// workers, whichever is faster, as poplibs' planner picks a vertex per tile. First, as poplin's
// ConvParams::canonicalize, the kernel rows and columns that read only padding for every output
// of the call are dropped (they are no MACs the chip does, so the MAC floor drops them too).
//
// AMP (poplin PerformanceEstimation.hpp, getConvPartialnx1SupervisorCycleInnerLoopEstimate and
// ...OuterLoopEstimate): per kernel position and pass (an input-channel group by an output-
// channel group of the AMP's shape) the weights load (bytes / load_bytes_per_cycle + 15), then
// each worker streams its share of the output field: ceil(pixels / workers) pixels in
// ceil(rows / workers) worklist entries, 19 + 45 an entry + core a pixel past three an entry.
//   inner = KH * (14 + KW * (12 + load + workers * worker))
//   cycles = overhead + conv_groups * (16 + in_groups * (14 + out_groups * (14 + inner))) + zeroing
// Input channels that do not fill the AMP's are padded, the input and weights rearranged first
// (poplin ConvModel addTransformCycleEstimate: a float over the exchange, then reordered at
// 4 bytes a cycle scaled by getScaleFactorForTransform's 5/4).
// Groups of few input channels (depthwise: one) run on the AMP with groups combined (poplin's
// combineConvGroups transform: block-diagonal weights of AMP-input-channels / group_in groups),
// the input, weights and output rearranged likewise. There is no float vertical MAC (poplin
// ConvVertexType.cpp getConvVertexVMACCandidates: half activations only), and conv is float32.
// Workers (getConvPartialHorizontalMacSupervisor*Estimate): per conv group, 48 tile cycles and
// each worker's pixels, for every kernel position, a dot product of the group's input channels
// (two floats a cycle) per output channel, 20 a worklist entry.
// The bias and ReLU are a bias_add step over the output after any of them.
constexpr std::uint64_t kConvAmpOverhead = 90, kConvWeightLoadFixed = 15;
constexpr std::uint64_t kConvKernelRow = 14, kConvKernelPosition = 12, kConvGroupFixed = 16, kConvInGroupFixed = 14,
                        kConvOutGroupFixed = 14;
constexpr std::uint64_t kConvWorkerFixed = 19, kConvEntryFixed = 45, kConvEntryPixelsInFixed = 3;
constexpr std::uint64_t kHmacOverhead = 60, kHmacGroupFixed = 48, kHmacWorkerFixed = 16, kHmacEntryFixed = 20,
                        kHmacPerOutput = 2;
// A rearrangement moves each float over the exchange (4 bytes a cycle) and then reorders it at
// 4 bytes a cycle scaled by 5/4 (getScaleFactorForTransform's factor for an even dimension).
constexpr std::uint64_t kRearrangeBytesPerCycle = 4, kRearrangeScaleNum = 5, kRearrangeScaleDen = 4;

/// The kernel taps along one axis that read the patch for at least one of `outputs` outputs: tap
/// i of output r reads r * stride + i * dilation - offset (poplin ConvParams::canonicalize drops
/// the others, which read only padding).
std::uint64_t live_taps(std::uint64_t outputs, std::uint64_t size, std::uint64_t kernel, std::uint64_t stride,
                        std::uint64_t dilation, std::int64_t offset) {
  std::uint64_t live = 0;
  for (std::uint64_t i = 0; i < kernel; ++i) {
    const std::int64_t low =
        offset - static_cast<std::int64_t>(i * dilation);  // r * stride must reach [low, low + size)
    const std::int64_t first =
        low <= 0 ? 0 : (low + static_cast<std::int64_t>(stride) - 1) / static_cast<std::int64_t>(stride);
    if (static_cast<std::uint64_t>(first) < outputs &&
        first * static_cast<std::int64_t>(stride) < low + static_cast<std::int64_t>(size))
      ++live;
  }
  return live;
}

/// Cycles of a rearrangement of `words` floats on the tile (poplin ConvModel addTransformCycleEstimate).
std::uint64_t rearrange_cycles(std::uint64_t words) {
  const std::uint64_t bytes = mul(words, kFloatBytes);
  return add(ceil_div(bytes, kRearrangeBytesPerCycle),
             ceil_div(mul(bytes, kRearrangeScaleNum), kRearrangeBytesPerCycle * kRearrangeScaleDen));
}

/// A conv call's shape after the taps that read only padding are dropped.
struct ConvShape {
  std::uint64_t out_rows, out_width, pixels, taps_h, taps_w, conv_groups, group_in, outs_per_group;
};

/// The AMP's cycles for a conv (poplin getConvPartialnx1Supervisor*Estimate).
std::uint64_t conv_amp_cycles(const ConvShape& shape, const Amp& amp, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::uint64_t entries = std::max<std::uint64_t>(ceil_div(shape.out_rows, workers), 1);
  const std::uint64_t pixels_per_worker = ceil_div(shape.pixels, workers);
  const std::uint64_t in_groups = ceil_div(shape.group_in, amp.input_channels);
  const std::uint64_t out_groups = ceil_div(shape.outs_per_group, amp.output_channels);
  // Weights load 64 bits a cycle, poplibs' default (use128BitConvUnitLoad off), as matmul's.
  const std::uint64_t load = add(ceil_div(amp.input_channels * amp.output_channels * amp.weight_bytes,
                                          std::max<std::uint32_t>(target.load_bytes_per_cycle / 2, 1)),
                                 kConvWeightLoadFixed);
  const std::uint64_t beyond =
      pixels_per_worker > kConvEntryPixelsInFixed * entries ? pixels_per_worker - kConvEntryPixelsInFixed * entries : 0;
  const std::uint64_t worker = add(add(kConvWorkerFixed, mul(entries, kConvEntryFixed)), mul(beyond, amp.core()));
  const std::uint64_t inner = mul(
      shape.taps_h, add(kConvKernelRow, mul(shape.taps_w, add(add(kConvKernelPosition, load), mul(workers, worker)))));
  const std::uint64_t per_group =
      add(kConvGroupFixed, mul(in_groups, add(kConvInGroupFixed, mul(out_groups, add(kConvOutGroupFixed, inner)))));
  const std::uint64_t outputs = mul(shape.pixels, mul(shape.conv_groups, shape.outs_per_group));
  const std::uint64_t zeroing = mul(workers, ceil_div(ceil_div(outputs, workers), kFloatsPerVector));
  return add(add(kConvAmpOverhead, mul(shape.conv_groups, per_group)), zeroing);
}

CodeletCharge conv_charge(std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  ConvShape shape{};
  shape.out_rows = params[kConvOutRows];
  shape.out_width = params[kConvOutWidth];
  shape.pixels = mul(shape.out_rows, shape.out_width);
  const std::uint64_t out_channels = params[kConvOutChannels];
  shape.group_in = params[kConvGroupInChannels];
  const std::uint64_t group_out = std::max<std::uint64_t>(params[kConvGroupOutChannels], 1);
  shape.taps_h = live_taps(shape.out_rows, params[kConvInRows], params[kConvKernelH], params[kConvStrideH],
                           params[kConvDilationH], static_cast<std::int32_t>(params[kConvTop]));
  shape.taps_w = live_taps(shape.out_width, params[kConvInWidth], params[kConvKernelW], params[kConvStrideW],
                           params[kConvDilationW], static_cast<std::int32_t>(params[kConvLeft]));
  const std::uint64_t positions = mul(shape.taps_h, shape.taps_w);
  shape.conv_groups = out_channels == 0 ? 0 : (out_channels - 1 + params[kConvFirstOutChannel]) / group_out + 1;
  shape.outs_per_group = std::min(out_channels, group_out);
  const Amp amp = amp_of(Codelet::matmul, target, false);
  const std::uint64_t input_words =
      mul(mul(params[kConvInRows], params[kConvInWidth]), mul(shape.conv_groups, shape.group_in));
  const std::uint64_t weight_words = mul(mul(positions, shape.group_in), out_channels);
  const std::uint64_t output_words = mul(shape.pixels, out_channels);
  // Input channels that do not fill the AMP's are padded: the input and weights rearranged first.
  std::uint64_t on_amp = conv_amp_cycles(shape, amp, target);
  if (shape.group_in % amp.input_channels != 0) on_amp = add(on_amp, rearrange_cycles(add(input_words, weight_words)));
  // Groups of few input channels: the AMP over groups combined (block-diagonal weights, poplin's
  // combineConvGroups transform), the input, weights and output rearranged on the tile.
  std::uint64_t combined = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t factor =
      std::min(amp.input_channels / std::max<std::uint64_t>(shape.group_in, 1), shape.conv_groups);
  if (factor > 1) {
    ConvShape merged = shape;
    merged.conv_groups = ceil_div(shape.conv_groups, factor);
    merged.group_in = shape.group_in * factor;
    merged.outs_per_group = shape.outs_per_group * factor;
    const std::uint64_t merged_weights =
        mul(mul(positions, merged.group_in), mul(merged.conv_groups, merged.outs_per_group));
    combined = add(conv_amp_cycles(merged, amp, target),
                   add(rearrange_cycles(add(input_words, merged_weights)), rearrange_cycles(output_words)));
  }
  const std::uint64_t entries = std::max<std::uint64_t>(ceil_div(shape.out_rows, workers), 1);
  const std::uint64_t pixels_per_worker = ceil_div(shape.pixels, workers);
  const std::uint64_t dot = add(ceil_div(shape.group_in, kFloatsPerVector), kHmacPerOutput);
  const std::uint64_t hmac_worker =
      add(kHmacWorkerFixed,
          mul(positions, add(mul(kHmacEntryFixed, entries), mul(mul(pixels_per_worker, shape.outs_per_group), dot))));
  const std::uint64_t on_workers =
      add(kHmacOverhead, mul(shape.conv_groups, add(kHmacGroupFixed, mul(workers, hmac_worker))));
  const std::uint32_t flags = params[kConvFlags];
  const std::uint64_t epilogue = (flags & (kConvHasBias | kConvRelu)) != 0
                                     ? bias_cycles(shape.pixels, out_channels, false, (flags & kConvRelu) != 0, target)
                                     : 0;
  CodeletCharge charge;
  if (combined < std::min(on_workers, on_amp)) {
    charge.cycles = add(combined, epilogue);
    charge.path = "amp-groups-combined";
    charge.amp_passes = mul(mul(ceil_div(shape.conv_groups, factor), positions),
                            ceil_div(shape.outs_per_group * factor, amp.output_channels));
  } else if (on_workers < on_amp) {
    charge.cycles = add(on_workers, epilogue);
    charge.path = "worker-mac";
  } else {
    charge.cycles = add(on_amp, epilogue);
    charge.path = "amp";
    charge.amp_passes =
        mul(mul(shape.conv_groups, positions),
            mul(ceil_div(shape.group_in, amp.input_channels), ceil_div(shape.outs_per_group, amp.output_channels)));
  }
  charge.mac_floor =
      ceil_div(mul(output_words, mul(positions, shape.group_in)), std::max<std::uint64_t>(amp.macs_per_cycle, 1));
  const std::uint64_t patch_words = mul(mul(params[kConvInRows], params[kConvInWidth]), params[kConvInChannels]);
  charge.load_floor = ceil_div(mul(add(patch_words, weight_words), kFloatBytes),
                               std::max<std::uint32_t>(target.load_bytes_per_cycle, 1));
  // A call that drops most taps still loads its patch and weights.
  charge.cycles = std::max(charge.cycles, charge.load_floor);
  return charge;
}

// Pooling (popnn PerformanceEstimation.hpp getPoolingCycles with the planner's unpack costs,
// over the worklists PoolVertices.cpp generateVertices builds): the output pixels are split evenly over the workers in
// runs of a row; each run of a row has a worklist entry per kernel position that reads the patch for one of its
// outputs, and each entry walks the channels in groups of up to 16 (two a vector), 3 cycles an output a vector.
constexpr std::uint64_t kPoolSupervisor = 7 + 6, kPoolWorkerFixed = 19, kPoolInitGroupFixed = 4, kPoolStartFixed = 8,
                        kPoolWorkerExit = 1, kPoolRowsFixedMax = 13, kPoolRowsFixedSum = 14;
constexpr std::uint64_t kPoolRowFixed = 13 + 2, kPoolEntryFixed = 20 + 3, kPoolChanGroupFixed = 2,
                        kPoolChanGroupPointers = 4, kPoolVectorFixedMax = 2 + 4 + 1, kPoolVectorFixedSum = 2 + 5 + 1,
                        kPoolPerOutputVector = 3;
constexpr std::uint64_t kPoolMaxChansPerGroup = 16;
// popnn's SelectiveScaling vertex (an average that leaves padding out of the count) is estimated at 10.
constexpr std::uint64_t kPoolSelectiveScaling = 10;

/// The outputs x in [begin, end) whose tap reads inside [0, size): 0 <= x * stride + tap - offset < size.
std::uint64_t outputs_inside(std::int64_t begin, std::int64_t end, std::int64_t stride, std::int64_t tap,
                             std::int64_t offset, std::int64_t size) {
  const std::int64_t low = offset - tap, high = offset - tap + size;  // x * stride in [low, high)
  const std::int64_t first = std::max(begin, low <= 0 ? 0 : (low + stride - 1) / stride);
  const std::int64_t last = std::min(end, high <= 0 ? 0 : (high - 1) / stride + 1);
  return last > first ? static_cast<std::uint64_t>(last - first) : 0;
}

CodeletCharge pool_charge(std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t workers = workers_of(target);
  const std::int64_t out_rows = params[kPoolOutRows], out_width = params[kPoolOutWidth];
  const std::int64_t in_rows = params[kPoolInRows], in_width = params[kPoolInWidth];
  const std::int64_t kernel_h = params[kPoolKernelH], kernel_w = params[kPoolKernelW];
  const std::int64_t stride_h = params[kPoolStrideH], stride_w = params[kPoolStrideW];
  const std::int64_t dilation_h = params[kPoolDilationH], dilation_w = params[kPoolDilationW];
  const std::int64_t top = static_cast<std::int32_t>(params[kPoolTop]);
  const std::int64_t left = static_cast<std::int32_t>(params[kPoolLeft]);
  const bool max = params[kPoolMode] == static_cast<std::uint32_t>(PoolMode::max);
  // Each worker's runs, worklist entries and outputs past the first of each entry.
  struct WorkerLoad {
    std::uint64_t rows = 0, entries = 0, extra_outputs = 0;
  };
  std::vector<WorkerLoad> loads(workers);
  bool reads_padding = false;
  const std::int64_t pixels = out_rows * out_width;
  for (std::uint64_t w = 0; w < workers; ++w) {
    const std::int64_t begin = static_cast<std::int64_t>(w) * pixels / static_cast<std::int64_t>(workers);
    const std::int64_t end = static_cast<std::int64_t>(w + 1) * pixels / static_cast<std::int64_t>(workers);
    for (std::int64_t run = begin; run < end;) {
      const std::int64_t row = run / out_width, x_begin = run % out_width;
      const std::int64_t x_end = std::min(out_width, x_begin + (end - run));
      ++loads[w].rows;
      for (std::int64_t ky = 0; ky < kernel_h; ++ky) {
        const std::int64_t in_row = row * stride_h + ky * dilation_h - top;
        if (in_row < 0 || in_row >= in_rows) {
          reads_padding = true;
          continue;
        }
        for (std::int64_t kx = 0; kx < kernel_w; ++kx) {
          const std::uint64_t inside = outputs_inside(x_begin, x_end, stride_w, kx * dilation_w, left, in_width);
          if (inside < static_cast<std::uint64_t>(x_end - x_begin)) reads_padding = true;
          if (inside == 0) continue;
          ++loads[w].entries;
          loads[w].extra_outputs += inside - 1;
        }
      }
      run += x_end - x_begin;
    }
  }
  // The channel grouping popnn's planner would pick: the cheapest of the even groupings up to 16.
  const std::uint64_t channels = params[kPoolChannels];
  std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
  for (std::uint64_t per_group = kFloatsPerVector; per_group <= kPoolMaxChansPerGroup; per_group += kFloatsPerVector) {
    const std::uint64_t groups = ceil_div(channels, per_group), vectors = per_group / kFloatsPerVector;
    const std::uint64_t entry = add(add(kPoolEntryFixed, mul(groups, kPoolChanGroupFixed)),
                                    add(mul(groups == 0 ? 0 : groups - 1, kPoolChanGroupPointers),
                                        mul(mul(groups, vectors), max ? kPoolVectorFixedMax : kPoolVectorFixedSum)));
    std::uint64_t longest = 0;
    // The output's initialisation is shared out a vector at a time, the remainder to the first workers.
    const std::uint64_t init_vectors = mul(static_cast<std::uint64_t>(pixels), vectors);
    for (std::uint64_t w = 0; w < workers; ++w) {
      const std::uint64_t init = init_vectors / workers + (w < init_vectors % workers ? 1 : 0);
      std::uint64_t cycles = add(add(kPoolWorkerFixed, mul(add(kPoolInitGroupFixed, init), groups)),
                                 add(kPoolStartFixed, kPoolWorkerExit));
      const WorkerLoad& load = loads[w];
      if (load.rows != 0)
        cycles = add(cycles, add(add(max ? kPoolRowsFixedMax : kPoolRowsFixedSum, mul(load.rows, kPoolRowFixed)),
                                 add(mul(load.entries, entry),
                                     mul(mul(load.extra_outputs, mul(groups, vectors)), kPoolPerOutputVector))));
      longest = std::max(longest, cycles);
    }
    best = std::min(best, add(kPoolSupervisor, mul(workers, longest)));
  }
  CodeletCharge charge;
  charge.path = "workers";
  const bool scales = params[kPoolMode] == static_cast<std::uint32_t>(PoolMode::average) && reads_padding;
  charge.cycles = add(best, scales ? kPoolSelectiveScaling : 0);
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
  // A patch of at least a pixel of a channel: its span then bounds every size a kernel walks.
  for (std::uint32_t i :
       {conv ? kConvInRows : kPoolInRows, conv ? kConvInWidth : kPoolInWidth, conv ? kConvInChannels : kPoolChannels})
    if (params[i] == 0) return "its patch must hold at least one pixel of one channel";
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

WorkerMacShape worker_mac_shape(Codelet codelet, std::span<const std::uint32_t> params, const Target& target) {
  const std::uint64_t m = params[0], k = params[1], n = params[2];
  const bool swapped = params[kMatmulOrientationParam] == static_cast<std::uint32_t>(MatmulOrientation::swapped);
  const bool half = codelet == Codelet::matmul_half;
  // b [k, n]: a column's values are n apart, so no 64-bit pair is contiguous.
  const bool contiguous = matmul_b_is_n_by_k(codelet, params[kMatmulOrientationParam]) || n == 1;
  WorkerMacShape shape;
  shape.rows_per_worker = ceil_div(swapped ? n : m, workers_of(target));
  shape.outputs = swapped ? m : n;
  // k in groups of equal size (halves in pairs), the last zero-padded: for each number of groups
  // the smallest size that makes it, the fastest kept (a group of even size keeps 64-bit loads).
  const std::uint64_t grain = half ? 2 : 1, rounded = ceil_div(k, grain) * grain;
  const std::uint64_t per_load = half ? kHalvesPerLoad : kFloatsPerVector;
  // One group that loads whole 64-bit words (or cannot load them at all) is already the fastest.
  if (!contiguous || rounded % per_load == 0) {
    shape.input_groups = rounded == 0 ? 0 : 1;
    shape.group_dot_cycles = group_dot_cycles(rounded, half, contiguous);
    return shape;
  }
  std::uint64_t best = std::numeric_limits<std::uint64_t>::max();
  for (std::uint64_t size = grain; size <= rounded;) {
    const std::uint64_t groups = ceil_div(rounded, size);
    const WorkerMacShape candidate{shape.rows_per_worker, shape.outputs, groups,
                                   group_dot_cycles(size, half, contiguous)};
    const std::uint64_t cycles = worker_mac_cycles(candidate, half, target);
    if (cycles < best) {
      best = cycles;
      shape = candidate;
    }
    if (groups == 1) break;
    size = ceil_div(ceil_div(rounded, groups - 1), grain) * grain;
  }
  return shape;
}

const char* unary_function_name(UnaryFunction function) {
  constexpr const char* kNames[kUnaryFunctionCount] = {
      "sigmoid", "tanh",        "erf",        "sqrt",     "pow",    "exp",   "log",
      "neg",     "abs",         "reciprocal", "floor",    "ceil",   "round", "sign",
      "sin",     "cos",         "softplus",   "softsign", "elu",    "celu",  "thresholded_relu",
      "mish",    "logical_not", "tan",        "asin",     "acos",   "atan",  "sinh",
      "cosh",    "asinh",       "acosh",      "atanh",    "is_inf", "is_nan"};
  const auto index = static_cast<std::uint32_t>(function);
  return index < kUnaryFunctionCount ? kNames[index] : "?";
}

const char* binary_function_name(BinaryFunction function) {
  constexpr const char* kNames[kBinaryFunctionCount] = {"subtract",
                                                        "multiply",
                                                        "divide",
                                                        "add",
                                                        "max",
                                                        "min",
                                                        "prelu",
                                                        "equal",
                                                        "less",
                                                        "less_or_equal",
                                                        "greater",
                                                        "greater_or_equal",
                                                        "int_add",
                                                        "int_subtract",
                                                        "int_multiply",
                                                        "int_divide",
                                                        "int_equal",
                                                        "int_less",
                                                        "int_less_or_equal",
                                                        "int_greater",
                                                        "int_greater_or_equal",
                                                        "logical_and",
                                                        "logical_or",
                                                        "logical_xor",
                                                        "int_max",
                                                        "int_min",
                                                        "power",
                                                        "remainder",
                                                        "int_remainder",
                                                        "int_modulo"};
  const auto index = static_cast<std::uint32_t>(function);
  return index < kBinaryFunctionCount ? kNames[index] : "?";
}

bool unary_loops_by_element(UnaryFunction function) {
  return function == UnaryFunction::erf || function == UnaryFunction::abs || function == UnaryFunction::sin ||
         function == UnaryFunction::cos || function == UnaryFunction::asin || function == UnaryFunction::acos;
}

const char* reduce_function_name(ReduceFunction function) {
  constexpr const char* kNames[kReduceFunctionCount] = {"sum", "mean", "max",         "min",       "prod",
                                                        "l1",  "l2",   "log_sum_exp", "sum_square"};
  const auto index = static_cast<std::uint32_t>(function);
  return index < kReduceFunctionCount ? kNames[index] : "?";
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
    case Codelet::cast:
    case Codelet::select:
      return params[0];
    case Codelet::multi_slice:
      if (operand == 0) return product(params[0], params[1]);
      return operand == 1 ? params[2] : product(params[2], params[1]);
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
      case UnaryFunction::exp:
        return kExpPerVector;
      case UnaryFunction::log:
        return kLogPerVector;
      case UnaryFunction::neg:
        return kNegatePerVector;
      case UnaryFunction::abs:
        return kAbsPerVector;
      case UnaryFunction::reciprocal:
        return kReciprocalPerVector;
      case UnaryFunction::floor:
      case UnaryFunction::ceil:
      case UnaryFunction::round:
        return kRoundingPerVector;
      case UnaryFunction::sign:
        return kSignPerVector;
      case UnaryFunction::sin:
      case UnaryFunction::cos:
        return kSinePerVector;
      case UnaryFunction::softplus:
        return kSoftplusPerVector;
      case UnaryFunction::softsign:
        return kSoftsignPerVector;
      case UnaryFunction::elu:
        return kEluPerVector;
      case UnaryFunction::celu:
        return kCeluPerVector;
      case UnaryFunction::thresholded_relu:
        return kThresholdPerVector;
      case UnaryFunction::mish:
        return kMishPerVector;
      case UnaryFunction::logical_not:
        return kLogicalNotPerVector;
      case UnaryFunction::tan:
        return kTanPerVector;
      case UnaryFunction::asin:
        return kAsinPerVector;
      case UnaryFunction::acos:
        return kAcosPerVector;
      case UnaryFunction::atan:
        return kAtanPerVector;
      case UnaryFunction::sinh:
      case UnaryFunction::cosh:
        return kHyperbolicPerVector;
      case UnaryFunction::asinh:
      case UnaryFunction::acosh:
        return kInverseHyperbolicPerVector;
      case UnaryFunction::atanh:
        return kAtanhPerVector;
      case UnaryFunction::is_inf:
      case UnaryFunction::is_nan:
        return kFloatClassPerVector;
    }
    return kPowerPerVector;  // an unknown function is refused at load; the slowest is charged
  }
  if (codelet != Codelet::binary && codelet != Codelet::binary_row && codelet != Codelet::binary_column)
    throw std::logic_error(fmt::format("codelet {} has no function", codelet_name(codelet)));
  const auto function = static_cast<BinaryFunction>(params[function_param(codelet)]);
  if (!is_float_function(function)) {  // a pair's share of the typed loop, rounded up
    const FunctionLoop loop = binary_loop(function);
    return ceil_div(mul(loop.cycles, kFloatsPerVector), loop.elements);
  }
  if (function == BinaryFunction::max || function == BinaryFunction::min) return kMaxMinPerVector;
  if (function == BinaryFunction::prelu) return kPreluPerVector;
  const bool divide = function == BinaryFunction::divide;
  if (codelet == Codelet::binary) return divide ? kDividePerVector : kAddPerVector;
  if (codelet == Codelet::binary_row) return divide ? kDivideRowPerVector : kBiasAddPerVector;
  if (codelet == Codelet::binary_column) return divide ? kScalarDividePerVector : kScalarPerVector;
  throw std::logic_error(fmt::format("codelet {} has no function", codelet_name(codelet)));
}

std::uint32_t codelet_code_bytes(Codelet codelet) {
  // Indexed by the enum value: the AMP's supervisor and worker loops are the largest.
  // unary holds every function's loop (erf's polynomial, pow's log and exp), binary four.
  // conv holds the AMP's nx1 loops and the horizontal MAC's; pool its max and average loops.
  // binary holds the typed functions' loops too (v9); cast its three types' conversions.
  constexpr std::uint32_t kCodeBytes[kCodeletCount] = {1536, 512, 384, 256, 256, 192, 640,  1792, 1792, 448, 768, 896,
                                                       1024, 768, 384, 320, 384, 320, 2560, 768,  256,  384, 192, 320};
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
  if (codelet == Codelet::multi_slice) {
    // The indices and the rows they pick, not the whole table.
    input_words = add(params[2], mul(params[2], params[1]));
  } else if (codelet == Codelet::reduce_bias) {
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
      charge.cycles = reduce_cycles(reduce_loops(params[1]), params[0], params[1] % kReduceFloatsPerLoop != 0, target);
      break;
    case Codelet::reduce_bias: {
      // The own partial is one more part; its rows are one run when they are contiguous
      // (own_stride = cols), else each row is walked on its own.
      const std::uint64_t rows = params[1], cols = params[2];
      const bool one_run = params[3] == params[2] || rows == 1;
      const std::uint64_t loops = one_run ? reduce_loops(mul(rows, cols)) : mul(rows, reduce_loops(cols));
      const bool ragged = (one_run ? mul(rows, cols) : cols) % kReduceFloatsPerLoop != 0;
      charge.cycles = add(reduce_cycles(loops, std::uint64_t{params[0]} + 1, ragged, target),
                          bias_cycles(rows, cols, false, params[4] != 0, target));
      break;
    }
    case Codelet::relu:
      charge.cycles = in_place_unary_cycles(params[0], kReluPerVector, target);
      break;
    case Codelet::add:
      charge.cycles = elementwise_cycles(params[0], kAddWorkerFixed, kAddPerVector, target);
      break;
    case Codelet::copy:
      charge.cycles = cast_cycles(params[0], false, target);
      break;
    case Codelet::clip:
      // popops' Clamp: a max and a min a vector beside the load and store, as add's loop.
      charge.cycles = elementwise_cycles(params[0], kAddWorkerFixed, kAddPerVector, target);
      break;
    case Codelet::unary: {
      const std::uint64_t per_vector = function_cycles_per_vector(codelet, params);
      if (per_vector == kPowerPerVector)  // pow by a scalar other than 2: BinaryOp1D, an element a loop
        charge.cycles = elementwise_cycles(params[0], kAddWorkerFixed, per_vector / 2, target, kSupervisorCycles, 1);
      else if (unary_loops_by_element(static_cast<UnaryFunction>(params[1])))
        charge.cycles =
            elementwise_cycles(params[0], kUnaryWorkerFixed, per_vector / 2, target, kUnarySupervisorCycles, 1);
      else charge.cycles = elementwise_cycles(params[0], kUnaryWorkerFixed, per_vector, target, kUnarySupervisorCycles);
      break;
    }
    case Codelet::binary: {
      const auto function = static_cast<BinaryFunction>(params[1]);
      const FunctionLoop loop = binary_loop(function);
      charge.cycles =
          is_float_function(function)
              ? elementwise_cycles(params[0], kAddWorkerFixed, function_cycles_per_vector(codelet, params), target)
              : elementwise_cycles(params[0], kAddWorkerFixed, loop.cycles, target, kSupervisorCycles, loop.elements);
      break;
    }
    case Codelet::binary_row: {
      const auto function = static_cast<BinaryFunction>(params[2]);
      const FunctionLoop loop = binary_loop(function);
      // Typed functions have no broadcast vertex: the flat in-place loop, the row re-read.
      charge.cycles = is_float_function(function)
                          ? row_vector_cycles(params[0], params[1], function, target)
                          : elementwise_cycles(mul(params[0], params[1]), kInPlaceBinaryWorkerFixed, loop.cycles,
                                               target, kSupervisorCycles, loop.elements);
      break;
    }
    case Codelet::cast:
      // Cast1D between float32 and int32 (and bool words): a pair a cycle, as a float copy.
      charge.cycles = cast_cycles(params[0], false, target);
      break;
    case Codelet::select:
      charge.cycles =
          elementwise_cycles(params[0], kSelectWorkerFixed, kSelectPerElement, target, kSupervisorCycles, 1);
      break;
    case Codelet::multi_slice: {
      const std::uint64_t workers = workers_of(target), count = params[2];
      std::uint64_t vectors = ceil_div(params[1], kFloatsPerVector), offsets = ceil_div(count, workers);
      if (count == 1) vectors = ceil_div(vectors, workers);  // splitSingleRegion
      charge.cycles = mul(workers, add(kMultiSliceWorkerFixed,
                                       mul(offsets, add(kMultiSlicePerOffset, mul(vectors, kMultiSlicePerVector)))));
      break;
    }
    case Codelet::binary_column:
      // Each row's scalar applied to the row (poplibs BroadcastVectorOuter).
      charge.cycles = row_scalar_cycles(params[0], params[1], function_cycles_per_vector(codelet, params), target);
      break;
    case Codelet::transpose:
      charge.cycles = transpose_cycles(params[0], params[1], target);
      break;
    case Codelet::reduce_rows:
      charge.cycles = reduce_rows_cycles(params[0], params[1], static_cast<ReduceFunction>(params[2]), target);
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
