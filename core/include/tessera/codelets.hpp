// The codelet set: the kernels a tile runs, their operands and their cycle formulas.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace tessera {

struct Target;

/// Version of the codelet set (semantics and cycle formulas); written into packages.
// 5: unary, binary, binary_row, reduce_rows; 6: binary_column and add as a binary function,
// fused codelets charged as their steps, matmul_half's half worker MAC; 8: charges follow
// poplibs' vertices (docs/targets.md); conv, pool (window ops over feature maps) and clip;
// 9: further unary functions (exp, log, ...), max, min and prelu, reduce_rows' functions; tensor
// types: comparisons, logic and int32 arithmetic as binary functions, logical_not, cast and select;
// 10: multi_slice (embedding lookups by runtime indices); power, remainder, int_max/min/remainder/modulo
// binary functions; tan ... is_nan unary functions; 11: conv and pool charges re-derived from poplibs (taps that
// read only padding dropped, depthwise on the AMP over combined groups with no float vertical MAC, pool by
// popnn's getPoolingCycles).
inline constexpr std::uint32_t kCodeletSetVersion = 11;

/// Operands are word offsets into buffers (program) or byte addresses (tile image);
/// params are the shape numbers listed per codelet. Data is float32 unless marked half
/// (IEEE binary16, two per word, packed row-major, the last word padded), int32 (a word's
/// bits) or bool (a word holding 0 or 1), as the function or the params say. Float params
/// (scale, eps) are passed as their float32 bit patterns.
enum class Codelet : std::uint16_t {
  /// operands {a, b, c}; params {m, k, n, orientation}: c[m,n] = a[m,k] * b[k,n] (swapped: c
  /// holds c^T [n,m], as the AMP leaves it, for a transpose call; matmul_leaves_transpose)
  matmul = 0,
  reduce_add = 1,  ///< operands {in, out}; params {parts, count}: out[i] = sum_p in[p*count+i]
  bias_add = 2,    ///< operands {inout, bias}; params {rows, cols, relu}: inout[r,c] += bias[c]
  relu = 3,        ///< operands {inout}; params {count}
  add = 4,         ///< operands {a, b, out}; params {count}: out = a + b
  copy = 5,        ///< operands {in, out}; params {count}
  /// A reduction's epilogue fused in: operands {in, own, bias, out}; params {parts, rows, cols,
  /// own_stride, relu}: out[r,c] = act(sum_p in[(p*rows+r)*cols+c] + own[r*own_stride+c] + bias[c]),
  /// so the owner's own partial is read in place (strided) instead of copied.
  reduce_bias = 6,
  matmul_transposed = 7,  ///< operands {a, b, c}; params {m, k, n, orientation}: c[m,n] = a[m,k] * b[n,k]^T (as matmul)
  /// operands {a, b (half), c}; params {m, k, n, orientation}: c = half(a) * b, float32 sums; b is
  /// laid out as the orientation streams it: [k, n] as_is, [n, k] swapped (no transpose either way);
  /// c as matmul's.
  matmul_half = 8,
  bias_add_half = 9,  ///< operands {inout, bias (half)}; params {rows, cols, relu}
  softmax = 10,       ///< operands {in, out}; params {rows, cols, scale}: rows of softmax(scale * in)
  layer_norm = 11,    ///< operands {in, gamma, beta, out}; params {rows, cols, eps}
  unary = 12,         ///< operands {in, out}; params {count, function, exponent}: out = f(in) (UnaryFunction)
  binary = 13,        ///< operands {a, b, out}; params {count, function}: out = a op b (BinaryFunction)
  binary_row = 14,    ///< operands {inout, row}; params {rows, cols, function}: inout[r,c] = inout[r,c] op row[c]
  reduce_rows = 15,   ///< operands {in, out}; params {rows, cols, function}: out[r] = in[r,:] folded (ReduceFunction)
  /// operands {inout, column}; params {rows, cols, function}: inout[r,c] = inout[r,c] op column[r]
  binary_column = 16,
  transpose = 17,  ///< operands {in, out}; params {rows, cols}: out[c,r] = in[r,c] (out is [cols, rows])
  /// operands {in, weights, bias, out}; params ConvParam: a convolution of a patch of one image
  /// (in [in_rows, in_width, in_channels], a pixel's channels contiguous) by weights [kernel_h,
  /// kernel_w, group_in_channels, out_channels] into out [out_rows, out_width, out_channels], plus
  /// the bias [out_channels] (flag has_bias), then ReLU (flag relu). Output channel j reads the
  /// patch channels of its group: ((j + first_out_channel) / group_out_channels) * group_in_channels
  /// onwards. Kernel positions outside the patch read zeros (padding).
  conv = 18,
  /// operands {in, out}; params PoolParam: max or average (mode) of a patch as conv reads it,
  /// each channel on its own: out [out_rows, out_width, channels].
  pool = 19,
  clip = 20,  ///< operands {in, out}; params {count, low, high} (floats): out = min(max(in, low), high)
  /// operands {in, out}; params {count, from, to} (DType values: float32, int32 or bool): out = in
  /// converted (float to int32 truncates toward zero, saturating; NaN gives 0; anything nonzero is true).
  cast = 21,
  /// operands {condition (bool), a, b, out}; params {count}: out = condition ? a : b, word for word.
  select = 22,
  /// operands {table, indices (int32), out}; params {rows, cols, count, row_begin, table_rows}: the
  /// tile holds rows [row_begin, row_begin + rows) of a table of table_rows rows, `cols` of its
  /// columns (table [rows, cols], 32-bit words of any type, copied as they are); for t < count,
  /// index i = indices[t] (i + table_rows when negative, as ONNX Gather counts from the end) gives
  /// out[t, :] = table[i - row_begin, :] when the tile holds row i, else zero words (out [count,
  /// cols]): a sum over the tiles that split the rows is the lookup, and an index outside
  /// [-table_rows, table_rows) reads zeros (poplibs' MultiSlice, which skips it).
  multi_slice = 23,
};
inline constexpr std::uint32_t kCodeletCount = 24;

