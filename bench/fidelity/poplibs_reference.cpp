// Graphcore's poplibs cycle estimators for the GC200 (six workers, 64-bit data path, float
// partials), transcribed from the poplibs sources named beside each function. Written apart from
// the simulator's charges on purpose: nothing here is shared with them.
#include "poplibs_reference.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace poplibs_reference {

namespace {

using u64 = std::uint64_t;

constexpr u64 kContexts = 6;          // Target::getNumWorkerContexts
constexpr u64 kSupervisorBasic = 11;  // popops PerformanceEstimation.cpp basicOpSupervisorOverhead()
constexpr u64 kFloatsPer64 = 2;       // Target::getVectorWidth(FLOAT) on a 64-bit data path

u64 divUp(u64 a, u64 b) { return (a + b - 1) / b; }

// The field split over the workers as poplin's worklists cut it: contiguous, sizes differing by one.
u64 workerShare(u64 total, u64 context) { return (context + 1) * total / kContexts - context * total / kContexts; }

// popops basicOpLoopCycles: cyclesPerVector * (numElems + vectorSize - 1) / vectorSize, integer.
u64 loopCycles(u64 elems, u64 vectorSize, u64 cyclesPerVector) {
  return cyclesPerVector * (elems + vectorSize - 1) / vectorSize;
}

// --- poplin: the AMP (ConvPartial1x1Out) -------------------------------------------------------

// PerformanceEstimation.hpp getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat: one worker
// with one worklist entry of `elems` field positions (float activations, or half with float partials).
u64 ampWorker(u64 elems, bool zeroing, bool floatActs, u64 convUnits) {
  const u64 z = zeroing ? 1 : 0;
  if (floatActs) {
    const u64 zeroPerGroup = convUnits == 16 ? 8 : 4;
    if (elems == 0) return 24;
    if (elems == 1) return 47 + (2 + zeroPerGroup) * z;
    if (elems == 2) return 46 + (2 + zeroPerGroup * 2) * z;
    return 46 + (2 + zeroPerGroup * elems) * z + (elems - 3) * 8;
  }
  // Half activations, float partials: the common code path; 7 cycles of state retention saved.
  const u64 tail = zeroing ? 1 : 2;
  u64 cycles = elems == 0   ? 20 + tail
               : elems == 1 ? 31 + tail
               : elems == 2 ? 40 + tail
                            : (zeroing ? 37 : 38) + (elems - 3) * 4;
  return cycles - 7;
}

// The supervisor waits for the slowest worker; an idle worker (no worklist) costs nothing, and
// the least loaded one carries 14 cycles of tagging.
u64 ampInner(u64 field, bool zeroing, bool floatActs, u64 convUnits) {
  u64 most = 0, least = std::numeric_limits<u64>::max();
  for (u64 context = 0; context < kContexts; ++context) {
    const u64 elems = workerShare(field, context);
    const u64 cycles = elems == 0 ? 0 : kContexts * ampWorker(elems, zeroing, floatActs, convUnits);
    most = std::max(most, cycles);
    least = std::min(least, cycles);
  }
  return std::max(most, least + 14);
}

// getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat with one conv group and one output
// pass a group. Weights load at 8 bytes a cycle: Target::getConvUnitCoeffLoadBytesPerCycle() is 16
// on ipu2 and poplin halves it unless the convolution option use128BitConvUnitLoad is set (off by
// default; ConvPartial1x1Out's estimator, poplin/codelets ConvPartial1x1Out perf estimator).
u64 ampVertex(u64 field, u64 k, u64 outputs, bool floatActs, u64 convUnits) {
  // weightsPerConvUnit = conv chain depth 4 x input elements loaded a cycle (2 floats, 4 halves).
  const u64 inChans = floatActs ? 8 : 16;
  const u64 weightBytesPerUnit = 32;  // 8 floats or 16 halves
  const u64 coeffLoadBytes = 8;
  const u64 loads = convUnits * weightBytesPerUnit / coeffLoadBytes;
  // Smaller input channel groups (poplin ConvVertexType offers every multiple of the load width
  // below weightsPerConvUnit) only add groups: the pass's cycles do not depend on them.
  const u64 inGroups = divUp(k, inChans), outGroups = divUp(outputs, convUnits);
  const u64 retainFirst = floatActs ? 0 : 7, retainPerGroup = floatActs ? 0 : 3;
  const u64 common = 1;  // float partials take the common half/float code path
  const u64 withZeroing = ampInner(field, true, floatActs, convUnits);
  const u64 withoutZeroing = ampInner(field, false, floatActs, convUnits);
  return 50 + kContexts * (retainFirst + retainPerGroup * (inGroups - 1)) +
         (12 + common + (inGroups - 1) * (15 - common + 1 + outGroups * (19 + (6 + loads + withoutZeroing))) +
          (10 + 1 + outGroups * (19 - common + (7 + loads + withZeroing))));
}

// --- poplin: the horizontal MAC ---------------------------------------------------------------

// PerformanceEstimation.hpp getDenseDotProductCycles, float partials: 64-bit loads of two floats
// or four halves a cycle where the size divides into them, else narrower loads at two cycles.
u64 denseDot(u64 size, bool floatActs) {
  const u64 actsPer64 = floatActs ? 2 : 4;
  const u64 inner = (1 + 2) + 3 + 1;  // rpt and wind-down, sum with previous partials, branch
  for (u64 width = actsPer64; width >= 1; width /= 2)
    if (size % width == 0) return inner + (width < actsPer64 ? 1 : 0) + (size / width) * (width >= actsPer64 ? 1 : 2);
  return inner + 2 * size;
}

// getConvPartialHorizontalMacSupervisorCycleEstimate: the field split over the workers, one
// output channel a group (partialChansPerGroup 1 with float partials), k in groups of `inChans`.
u64 hmacVertex(u64 field, u64 inChans, u64 inGroups, u64 outputs, bool floatActs) {
  u64 slowest = 0;
  for (u64 context = 0; context < kContexts; ++context) {
    const u64 rows = workerShare(field, context);
    const u64 run = rows == 0 ? 7 : 19 + rows * (7 + denseDot(inChans, floatActs));
    slowest = std::max(slowest, kContexts * (16 + run + 16));
  }
  const u64 overhead = floatActs ? 58 : 63, zeroRetention = 9;
  return overhead + kContexts * zeroRetention + 23 + inGroups * (15 + outputs * (10 + slowest));
}

// poplin ConvVertexType getConvVertexHMACCandidates: input channel groups from the grain (1 float,
// 2 half) up to k rounded to the grain, the smallest group for each number of groups; the planner
// keeps the cheapest.
u64 hmacBest(u64 field, u64 k, u64 outputs, bool floatActs) {
  const u64 grain = floatActs ? 1 : 2;
  const u64 rounded = divUp(k, grain) * grain;
  u64 best = std::numeric_limits<u64>::max(), previousGroups = 0;
  for (u64 inChans = grain; inChans <= rounded; inChans += grain) {
    const u64 groups = divUp(rounded, inChans);
    if (groups == previousGroups) continue;
    previousGroups = groups;
    best = std::min(best, hmacVertex(field, inChans, groups, outputs, floatActs));
  }
  return best;
}

// --- poplin: the vertical MAC (half inputs, one output channel) -------------------------------

// getConvPartialVerticalMacSupervisorCycleEstimate with float partials and 4 conv groups a group
// (the smallest ConvVertexType offers), one input channel a group: every value of k is a pass.
u64 vmacVertex(u64 field, u64 k) {
  const u64 groupsPerGroup = 4;
  u64 slowest = 0;
  for (u64 context = 0; context < kContexts; ++context) {
    const u64 size = workerShare(field, context);
    // getConvPartialVerticalMacCycleEstimate: 19 to reload state, then per worklist entry 7 + 5
    // plus getVerticalMacDotProductCycles (3 + 2 (size - 1) for four channels).
    const u64 worker = 19 + (size == 0 ? 0 : 7 + 5 + 3 + 2 * (size - 1) * (groupsPerGroup / 4));
    slowest = std::max(slowest, kContexts * worker);
  }
  const u64 outElems = field * groupsPerGroup;
  const u64 zeroing = 4 + divUp(outElems, 2);
  const u64 reduction = 10 - 1 + (7 + 2 + 2 * (kContexts - 1)) * divUp(outElems, kContexts) / groupsPerGroup;
  const u64 outer = 32 + k * (24 + slowest);
  // `25 + floatPartials ? 1 : 0` in the source parses as (26 ? 1 : 0): 1 cycle.
  return 61 + 14 + 1 + zeroing + outer + reduction;
}

// --- popops / poplin small vertices -------------------------------------------------------------

// popops PerformanceEstimation.cpp castWorkerCycles for float <-> half and float -> float: vectors
// as wide as two 64-bit loads and one 64-bit store allow, 19 cycles of prologue, a few per
// remainder bit.
u64 castWorker(u64 elems, u64 fromBytes, u64 toBytes) {
  const u64 fromLoad = 8 / fromBytes, toStore = 8 / toBytes;
  const u64 opWidth = std::min(fromLoad * 2, toStore);
  const u64 perVector = std::max(opWidth / std::min(opWidth, fromLoad), opWidth / std::min(opWidth, toStore));
  u64 cycles = 19 + perVector * (elems / opWidth);
  for (u64 bit = 1; bit < opWidth; bit *= 2) cycles += 1 + ((elems % opWidth) & bit ? 2 : 0);
  return cycles;
}

// getCast1DCycleEstimate: workers take multiples of four elements; 23 cycles from the supervisor
// each, 19 for setzi, runall, sync and br.
u64 cast1D(u64 count, u64 fromBytes, u64 toBytes) {
  const u64 perWorker = std::min(count, 4 * divUp(divUp(count, 4), kContexts));
  return 19 + kContexts * (castWorker(perWorker, fromBytes, toBytes) + 23);
}

// popops popopsCycleEstimators UnaryOp1D / UnaryOp1DInPlace: (cycles, elements) per unrolled loop
// from unaryOpPerfInfo / unaryOpInPlacePerfInfo (float).
struct Loop {
  u64 cycles, elems;
};
u64 unary1D(u64 count, Loop loop, bool inPlace, bool exponent) {
  const u64 fixed = inPlace ? 55 : (exponent ? 33 : 17);
  const u64 perWorker = divUp(count, kContexts);
  return kSupervisorBasic + 9 + kContexts * (fixed + divUp(perWorker, loop.elems) * loop.cycles);
}

// BinaryOp1D (29 fixed a worker) and getBinaryOp1DInPlaceEstimate (58): ADD, SUBTRACT and MULTIPLY
// walk natural vectors at 1 + 2 cycles (binaryOpInnerLoopCycles, external codelet, no forced
// interleaving); DIVIDE 10 a pair; POWER 312 an element (binaryOpPerfInfo).
// The later entries of binaryOpPerfInfo, {cycles, false, unroll}: iceil(elements, unroll) * cycles
// (binaryOpInnerLoopCycles): POWER FLOAT {312, 1}, REMAINDER FLOAT {133, 2}, MAXIMUM INT {7, 1},
// REMAINDER INT {292, 1}.
Loop binaryLoop(Binary op) {
  switch (op) {
    case Binary::divide:
      return {10, 2};
    case Binary::power:
      return {312, 1};
    case Binary::remainder:
      return {133, 2};
    case Binary::intMaximum:
      return {7, 1};
    case Binary::intRemainder:
      return {292, 1};
    default:
      return {1 + 2, kFloatsPer64};
  }
}
// BinaryOp1D's worker starts at 29 cycles for FLOAT operands, 26 for others.
u64 binary1D(u64 count, Loop loop, bool inPlace, bool integer = false) {
  const u64 perWorker = divUp(count, kContexts);
  const u64 fixed = inPlace ? 58 : (integer ? 26 : 29);
  return kSupervisorBasic + kContexts * (fixed + divUp(perWorker, loop.elems) * loop.cycles);
}

// popops BroadcastVectorInner1DInPlace (a row vector of length cols over rows blocks): the
// multi-vertex add, multiply and divide cores for float (vectorInnerMultiVertex*Cycles).
u64 vectorInnerInPlace(Binary op, u64 rows, u64 cols) {
  const u64 blocks = divUp(rows, kContexts);  // the busiest worker's blocks
  const u64 supervisor = 1 + 6 * 2;
  if (op == Binary::divide) {
    const u64 f32div = 3;
    u64 core = 1;
    if (cols % 2 == 1) core += 5 + 2 + cols * (3 + (blocks - 1) * (f32div + 1) + f32div + 3);
    else core += 5 + 3 + cols / 2 * (2 + f32div + (blocks - 1) * (2 * f32div) + f32div + 3);
    core += 1;
    return 1 + 6 + 6 + kContexts * 19 + kContexts * core + 1 + 2;
  }
  const u64 loopBody = 5 + cols * (3 + 2 * blocks + 5);  // vectorInnerAdd/MulCoreCycles_float
  if (op == Binary::multiply) return supervisor + kContexts * 17 + kContexts * (17 + 2 + loopBody) + 6 + 3 * kContexts;
  const u64 add = supervisor + kContexts * (17 + 1 + loopBody + 1);
  return op == Binary::add ? add + 2 * kContexts : add + 6 + 3 * kContexts;
}

// The best poplibs vertex for a row vector applied in place: BroadcastVectorInner1DInPlace, or
// BinaryOp1DInPlace over the rows as one flat tensor.
Estimate rowVectorBest(Binary op, u64 rows, u64 cols) {
  const u64 inner = vectorInnerInPlace(op, rows, cols);
  const u64 flat = binary1D(rows * cols, binaryLoop(op), true);
  if (inner < flat) return {double(inner), "BroadcastVectorInner1DInPlace"};
  return {double(flat), "BinaryOp1DInPlace"};
}

// popops BroadcastVectorOuterByRow1D / ByColumn1D (in place or not): a scalar per row, the rows
// (by row) or the columns (by column) split over the workers; 7 cycles an outer loop (25 when
// misaligned: an odd row of floats), one cycle of overhead a vector; DIVIDE 6 + 1 an element.
u64 vectorOuter(Binary op, u64 rows, u64 cols, bool byRow) {
  const u64 outerOverhead = cols % kFloatsPer64 == 0 ? 7 : 25;
  const u64 elems = byRow ? cols : divUp(cols, kContexts);
  const u64 loop = op == Binary::divide ? (6 + 1) * elems : loopCycles(elems, kFloatsPer64, 1 + 1);
  const u64 outerLoops = byRow ? divUp(rows, kContexts) : rows;
  return (15 + outerLoops * (outerOverhead + loop)) * kContexts + kSupervisorBasic;
}

Estimate columnScalarBest(Binary op, u64 rows, u64 cols) {
  const u64 byRow = vectorOuter(op, rows, cols, true), byColumn = vectorOuter(op, rows, cols, false);
  if (byRow <= byColumn) return {double(byRow), "BroadcastVectorOuterByRow1D"};
  return {double(byColumn), "BroadcastVectorOuterByColumn1D"};
}

// popops reduction: getCycleEstimateReduceAllRegionsContinuous (ContinuousReduce, float, one cycle
// an op, two floats a cycle) for `outputs` rows of `partials` values on one worker.
u64 continuousReduce(u64 outputs, u64 partials) {
  u64 cycles = outputs * (partials / 2);
  cycles += partials & 1 ? 2 : 0;
  cycles += 12 * outputs + 10;
  return cycles + 7;
}

// ReductionConnection.cpp: whole rows go to the workers; with fewer rows than workers each row is
// cut into pieces (splitTwoStageReductionsBetweenWorkers, at least two columns a piece, getMaxSplit)
// and a second stage adds the pieces.
u64 rowReduction(u64 rows, u64 cols) {
  if (rows >= kContexts) return kContexts * continuousReduce(divUp(rows, kContexts), cols);
  const u64 pieces = std::max<u64>(1, std::min(kContexts / rows, cols / 2));
  const u64 first = kContexts * continuousReduce(1, divUp(cols, pieces));
  return pieces == 1 ? first : first + kContexts * continuousReduce(1, pieces);
}

// popops getTransposeCycleEstimate (float: 2x2 grains, 3 cycles a grain) for `transposes`
// contiguous [rows, cols] blocks split over the workers; sizes round up to whole grains.
u64 transposeVertex(u64 transposes, u64 rows, u64 cols) {
  const u64 rowGrains = divUp(rows, 2), colGrains = divUp(cols, 2), perWorker = divUp(transposes, kContexts);
  u64 worker = 0;
  if (rowGrains == 1 && colGrains == 1) worker = perWorker == 1 ? 17 + 12 : 17 + 20 + (perWorker - 2) * 3;
  else if (colGrains == 1) worker = 27 + perWorker * (15 + (20 + 3 * (rowGrains - 2)));
  else worker = 29 + perWorker * (18 + rowGrains * (12 + 3 * (colGrains - 2)));
  return 7 + kContexts * worker;
}

// poplin getReduceCycleEstimate (ReduceAdd, float partials and output): loops of four floats, the
// odd and pair remainders a loop each; a last partial round where only some workers are busy runs
// the shorter remainder loop (2 P + 13) when the count is not a multiple of four.
u64 reduceAdd(u64 parts, u64 count) {
  u64 loops = count / 4 + (count & 1 ? 1 : 0) + (count & 2 ? 1 : 0);
  u64 cycles = 32, perWorker = loops / kContexts;
  if (loops % kContexts != 0) {
    if (count & 3) cycles += 2 * parts + 13;
    else ++perWorker;
  }
  cycles += (3 * parts + 7) * perWorker;
  return cycles * kContexts;
}

std::string oriented(const char* vertex, bool swapped) { return std::string(vertex) + (swapped ? " swapped" : ""); }

}  // namespace

