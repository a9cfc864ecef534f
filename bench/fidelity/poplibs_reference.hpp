// bench-fidelity's yardstick: Graphcore's poplibs cycle estimators (GC200, six workers) transcribed
// on their own, so a charge is compared with poplibs and not with itself. It includes no Tessera
// header and shares no function with core/src/codelets.cpp or the cost models (a test checks both).
#pragma once
#include <cstdint>
#include <string>

namespace poplibs_reference {

/// A poplibs estimate and the vertex (or vertices) poplibs would run for the operation.
struct Estimate {
  double cycles = 0;
  std::string vertex;
};

/// c[m, n] = a[m, k] b[k, n] with constant weights: the best of the AMP (ConvPartial1x1Out, 16
/// or 8 conv units), the horizontal MAC and the vertical MAC, each on the operands as given or
/// swapped (poplin's swapOperands) with the rearrangement of the swapped output. Half inputs:
/// half weights and float partials, after a cast of a to half.
Estimate matMul(std::uint64_t m, std::uint64_t k, std::uint64_t n, bool halfInputs);
/// Elementwise vertices over `count` floats.
Estimate reluInPlace(std::uint64_t count);
Estimate addTensors(std::uint64_t count);
Estimate copyTensor(std::uint64_t count);
/// A bias row [cols] (float, or half cast to float first) added in place to [rows, cols], then relu.
Estimate biasRowsInPlace(std::uint64_t rows, std::uint64_t cols, bool halfBias, bool relu);
/// popnn's stable softmax over each row of [rows, cols].
Estimate softmaxRows(std::uint64_t rows, std::uint64_t cols);
/// poplin's layer norm over each row of [rows, cols], then gamma and beta.
Estimate layerNormRows(std::uint64_t rows, std::uint64_t cols);

enum class Unary { sigmoid, tanh, erf, sqrt, power, square, tan, asin, isInf, isNan };
enum class Binary { subtract, multiply, divide, add, power, remainder, intMaximum, intRemainder };
/// out = f(in) over `count` floats (power: by a scalar exponent other than 2).
Estimate unaryOp(Unary op, std::uint64_t count);
/// out = a op b over `count` floats.
Estimate binaryOp(Binary op, std::uint64_t count);
/// data[r, c] = data[r, c] op row[c], in place.
Estimate rowVectorInPlace(Binary op, std::uint64_t rows, std::uint64_t cols);
/// data[r, c] = data[r, c] op column[r], in place.
Estimate columnScalarInPlace(Binary op, std::uint64_t rows, std::uint64_t cols);
/// out[r] = the sum (or mean) of row r of [rows, cols].
Estimate reduceRows(std::uint64_t rows, std::uint64_t cols, bool mean);
/// out[c, r] = in[r, c] for a [rows, cols] float block on one tile.
Estimate transposeBlock(std::uint64_t rows, std::uint64_t cols);
/// out[i] = sum over p of in[p * count + i].
Estimate reduceParts(std::uint64_t parts, std::uint64_t count);
/// A reduction of `parts` partials plus the owner's own, then a bias row and relu (in place).
Estimate reducePartsThenBias(std::uint64_t parts, std::uint64_t rows, std::uint64_t cols, bool relu);

/// One tile's float32 convolution: `batch` images of an input patch [height, width, inChannels],
/// padded as given, by a [kernelH, kernelW, inChannels / groups, outChannels] kernel (dilated and
/// strided), then the bias and ReLU when flagged.
struct ConvShape {
  std::uint64_t batch = 1, inChannels = 1, height = 1, width = 1, outChannels = 1;
  std::uint64_t kernelH = 1, kernelW = 1, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  std::uint64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0, groups = 1;
  bool bias = false, relu = false;
};
/// The fewest cycles of the float vertices poplin's planner weighs for the tile's share (no
/// transform but the free flattening of a pointwise field): ConvPartialnx1 or ConvPartial1x1Out
/// with 16 or 8 conv units and 8, 4 or 2 input channels a group, ConvPartialHorizontalMac with its
/// best input grouping, OuterProduct for one input channel; then BroadcastVectorInner bias and ReLU.
Estimate convolution(const ConvShape& shape);

/// One tile's float32 pooling: `batch` images of an input patch [height, width, channels].
struct PoolShape {
  std::uint64_t batch = 1, channels = 1, height = 1, width = 1;
  std::uint64_t kernelH = 1, kernelW = 1, strideH = 1, strideW = 1, dilationH = 1, dilationW = 1;
  std::uint64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
};
/// popnn's MaxPooling or SumPooling vertex (average: divided by the kernel positions inside the
/// input, SelectiveScaling when that differs between outputs) with its fastest channel grouping.
Estimate pooling(const PoolShape& shape, bool max);

}  // namespace poplibs_reference