/// Param indices of a conv call. Patch row of output row r and kernel row i: r * stride_h +
/// i * dilation_h - top (top and left are signed: int32 bit patterns); patch column of output column c and kernel
/// column j: c * stride_w + j * dilation_w - left.
enum ConvParam : std::uint32_t {
  kConvOutRows,
  kConvOutWidth,
  kConvInRows,
  kConvInWidth,
  kConvInChannels,
  kConvOutChannels,
  kConvKernelH,
  kConvKernelW,
  kConvStrideH,
  kConvStrideW,
  kConvDilationH,
  kConvDilationW,
  kConvTop,
  kConvLeft,
  kConvGroupInChannels,
  kConvGroupOutChannels,
  kConvFirstOutChannel,
  kConvFlags,
  kConvParams
};
/// Param indices of a pool call: the first fourteen of conv's meanings, without the groups.
enum PoolParam : std::uint32_t {
  kPoolOutRows,
  kPoolOutWidth,
  kPoolInRows,
  kPoolInWidth,
  kPoolChannels,
  kPoolKernelH,
  kPoolKernelW,
  kPoolStrideH,
  kPoolStrideW,
  kPoolDilationH,
  kPoolDilationW,
  kPoolTop,
  kPoolLeft,
  kPoolMode,
  kPoolParams
};
/// Bits of a conv call's flags param.
inline constexpr std::uint32_t kConvRelu = 1, kConvHasBias = 2;
/// A pool call's mode param.
enum class PoolMode : std::uint32_t { max = 0, average = 1, average_with_padding = 2 };
inline constexpr std::uint32_t kPoolModeCount = 3;
/// What makes a conv or pool call's params unusable (zero strides, a group that reaches past the
/// patch's channels, an unknown mode): "" when they are sound; other codelets always are.
std::string window_params_problem(Codelet, std::span<const std::uint32_t> params);