Estimate matMul(std::uint64_t m, std::uint64_t k, std::uint64_t n, bool halfInputs) {
  const bool floatActs = !halfInputs;
  Estimate best{std::numeric_limits<double>::max(), ""};
  auto consider = [&](u64 cycles, std::string vertex) {
    if (double(cycles) < best.cycles) best = {double(cycles), std::move(vertex)};
  };
  for (bool swapped : {false, true}) {
    // swapOperands (poplin ConvPlan.cpp) streams b's columns against a's rows; the output is then
    // c^T, rearranged as the planner charges it (addTransformCycleEstimate's rearrangeOutput),
    // here at the transpose vertex's estimate. c of one row or one column needs none.
    const u64 field = swapped ? n : m, outputs = swapped ? m : n;
    const u64 rearrange = swapped && m > 1 && n > 1 ? transposeBlock(n, m).cycles : 0;
    // ConvVertexType: 16 conv units, and on ipu2 the 8-unit configuration too; half inputs with
    // float partials have 8.
    for (u64 units : floatActs ? std::vector<u64>{16, 8} : std::vector<u64>{8})
      consider(ampVertex(field, k, outputs, floatActs, units) + rearrange,
               oriented(units == 16 ? "ConvPartial1x1Out 16 units" : "ConvPartial1x1Out 8 units", swapped));
    consider(hmacBest(field, k, outputs, floatActs) + rearrange, oriented("ConvPartialHorizontalMac", swapped));
    if (!floatActs && outputs == 1)
      consider(vmacVertex(field, k) + rearrange, oriented("ConvPartialVerticalMac", swapped));
  }
  if (halfInputs) {
    best.cycles += double(cast1D(m * k, 4, 2));  // our matmul_half takes a as float
    best.vertex += " + Cast1D";
  }
  return best;
}

