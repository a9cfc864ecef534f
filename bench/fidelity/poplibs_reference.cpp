// Graphcore's poplibs cycle estimators for the GC200 (six workers, 64-bit data path, float
// partials), transcribed from the poplibs sources named beside each function. Written apart from
// the simulator's charges on purpose: nothing here is shared with them.
#include "poplibs_reference.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
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

// getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat with one output pass a group (a
// matmul is one conv group). Weights load at 8 bytes a cycle: Target::getConvUnitCoeffLoadBytesPerCycle()
// is 16 on ipu2 and poplin halves it unless the convolution option use128BitConvUnitLoad is set (off by
// default; ConvPartial1x1Out's estimator, poplin/codelets ConvPartial1x1Out perf estimator).
u64 ampVertex(u64 field, u64 k, u64 outputs, bool floatActs, u64 convUnits, u64 convGroups = 1) {
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
  return 50 + kContexts * (retainFirst + retainPerGroup * (inGroups * convGroups - 1)) +
         convGroups *
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

// --- poplin: convolutions on one tile (float activations, float partials) ----------------------

// One run of a worker's worklist: outputs [xBegin, xEnd) of output row `row` of one image.
struct RowRun {
  u64 row, xBegin, xEnd;
};

// poplin ConvUtilInternal partitionConvPartialByWorker (and popnn PoolVertices
// partitionPartialByContext, the same cut): the batch x rows x width outputs in six contiguous
// spans, each span cut at row ends.
std::vector<std::vector<RowRun>> splitOutputsOverWorkers(u64 batch, u64 rows, u64 width) {
  std::vector<std::vector<RowRun>> byWorker(kContexts);
  const u64 total = batch * rows * width;
  for (u64 context = 0; context < kContexts; ++context) {
    u64 begin = context * total / kContexts;
    const u64 end = (context + 1) * total / kContexts;
    while (begin < end) {
      const u64 stop = std::min(end, (begin / width + 1) * width);
      byWorker[context].push_back({begin / width % rows, begin % width, stop % width == 0 ? width : stop % width});
      begin = stop;
    }
  }
  return byWorker;
}

// ConvParams::getOutputSize: the output positions of one field dimension.
u64 outputSize(u64 input, u64 padBefore, u64 padAfter, u64 kernel, u64 dilation, u64 stride) {
  const u64 padded = input + padBefore + padAfter, reach = dilation * (kernel - 1) + 1;
  return padded < reach ? 0 : (padded - reach) / stride + 1;
}

// getZeroSupervisorVertexCycleEstimate via estimateZeroSupervisorCycles: every worker zeroes
// ceil(field x chansPerGroup / 6) floats, two a cycle, 14 cycles less the 9 of state retention
// (zeroPartialsRetentionSavings), for each of `groups` output groups.
u64 zeroPartials(u64 field, u64 chansPerGroup, u64 groups) {
  const u64 perWorker = divUp(field * chansPerGroup, kContexts);
  return (divUp(perWorker, kFloatsPer64) + 14 - 9) * kContexts * groups;
}

// getConvPartialnx1WorkerCycles, float activations and partials: 17 to the partition loop, then a
// worklist entry of n outputs 3 + (33, 44, or 45 + 8 (n - 3)) less the 9 of state retention
// (convnx1WorkerRetentionSavings).
u64 nx1Worker(const std::vector<RowRun>& runs) {
  u64 cycles = 17;
  for (const RowRun& run : runs) {
    const u64 n = run.xEnd - run.xBegin;
    cycles += 3 + (n == 1 ? 33 : n == 2 ? 44 : 45 + (n - 3) * 8) - 9;
  }
  return cycles;
}

// The AMP on a general kernel: getConvPartialnx1SupervisorCycleEstimate (inner and outer loops,
// HalfFloat paths with float activations) plus ConvModel's estimateZeroSupervisorCycles. The
// kernel's rows go to the conv units `filterHeight` at a time; poplin assumes one worklist for
// every kernel position (padding is not subtracted).
u64 nx1Vertex(const ConvShape& s, u64 outH, u64 outW, u64 units, u64 inChansPerGroup, u64 filterHeight) {
  const u64 inPerGroup = s.inChannels / s.groups, outPerGroup = s.outChannels / s.groups;
  const u64 inGroups = divUp(inPerGroup, inChansPerGroup), outGroups = divUp(outPerGroup, units);
  // getConvPartialnx1SupervisorKernelLoopCycleEstimateHalfFloat (one worklist for all positions):
  // the slowest worker, or the least loaded one plus 9, once an output pass (outChansPerGroup /
  // units = 1) and kernel position.
  u64 slowest = 0, least = std::numeric_limits<u64>::max();
  for (const auto& runs : splitOutputsOverWorkers(s.batch, outH, outW)) {
    slowest = std::max(slowest, kContexts * nx1Worker(runs));
    least = std::min(least, kContexts * nx1Worker(runs));
  }
  const u64 outerPositions = divUp(s.kernelH, filterHeight), innerPositions = s.kernelW;
  const u64 perPosition = std::max(slowest, least + 9);
  // getConvPartialAmpSupervisorWeightLoadCycleEstimate: weightBytesPerConvUnit (8 floats, taken
  // before ConvModel scales weightsPerConvUnit down) x units at 8 bytes a cycle.
  const u64 loads = units * 32 / 8;
  const u64 heightLoads = filterHeight == 4 ? 60 : filterHeight == 2 ? 46 : filterHeight == 1 ? 15 : 20 * filterHeight;
  const u64 innermost = loads + heightLoads + 3;
  // getConvPartialnx1SupervisorInnerLoopCycleEstimateHalfFloat.
  const u64 inner =
      outerPositions * (14 + innerPositions * (17 - 5 + innermost)) + perPosition * outerPositions * innerPositions;
  // getConvPartialnx1SupervisorOuterLoopCycleEstimateHalfFloat: convNx1Overhead 109, the first
  // pass's retention savings (9 + 9 a worker), the supervisor's zeroing loop and the group loops.
  const u64 g = s.groups;
  const u64 outer = 109 + kContexts * 9 + kContexts * 9 + g * (outGroups * 17 + (outGroups - 1) * 6 + 1) + (g - 1) * 6 +
                    1 + g * (16 + inGroups * (14 + outGroups * (14 + inner)));
  return outer + zeroPartials(s.batch * outH * outW, units, outGroups * g);
}

// The horizontal MAC: ConvModel's HMAC case, estimateConvPartialHorizontalMacInnerLoopCycles (the
// busiest worker's rows: whole output rows, or rows cut in rowSplitFactor parts when there are
// fewer rows than workers) through getConvPartialHorizontalMacSupervisorInnerLoopCycleEstimate and
// OuterLoopCycleEstimate, plus the zeroing; one output channel a group (float partials).
u64 hmacConv(const ConvShape& s, u64 outH, u64 outW, u64 inChansPerGroup) {
  const u64 inPerGroup = s.inChannels / s.groups, outPerGroup = s.outChannels / s.groups;
  const u64 inGroups = divUp(inPerGroup, inChansPerGroup);
  const u64 rows = s.batch * outH;
  const u64 rowSplit = kContexts / std::gcd(kContexts, rows);
  const u64 maxPartRows = divUp(rows * rowSplit, kContexts);
  const u64 wholeRows = maxPartRows / rowSplit, partRows = maxPartRows % rowSplit;
  const u64 perRow = 7 + denseDot(inChansPerGroup, true);  // 7 + numOutChans (1) x the dot product
  // getConvPartialHorizontalMacCycleEstimate for one kernel position: 16, then 19 + size x perRow
  // a worklist entry.
  u64 position = 16 + wholeRows * (19 + outW * perRow);
  if (partRows != 0) position += 19 + partRows * (outW + rowSplit - 1) / rowSplit * perRow;
  const u64 worker = 16 + s.kernelH * s.kernelW * position;
  const u64 inner = kContexts * worker;  // one worklist: the least loaded worker counts as 0
  const u64 outer = 58 + kContexts * 9 + s.groups * (23 + inGroups * (15 + outPerGroup * (10 + inner)));
  return outer + zeroPartials(rows * outW, 1, outPerGroup * s.groups);
}

// ConvModel addTransformCycleEstimate for an inference convolution (no swapOperands, expandDims
// or outChanFlattenDims): channels padded to the vertex's groupings, or conv groups combined,
// rearrange the tile's input and weights and its output, each at the exchange's 4 bytes a cycle
// plus a copy at min(memcpy 8, a float) bytes a cycle scaled by getScaleFactorForTransform (5/4,
// or 5/3 when the channel product is odd). The regroupOutput and regroupWeights guesses about
// the next layer and the backward pass are left out.
u64 rearrangement(const ConvShape& t, u64 outH, u64 outW, u64 inChansPerGroup, u64 partialChansPerGroup,
                  bool combined) {
  const u64 ci = t.inChannels / t.groups, co = t.outChannels / t.groups;
  const bool padIn = ci % inChansPerGroup != 0, padOut = co % partialChansPerGroup != 0;
  const u64 paddedIn = divUp(ci, inChansPerGroup) * inChansPerGroup;
  const u64 paddedOut = divUp(co, partialChansPerGroup) * partialChansPerGroup;
  const u64 exchangeBytes = 4, reorderBytes = 4;
  auto copy = [&](u64 bytes, u64 channels) {
    return divUp(bytes, exchangeBytes) + divUp(bytes * 5, reorderBytes * (channels % 2 == 0 ? 4 : 3));
  };
  u64 cycles = 0;
  if (combined || padIn || padOut) {
    u64 elements = t.kernelH * t.kernelW * paddedIn * paddedOut * t.groups;
    if (combined || padIn) elements += t.batch * t.height * t.width * paddedIn * t.groups;
    cycles += copy(elements * 4, ci * co);
  }
  if (combined || padOut) cycles += copy(t.batch * outH * outW * paddedOut * t.groups * 4, co);
  return cycles;
}

// poplin getOuterProductCycleEstimate (float, two channels a group: the slow path), a sixth of the
// field a worker; ConvModel's OUTER_PRODUCT case. Only for one input channel and a 1x1 kernel.
u64 outerProduct(u64 field, u64 outChannels, u64 groups) {
  const u64 width = divUp(field, kContexts), chanGroups = divUp(outChannels, 2) * groups;
  return kContexts * (25 + chanGroups * (11 + width * (10 + 2 * 2)));
}

// --- popnn: pooling -----------------------------------------------------------------------------

// The output positions [first, last) of one dimension that kernel index k reads inside the input
// (poplin getOutputRangeForKernelIndex; padding reads nothing).
std::pair<u64, u64> outputsReading(u64 k, u64 input, u64 padBefore, u64 dilation, u64 stride, u64 outputs) {
  const auto offset = static_cast<std::int64_t>(k * dilation) - static_cast<std::int64_t>(padBefore);
  // o * stride + offset in [0, input)
  const std::int64_t lo = offset >= 0 ? 0 : (-offset + static_cast<std::int64_t>(stride) - 1) / stride;
  const std::int64_t top = static_cast<std::int64_t>(input) - 1 - offset;
  const std::int64_t hi = top < 0 ? 0 : top / static_cast<std::int64_t>(stride) + 1;
  const auto first = static_cast<u64>(std::min<std::int64_t>(lo, outputs));
  const auto last = static_cast<u64>(std::clamp<std::int64_t>(hi, static_cast<std::int64_t>(first), outputs));
  return {first, last};
}

// popnn PerformanceEstimation.hpp getPoolingCycles (forward, default unpack costs of 2): one
// worker's rows, each with its entries' element counts less one (numElementsM1).
u64 poolWorker(const std::vector<std::vector<u64>>& rows, u64 initInfo, u64 chansPerGroupD, u64 chanGroups, u64 worker,
               bool max) {
  const u64 unpack = 2;
  u64 cycles = 4 + 2 + 2 + 7 + 2 + unpack;
  // The initialisation split, with the source's unsigned arithmetic.
  const auto numElems = static_cast<std::uint32_t>(initInfo * chansPerGroupD / kContexts);
  const std::uint32_t left = static_cast<std::uint32_t>(initInfo) - numElems * static_cast<std::uint32_t>(kContexts);
  const u64 initElems = numElems + (worker < left ? 1 : 0);
  cycles += (4 + initElems) * chanGroups;
  cycles += 5 + 1 + unpack;
  if (rows.empty()) return cycles + 1;
  cycles += 2 + (max ? 1 : 2);
  cycles += 3 + 2 + unpack * 2 + 1;
  for (const auto& row : rows) {
    cycles += 13;
    for (const u64 elementsM1 : row) {
      cycles += 20;
      for (u64 group = 0; group < chanGroups; ++group) {
        cycles += (group != 0 ? 4 : 0) + 1;
        cycles += chansPerGroupD * (2 + (max ? 4 : 5) + 3 * elementsM1 + 1);
        ++cycles;
      }
      cycles += 3;
    }
    cycles += 2;
  }
  return cycles + 1;
}

// ConvParams::canonicalize in one field dimension: kernel positions that read only padding for
// every output are truncated, with the padding they faced; inputs no output reads are truncated;
// an output of one position drops its stride.
struct CanonicalDim {
  u64 kernel, stride, padBefore, padAfter, input;
};
CanonicalDim canonicalDim(u64 input, u64 padBefore, u64 padAfter, u64 kernel, u64 dilation, u64 stride, u64 outputs) {
  u64 first = kernel, last = 0;
  for (u64 k = 0; k < kernel; ++k) {
    const auto [begin, end] = outputsReading(k, input, padBefore, dilation, stride, outputs);
    if (begin < end) first = std::min(first, k), last = k;
  }
  if (first > last) return {kernel, stride, padBefore, padAfter, input};  // nothing read: not a case here
  const auto signedInput = static_cast<std::int64_t>(input);
  const std::int64_t lowest = static_cast<std::int64_t>(first * dilation) - static_cast<std::int64_t>(padBefore);
  const std::int64_t highest =
      static_cast<std::int64_t>((outputs - 1) * stride + last * dilation) - static_cast<std::int64_t>(padBefore);
  const std::int64_t used = std::min(highest, signedInput - 1) - std::max<std::int64_t>(lowest, 0) + 1;
  return {last - first + 1, outputs == 1 ? 1 : stride, static_cast<u64>(std::max<std::int64_t>(-lowest, 0)),
          static_cast<u64>(std::max<std::int64_t>(highest - (signedInput - 1), 0)), static_cast<u64>(used)};
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

Estimate convolution(const ConvShape& shape) {
  const u64 outH =
      outputSize(shape.height, shape.padTop, shape.padBottom, shape.kernelH, shape.dilationH, shape.strideH);
  const u64 outW =
      outputSize(shape.width, shape.padLeft, shape.padRight, shape.kernelW, shape.dilationW, shape.strideW);
  const u64 field = shape.batch * outH * outW;
  ConvShape s = shape;
  const CanonicalDim rows = canonicalDim(s.height, s.padTop, s.padBottom, s.kernelH, s.dilationH, s.strideH, outH);
  const CanonicalDim cols = canonicalDim(s.width, s.padLeft, s.padRight, s.kernelW, s.dilationW, s.strideW, outW);
  s.kernelH = rows.kernel, s.strideH = rows.stride, s.padTop = rows.padBefore, s.padBottom = rows.padAfter;
  s.height = rows.input;
  s.kernelW = cols.kernel, s.strideW = cols.stride, s.padLeft = cols.padBefore, s.padRight = cols.padAfter;
  s.width = cols.input;
  Estimate best{std::numeric_limits<double>::max(), ""};
  // A 1x1 kernel at stride 1 without padding: the flattenDims transform (a reshape) folds the
  // batch and rows into one field, which canUseConvPartial1x1Vertex needs.
  const bool pointwise = s.kernelH == 1 && s.kernelW == 1 && s.strideH == 1 && s.strideW == 1 && s.padTop == 0 &&
                         s.padLeft == 0 && s.padBottom == 0 && s.padRight == 0;
  // ConvPlan getCombineConvGroupCandidates: one float input channel a conv group, several groups:
  // also factors 2, 4 and 8 of conv groups combined into one with block-diagonal weights.
  std::vector<u64> factors = {1};
  if (s.inChannels == s.groups && s.groups > 1) factors.insert(factors.end(), {2, 4, 8});
  for (const u64 factor : factors) {
    ConvShape t = s;
    if (factor > 1) {  // calculateGroupedParams: groups padded to a multiple of the factor
      t.groups = divUp(s.groups, factor);
      t.inChannels = t.groups * factor;
      t.outChannels = t.groups * factor * (s.outChannels / s.groups);
    }
    const u64 inPerGroup = t.inChannels / t.groups, outPerGroup = t.outChannels / t.groups;
    const bool combined = factor > 1;
    const std::string combining = combined ? ", conv groups combined by " + std::to_string(factor) : "";
    auto consider = [&](u64 cycles, u64 inChans, u64 partialChans, std::string vertex) {
      const u64 moved = rearrangement(t, outH, outW, inChans, partialChans, combined);
      vertex += combining;
      if (moved != 0) vertex += " + rearrangement " + std::to_string(moved);
      if (double(cycles + moved) < best.cycles) best = {double(cycles + moved), std::move(vertex)};
    };
    // ConvVertexType getConvVertexAMPCandidates for float on ipu2: 16 conv units and the 8-unit
    // configuration, output channels grouped by the units, input channels by 8, 4 or 2 (a multiple
    // of the two floats loaded a cycle dividing the 8 weights of a unit). ConvModel's AMP case:
    // with fewer than 8 input channels a group, a unit holds weightsPerConvUnit / inChansPerGroup
    // kernel rows (weightsPerConvUnit halved for 8 units).
    for (u64 units : {16u, 8u}) {
      for (u64 inChans : {8u, 4u, 2u}) {
        const u64 weightsPerUnit = inChans == 8 ? 8 : 8 / (16 / units);
        if (weightsPerUnit % inChans != 0) continue;
        const u64 filterHeight = weightsPerUnit / inChans;
        const std::string name = " " + std::to_string(units) + " units, " + std::to_string(inChans) + " in-chans";
        // ampVertex counts float input groups of 8: give it as many as inChans-wide groups there are.
        if (pointwise && filterHeight == 1)
          consider(ampVertex(field, divUp(inPerGroup, inChans) * 8, outPerGroup, true, units, t.groups), inChans, units,
                   "ConvPartial1x1Out" + name);
        consider(nx1Vertex(t, outH, outW, units, inChans, filterHeight), inChans, units,
                 "ConvPartialnx1" + name + (filterHeight > 1 ? ", " + std::to_string(filterHeight) + " rows" : ""));
      }
    }
    // The horizontal MAC (getConvVertexHMACCandidates, float grain 1: every input channel grouping
    // that lowers the number of groups); the vertical MAC has no float vertex
    // (getConvVertexVMACCandidates).
    u64 previousGroups = 0;
    for (u64 inChans = 1; inChans <= inPerGroup; ++inChans) {
      const u64 groups = divUp(inPerGroup, inChans);
      if (groups == previousGroups) continue;
      previousGroups = groups;
      consider(hmacConv(t, outH, outW, inChans), inChans, 1,
               "ConvPartialHorizontalMac, " + std::to_string(inChans) + " in-chans");
    }
    // getConvVertexOuterProductCandidates: float in and out; one input channel, a 1x1 kernel.
    if (inPerGroup == 1 && pointwise) consider(outerProduct(field, outPerGroup, t.groups), 1, 2, "OuterProduct");
  }
  // poplin addBias (a row vector over the output's [field, channels]) and popnn's relu.
  if (s.bias) {
    const Estimate bias = biasRowsInPlace(field, s.outChannels, false, s.relu);
    best.cycles += bias.cycles;
    best.vertex += " + " + bias.vertex;
  } else if (s.relu) {
    const Estimate relu = reluInPlace(field * s.outChannels);
    best.cycles += relu.cycles;
    best.vertex += " + " + relu.vertex;
  }
  return best;
}

Estimate pooling(const PoolShape& shape, bool max) {
  PoolShape s = shape;
  u64 channels = s.channels;
  // PoolPlan getTransform: fewer channels than the grain (8 bytes: two floats) take a factor of
  // another dimension into the channels, innermost first: a spatial one only under a 1-wide
  // kernel at stride 1 (canFlattenDim), then the batch.
  if (channels < 2) {
    const u64 desired = std::lcm(channels, u64{2}) / channels;
    u64 factor = 1;
    if (s.kernelW == 1 && s.strideW == 1 && s.padLeft == 0 && s.padRight == 0) {
      const u64 f = std::gcd(desired, s.width);
      s.width /= f, factor *= f;
    }
    if (factor < desired && s.kernelH == 1 && s.strideH == 1 && s.padTop == 0 && s.padBottom == 0) {
      const u64 f = std::gcd(desired / factor, s.height);
      s.height /= f, factor *= f;
    }
    if (factor < desired) {
      const u64 f = std::gcd(desired / factor, s.batch);
      s.batch /= f, factor *= f;
    }
    channels *= factor;
  }
  const u64 outH = outputSize(s.height, s.padTop, s.padBottom, s.kernelH, s.dilationH, s.strideH);
  const u64 outW = outputSize(s.width, s.padLeft, s.padRight, s.kernelW, s.dilationW, s.strideW);
  // PoolVertices generateVertices: for each worker's run of a row, one worklist entry per kernel
  // position that reads inside the input (the outputs it reaches, less one); empty rows dropped.
  std::vector<std::vector<std::vector<u64>>> work(kContexts);
  const auto byWorker = splitOutputsOverWorkers(s.batch, outH, outW);
  for (u64 context = 0; context < kContexts; ++context)
    for (const RowRun& run : byWorker[context]) {
      std::vector<u64> row;
      for (u64 ky = 0; ky < s.kernelH; ++ky) {
        const auto [rowFirst, rowLast] = outputsReading(ky, s.height, s.padTop, s.dilationH, s.strideH, outH);
        if (run.row < rowFirst || run.row >= rowLast) continue;
        for (u64 kx = 0; kx < s.kernelW; ++kx) {
          const auto [first, last] = outputsReading(kx, s.width, s.padLeft, s.dilationW, s.strideW, outW);
          const u64 begin = std::max(first, run.xBegin), end = std::min(last, run.xEnd);
          if (begin < end) row.push_back(end - begin - 1);
        }
      }
      if (!row.empty()) work[context].push_back(std::move(row));
    }
  // PoolPlan: channels grouped in grains of two floats, at most 8 grains and no more than the
  // channels (the detected grouping of a channels-innermost tensor is all of them); the planner
  // keeps the fastest grouping (its rearrangement and exchange costs are not the tile's vertex).
  const u64 initInfo = s.batch * outH * outW;
  const u64 maxGrains = std::max<u64>(1, std::min<u64>(divUp(channels, 2), 8));
  u64 best = std::numeric_limits<u64>::max(), bestGroup = 2;
  for (u64 grains = 1; grains <= maxGrains; ++grains) {
    const u64 chanGroups = divUp(channels, 2 * grains);
    u64 slowest = 0;
    for (u64 context = 0; context < kContexts; ++context)
      slowest = std::max(slowest, poolWorker(work[context], initInfo, grains, chanGroups, context, max));
    const u64 cycles = 7 + slowest * kContexts + 6;
    if (cycles < best) best = cycles, bestGroup = 2 * grains;
  }
  std::string vertex =
      std::string(max ? "MaxPooling" : "SumPooling") + ", " + std::to_string(bestGroup) + " chans a group";
  // Average pooling divides by the kernel positions inside the input; a scale common to every
  // output goes into SumPooling, else a SelectiveScaling vertex follows (its estimator: 10).
  if (!max) {
    std::vector<u64> rowsRead(outH, 0), colsRead(outW, 0);
    for (u64 k = 0; k < s.kernelH; ++k) {
      const auto [first, last] = outputsReading(k, s.height, s.padTop, s.dilationH, s.strideH, outH);
      for (u64 o = first; o < last; ++o) ++rowsRead[o];
    }
    for (u64 k = 0; k < s.kernelW; ++k) {
      const auto [first, last] = outputsReading(k, s.width, s.padLeft, s.dilationW, s.strideW, outW);
      for (u64 o = first; o < last; ++o) ++colsRead[o];
    }
    const bool common = std::adjacent_find(rowsRead.begin(), rowsRead.end(), std::not_equal_to<>()) == rowsRead.end() &&
                        std::adjacent_find(colsRead.begin(), colsRead.end(), std::not_equal_to<>()) == colsRead.end();
    if (!common) {
      best += 10;
      vertex += " + SelectiveScaling";
    }
  }
  return {double(best), vertex};
}

}  // namespace poplibs_reference