/// The `function` param of a unary call. Its float `parameter` param is pow's exponent and
/// elu's, celu's and thresholded_relu's alpha (ONNX's definitions); the others ignore it.
enum class UnaryFunction : std::uint32_t {
  sigmoid = 0,
  tanh = 1,
  erf = 2,
  sqrt = 3,
  pow = 4,
  exp = 5,
  log = 6,
  neg = 7,
  abs = 8,
  reciprocal = 9,
  floor = 10,
  ceil = 11,
  round = 12,  ///< to nearest, ties to even (ONNX Round)
  sign = 13,
  sin = 14,
  cos = 15,
  softplus = 16,          ///< log(1 + exp(x))
  softsign = 17,          ///< x / (1 + |x|)
  elu = 18,               ///< x > 0 ? x : alpha * (exp(x) - 1)
  celu = 19,              ///< max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
  thresholded_relu = 20,  ///< x > alpha ? x : 0
  mish = 21,              ///< x * tanh(softplus(x))
  logical_not = 22,       ///< bools: !x
  tan = 23,
  asin = 24,
  acos = 25,
  atan = 26,
  sinh = 27,
  cosh = 28,
  asinh = 29,
  acosh = 30,
  atanh = 31,
  is_inf = 32,  ///< a bool: x is +inf (alpha's bit 1 set) or -inf (bit 2 set)
  is_nan = 33,  ///< a bool: x is NaN
};
inline constexpr std::uint32_t kUnaryFunctionCount = 34;
/// The `function` param of binary, binary_row and binary_column calls (the planner adds with
/// add and bias_add where it can: they are the same loops).
/// prelu: a < 0 ? a * b : a (b the slope).
/// Comparisons write bools; the int_ functions read int32 words (int_divide truncates toward zero,
/// by zero gives 0; int_add, int_subtract and int_multiply wrap); the logical ones read bools.
enum class BinaryFunction : std::uint32_t {
  subtract = 0,
  multiply = 1,
  divide = 2,
  add = 3,
  max = 4,
  min = 5,
  prelu = 6,
  equal = 7,
  less = 8,
  less_or_equal = 9,
  greater = 10,
  greater_or_equal = 11,
  int_add = 12,
  int_subtract = 13,
  int_multiply = 14,
  int_divide = 15,
  int_equal = 16,
  int_less = 17,
  int_less_or_equal = 18,
  int_greater = 19,
  int_greater_or_equal = 20,
  logical_and = 21,
  logical_or = 22,
  logical_xor = 23,
  int_max = 24,
  int_min = 25,
  power = 26,          ///< float pow(a, b)
  remainder = 27,      ///< float fmod(a, b): the sign of a's
  int_remainder = 28,  ///< a - trunc(a / b) * b: the sign of a's (0 when b is 0)
  int_modulo = 29,     ///< the remainder with the sign of b's, as Python's % (0 when b is 0)
};
inline constexpr std::uint32_t kBinaryFunctionCount = 30;
/// The `function` param of a reduce_rows call: what each row folds to (l1: the sum of
/// magnitudes; l2: the root of the sum of squares; log_sum_exp: log of the sum of exponentials).
enum class ReduceFunction : std::uint32_t {
  sum = 0,
  mean = 1,
  max = 2,
  min = 3,
  prod = 4,
  l1 = 5,
  l2 = 6,
  log_sum_exp = 7,
  sum_square = 8,
};
inline constexpr std::uint32_t kReduceFunctionCount = 9;
/// Index of the function param of unary, binary, binary_row and binary_column calls.
std::uint32_t function_param(Codelet);
/// Names for messages: "sigmoid", "multiply", ...
const char* unary_function_name(UnaryFunction);
const char* binary_function_name(BinaryFunction);
const char* reduce_function_name(ReduceFunction);
/// Unary functions poplibs' UnaryOp1D loops an element at a time (the others a pair at a time).
bool unary_loops_by_element(UnaryFunction);
/// Most operands and params any codelet takes.
inline constexpr std::uint32_t kMaxCodeletOperands = 4;
inline constexpr std::uint32_t kMaxCodeletParams = 18;
/// Index of a matmul's orientation param.
inline constexpr std::uint32_t kMatmulOrientationParam = 3;

/// Which operand a matmul streams through the AMP as its field (one row of outputs per field
/// element) and which it loads into the AMP as weights (poplibs' swapOperands). The numbers
/// are the same; the cycles are not, so the planner chooses (docs/targets.md).
enum class MatmulOrientation : std::uint32_t {
  as_is = 0,    ///< field = the m rows of a, AMP weights = b
  swapped = 1,  ///< field = the n columns of b, AMP weights = a (c left as c^T [n, m])
};
inline constexpr std::uint32_t kMatmulOrientations = 2;
bool is_matmul(Codelet);
/// A matmul call on the worker-MAC path (poplibs' horizontal MAC): the busiest worker's field
/// rows, the output columns each row loops over, and k cut into `input_groups` groups of equal
/// size (the last zero-padded), each output's dot product over a group taking
/// `group_dot_cycles` worker cycles (a 64-bit load of two floats or four halves a cycle where the
/// group divides into them; b's values one at a time when its k values are not contiguous: b
/// [k, n] with n > 1). The group size is the fastest for the call.
struct WorkerMacShape {
  std::uint64_t rows_per_worker = 0, outputs = 0, input_groups = 0, group_dot_cycles = 0;
};
WorkerMacShape worker_mac_shape(Codelet, std::span<const std::uint32_t> params, const Target&);