Estimate reluInPlace(std::uint64_t count) {
  // popnn's nonLinearity maps RELU to popops::map, i.e. UnaryOp1DInPlace RELU (2 a pair in place).
  return {double(unary1D(count, {2, 2}, true, false)), "UnaryOp1DInPlace RELU"};
}

Estimate addTensors(std::uint64_t count) {
  return {double(binary1D(count, binaryLoop(Binary::add), false)), "BinaryOp1D ADD"};
}

Estimate copyTensor(std::uint64_t count) {
  // poplibs has no copy vertex (Poplar copies); its nearest is Cast1D float -> float, one 64-bit
  // load and store a pair.
  return {double(cast1D(count, 4, 4)), "Cast1D float->float"};
}

Estimate biasRowsInPlace(std::uint64_t rows, std::uint64_t cols, bool halfBias, bool relu) {
  Estimate bias = rowVectorBest(Binary::add, rows, cols);
  if (halfBias) {
    bias.cycles += double(cast1D(cols, 2, 4));
    bias.vertex = "Cast1D half->float + " + bias.vertex;
  }
  if (relu) {
    const Estimate after = reluInPlace(rows * cols);
    bias.cycles += after.cycles;
    bias.vertex += " + " + after.vertex;
  }
  return bias;
}

Estimate softmaxRows(std::uint64_t rows, std::uint64_t cols) {
  // popnn NonLinearity.cpp softmaxImpl (stable): reduce MAX, sub the row's max (out of place: the
  // input is kept), EXP in place, reduce ADD, invInPlace the sums ("As the divide is broadcast we
  // compute 1/x first"), then mulInPlace by them.
  const Estimate subtract = columnScalarBest(Binary::subtract, rows, cols);
  const Estimate multiply = columnScalarBest(Binary::multiply, rows, cols);
  const u64 max = rowReduction(rows, cols), sum = rowReduction(rows, cols);
  const u64 exp = unary1D(rows * cols, {6, 2}, true, true);
  const u64 inverse = unary1D(rows, {6, 2}, true, false);
  return {double(max + sum + exp + inverse) + subtract.cycles + multiply.cycles,
          "ContinuousReduce MAX, " + subtract.vertex +
              " SUBTRACT, UnaryOp1DInPlace EXPONENT, ContinuousReduce ADD, "
              "UnaryOp1DInPlace INVERSE, " +
              multiply.vertex + "InPlace MULTIPLY"};
}