/// The simulator's exact charge for one call, how it was reached, and the two floors no
/// charge may go below: the call's MACs at the target's peak rate and the bytes of its input
/// operands at the target's load bandwidth.
struct CodeletCharge {
  std::uint64_t cycles = 0;
  std::uint64_t mac_floor = 0;
  std::uint64_t load_floor = 0;
  const char* path = "";         ///< "amp", "worker-mac", "workers" or "rows"
  std::uint64_t amp_passes = 0;  ///< weight loads into the AMP (the amp path only)
};

/// A float param's bit pattern, and back.
std::uint32_t float_param(float value);
float param_float(std::uint32_t bits);

const char* codelet_name(Codelet);
/// Number of operands and params a call of `codelet` must carry.
std::uint32_t codelet_operand_count(Codelet);
std::uint32_t codelet_param_count(Codelet);
/// Words each operand spans, given the params (for bounds checks). Saturates at the largest
/// uint64 instead of wrapping, so forged params cannot make a huge span look small.
std::uint64_t codelet_operand_words(Codelet, std::span<const std::uint32_t> params, std::uint32_t operand);
/// Whether `words` 32-bit words from byte `address` end at or before byte `limit`: exact for
/// any values (no wrap-around), so a forged size cannot pass a bounds check by overflowing.
constexpr bool words_fit(std::uint64_t address, std::uint64_t words, std::uint64_t limit) {
  return address <= limit && words <= (limit - address) / 4;
}
/// Cycles one call takes on one tile (the simulator charges exactly this).
std::uint64_t codelet_cycles(Codelet, std::span<const std::uint32_t> params, const Target&);
/// codelet_cycles with its floors and path (`tessera cycles` prints it).
CodeletCharge codelet_charge(Codelet, std::span<const std::uint32_t> params, const Target&);
/// Worker cycles per vector of two floats of a unary, binary or binary_row call's function
/// (poplibs' float inner loops; docs/targets.md); cost models share these facts.
std::uint64_t function_cycles_per_vector(Codelet, std::span<const std::uint32_t> params);
/// Tile memory the code of `codelet` takes, once per tile that runs it (docs/targets.md).
std::uint32_t codelet_code_bytes(Codelet);
/// A call's vertex state in tile memory: an 8-byte header, 4 bytes per operand address and param.
std::uint32_t vertex_state_bytes(Codelet);
/// Tile memory of one exchange descriptor: a send list entry, a receive list entry.
inline constexpr std::uint32_t kSendDescriptorBytes = 8, kReceiveDescriptorBytes = 12;

/// Whether a matmul call leaves c^T for a transpose call to lay out: swapped, with c more
/// than one row and one column (c^T of a row or a column is laid out as c already).
bool matmul_leaves_transpose(std::span<const std::uint32_t> params);
/// A product's cycles in an orientation: the matmul call's, and the transpose call's that lays
/// c^T out as c when it leaves one.
std::uint64_t matmul_product_cycles(Codelet, std::span<const std::uint32_t> params, const Target&);
/// The orientation in which a product of this shape takes fewer cycles (as_is on a tie).
MatmulOrientation faster_matmul_orientation(Codelet, std::uint32_t m, std::uint32_t k, std::uint32_t n, const Target&);
/// Whether a matmul call's workers transpose b first: its k values are not contiguous for the
/// field (matmul's b [k, n] swapped, matmul_transposed's b [n, k] as_is; matmul_half never).
bool matmul_transposes_b(Codelet, std::uint32_t orientation);
/// Whether a matmul call's b is stored [n, k] (matmul_transposed; matmul_half swapped).
bool matmul_b_is_n_by_k(Codelet, std::uint32_t orientation);
/// The codelet that multiplies by weights of `dtype` stored as `orientation` streams them
/// ([n, k] when swapped), so that no orientation pays a transpose of constant weights.
Codelet constant_weight_matmul(bool half_weights, MatmulOrientation);

}  // namespace tessera