Estimate layerNormRows(std::uint64_t rows, std::uint64_t cols) {
  // poplin Norms.cpp: normStatistics reduces x (ADD) and x^2 (SQUARE_ADD) per row, the
  // InverseStdDeviation vertex (6 + 4 + 5 a pair of rows; rows split over the workers), whitening
  // (sub the mean, mul by 1/std in place), then gamma and beta as row vectors in place.
  const u64 statistics = 2 * rowReduction(rows, cols);
  const u64 inverseStd = kContexts * (6 + 4 + 5 * divUp(divUp(rows, kContexts), 2));
  const Estimate subtract = columnScalarBest(Binary::subtract, rows, cols);
  const Estimate scale = columnScalarBest(Binary::multiply, rows, cols);
  const Estimate gamma = rowVectorBest(Binary::multiply, rows, cols);
  const Estimate beta = rowVectorBest(Binary::add, rows, cols);
  return {double(statistics + inverseStd) + subtract.cycles + scale.cycles + gamma.cycles + beta.cycles,
          "ContinuousReduce ADD and SQUARE_ADD, InverseStdDeviation, " + subtract.vertex + ", " + scale.vertex + ", " +
              gamma.vertex + " MULTIPLY, " + beta.vertex + " ADD"};
}

Estimate unaryOp(Unary op, std::uint64_t count) {
  // unaryOpPerfInfo (float): SIGMOID and TANH 12 a pair, SQRT 10 a pair, SQUARE 2 a pair, ERF 18 an
  // element; POWER is the binary op (binaryOpPerfInfo 312 an element) against the exponent.
  switch (op) {
    case Unary::sigmoid:
      return {double(unary1D(count, {12, 2}, false, false)), "UnaryOp1D SIGMOID"};
    case Unary::tanh:
      return {double(unary1D(count, {12, 2}, false, false)), "UnaryOp1D TANH"};
    case Unary::erf:
      return {double(unary1D(count, {18, 1}, false, false)), "UnaryOp1D ERF"};
    case Unary::sqrt:
      return {double(unary1D(count, {10, 2}, false, false)), "UnaryOp1D SQRT"};
    case Unary::square:
      return {double(unary1D(count, {2, 2}, false, false)), "UnaryOp1D SQUARE"};
    // The later unaryOpPerfInfo entries with unaryOpInnerLoopCycles' 4 cycles of loop overhead a
    // vector: TAN {3900, natural vector}, ASIN {102, an element}, IS_INF and IS_NAN {3, natural vector}.
    case Unary::tan:
      return {double(unary1D(count, {3900 + 4, kFloatsPer64}, false, false)), "UnaryOp1D TAN"};
    case Unary::asin:
      return {double(unary1D(count, {102 + 4, 1}, false, false)), "UnaryOp1D ASIN"};
    case Unary::isInf:
      return {double(unary1D(count, {3 + 4, kFloatsPer64}, false, false)), "UnaryOp1D IS_INF"};
    case Unary::isNan:
      return {double(unary1D(count, {3 + 4, kFloatsPer64}, false, false)), "UnaryOp1D IS_NAN"};
    case Unary::power:
      break;
  }
  return {double(binary1D(count, {312, 1}, false)), "BinaryOp1D POWER"};
}

Estimate binaryOp(Binary op, std::uint64_t count) {
  const bool integer = op == Binary::intMaximum || op == Binary::intRemainder;
  const char* name = op == Binary::divide       ? "BinaryOp1D DIVIDE"
                     : op == Binary::power      ? "BinaryOp1D POWER"
                     : op == Binary::remainder  ? "BinaryOp1D REMAINDER"
                     : op == Binary::intMaximum ? "BinaryOp1D MAXIMUM INT"
                     : integer                  ? "BinaryOp1D REMAINDER INT"
                                                : "BinaryOp1D";
  return {double(binary1D(count, binaryLoop(op), false, integer)), name};
}

Estimate rowVectorInPlace(Binary op, std::uint64_t rows, std::uint64_t cols) { return rowVectorBest(op, rows, cols); }

Estimate columnScalarInPlace(Binary op, std::uint64_t rows, std::uint64_t cols) {
  Estimate estimate = columnScalarBest(op, rows, cols);
  estimate.vertex += "InPlace";
  return estimate;
}

Estimate reduceRows(std::uint64_t rows, std::uint64_t cols, bool mean) {
  // A mean multiplies the sums by 1 / cols: BroadcastScalar1DInPlace MULTIPLY over `rows` values
  // (broadcastArithmetic1DCycleEstimate: 20 a worker, 1 + 1 a pair).
  const u64 sums = rowReduction(rows, cols);
  const u64 scale = mean ? kSupervisorBasic + kContexts * (20 + divUp(divUp(rows, kContexts), 2) * 2) : 0;
  return {double(sums + scale),
          mean ? "ContinuousReduce ADD, BroadcastScalar1DInPlace MULTIPLY" : "ContinuousReduce ADD"};
}

Estimate transposeBlock(std::uint64_t rows, std::uint64_t cols) {
  // popops rearrangement gives each worker its own transpositions: the block cut into one band of
  // source rows a worker (fewer with fewer rows), each band a transposition.
  const u64 bands = std::min(rows, kContexts);
  return {double(transposeVertex(bands, divUp(rows, bands), cols)), "Transpose (a band of rows a worker)"};
}

Estimate reduceParts(std::uint64_t parts, std::uint64_t count) {
  return {double(reduceAdd(parts, count)), "ReduceAdd"};
}

Estimate reducePartsThenBias(std::uint64_t parts, std::uint64_t rows, std::uint64_t cols, bool relu) {
  const Estimate bias = biasRowsInPlace(rows, cols, false, relu);
  return {double(reduceAdd(parts + 1, rows * cols)) + bias.cycles, "ReduceAdd, " + bias.vertex};
}

}  // namespace poplibs_reference
