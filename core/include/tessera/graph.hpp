// The Graph IR: tensors and operations, loaded from a model YAML (configs/models/) or imported (frontends/).
#pragma once
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace tessera {

/// Element types on the device. int32 holds every ONNX integer type (the host range-checks
/// values on the way in); boolean is one 32-bit word per element, 0 or 1 (the exchange and the
/// host streams move whole words, so a block of bools cut anywhere stays whole: docs/targets.md).
enum class DType : std::uint8_t { float32 = 0, float16 = 1, int32 = 2, boolean = 3 };
inline constexpr std::uint32_t kDTypeCount = 4;
const char* dtype_name(DType);
/// int32 and boolean: values held as the bits of a 32-bit word, not as a float's value.
bool is_integer_word(DType);
/// The float whose bits are `value` (how host tensors and tile memory hold int32 and boolean
/// elements), and back.
inline float int_word(std::int32_t value) { return std::bit_cast<float>(value); }
inline std::int32_t word_int(float word) { return std::bit_cast<std::int32_t>(word); }
std::uint32_t dtype_bytes(DType);
/// 32-bit words `elements` values of `type` take packed in tile memory (float16: two a
/// word, the last word padded).
std::uint64_t packed_words(std::uint64_t elements, DType type);

/// IEEE 754 binary16 conversions: round to nearest even (overflow to infinity), and exact.
std::uint16_t float_to_half(float value);
float half_to_float(std::uint16_t bits);
/// `value` rounded to the nearest float16, as a float.
inline float round_to_half(float value) { return half_to_float(float_to_half(value)); }

enum class TensorKind : std::uint8_t {
  input = 0,         ///< streamed from the host at every run
  weight = 1,        ///< streamed from the host once, at initialize
  intermediate = 2,  ///< produced by an op
};

/// A place in a source file, for diagnostics. Line and column are 1-based; 0 = unknown.
struct SourcePlace {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

struct Tensor {
  std::string name;
  std::vector<std::int64_t> shape;  ///< row-major; rank 1 or 2
  DType dtype = DType::float32;
  TensorKind kind = TensorKind::intermediate;
  double init_scale = 1.0;  ///< inputs and weights: uniform in [-scale, scale]
  SourcePlace place;

  std::int64_t elements() const;
  std::int64_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  std::int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
};

/// How a binary op's second operand `b` meets its first `a`: the same shape, a row vector
/// [cols] (a value per column), a column [rows, 1] (a value per row), or none of them.
enum class Broadcast { same, row, column, none };
Broadcast binary_broadcast(const Tensor& a, const Tensor& b);

enum class OpKind : std::uint8_t {
  matmul = 0,          ///< out[m,n] = in0[m,k] * in1[k,n]
  add = 1,             ///< out = in0 + in1; in1 may be a row vector [n] broadcast over rows
  relu = 2,            ///< out = max(in0, 0)
  dense = 3,           ///< out = act(in0 * in1 + bias): made by lower-mid from matmul/add/relu
  softmax = 4,         ///< out[r,:] = softmax(scale * in0[r,:]) over each row
  layer_norm = 5,      ///< out[r,:] = (in0[r,:] - mean) / sqrt(var + eps) * gamma + beta; inputs {x, gamma, beta}
  sub = 6,             ///< out = in0 - in1; in1 may be a row vector [n] broadcast over rows (as add)
  mul = 7,             ///< out = in0 * in1; likewise
  div = 8,             ///< out = in0 / in1; likewise
  sigmoid = 9,         ///< out = 1 / (1 + exp(-in0))
  tanh = 10,           ///< out = tanh(in0)
  erf = 11,            ///< out = erf(in0)
  sqrt = 12,           ///< out = sqrt(in0)
  pow = 13,            ///< out = in0 ^ exponent (a constant)
  reduce_sum = 14,     ///< out[r] = sum of in0[r,:]: shape [rows, 1]
  reduce_mean = 15,    ///< out[r] = mean of in0[r,:]: shape [rows, 1]
  transpose = 16,      ///< out = in0^T: shape [cols, rows]; a batch transposes each row block
  split_heads = 17,    ///< [batch*S, heads*D] to [batch*heads*S, D]: out[(b*heads+h)*S+s, d] = in0[b*S+s, h*D+d]
  merge_heads = 18,    ///< the inverse: [batch*heads*S, D] to [batch*S, heads*D]
  slice_columns = 19,  ///< out[r, c] = in0[r, column_begin + c]: shape [rows, column_count]
  /// out = act(conv(in0, in1) + in2) over `window`: in0 [batch*H*W, C] (a row per pixel, NHWC), in1
  /// [KH*KW*C/groups, M] (rows in kernel row, kernel column, channel order), in2 [M] (optional),
  /// out [batch*OH*OW, M]; output channel m reads the channels of its group m / (M/groups).
  conv = 20,
  max_pool = 21,  ///< out[pixel, c] = max of in0 over the window (in0 and out laid out as conv's)
  avg_pool = 22,  ///< out[pixel, c] = mean of in0 over the window (padding counted if count_include_pad)
  clip = 23,      ///< out = min(max(in0, clip_low), clip_high) (ReLU6: 0, 6)
  /// out = f(in0) for the UnaryFunction `function` (codelets.hpp) from exp on (the functions
  /// before it have op kinds of their own), with `alpha` where ONNX's function takes one
  unary = 24,
  max = 25,    ///< out = max(in0, in1), broadcast as add
  min = 26,    ///< out = min(in0, in1), likewise
  prelu = 27,  ///< out = in0 < 0 ? in0 * in1 : in0 (in1 the slope), likewise
  /// out[r] = in0[r,:] folded by the ReduceFunction `function` (codelets.hpp) from max on (sum
  /// and mean are reduce_sum and reduce_mean): shape [rows, 1]
  reduce = 28,
  /// out (shape gather_shape) = elements of the inputs picked by gather_runs, each output element
  /// by exactly one run: Concat, Split, Slice, Pad, Transpose, Tile, DepthToSpace... as one op.
  gather = 29,
  // Typed ops (tensor types): comparisons give booleans; operands as add's (same, row, column).
  equal = 30,             ///< out = in0 == in1 (float32, int32 or boolean operands of one type)
  less = 31,              ///< out = in0 < in1
  less_or_equal = 32,     ///< out = in0 <= in1
  greater = 33,           ///< out = in0 > in1
  greater_or_equal = 34,  ///< out = in0 >= in1
  logical_and = 35,       ///< out = in0 && in1 (booleans)
  logical_or = 36,        ///< out = in0 || in1
  logical_xor = 37,       ///< out = in0 != in1
  logical_not = 38,       ///< out = !in0 (boolean)
  cast = 39,              ///< out = in0 converted to the output tensor's type (ONNX Cast: float to int truncates)
  where = 40,             ///< out = in0 ? in1 : in2 (in0 boolean; in1, in2 and out of one type and shape)
  power = 41,             ///< out = in0 ^ in1 (float32), broadcast as add
  mod = 42,               ///< out = in0 mod in1, the sign of in1's (int32; ONNX Mod), likewise
  fmod = 43,              ///< out = in0 mod in1, the sign of in0's (float32 or int32; ONNX Mod fmod=1), likewise
  /// out[t, :] = in0[in1[t], :]: in0 a table [V, D] of 32-bit words (float32, int32 or bool; a weight,
  /// an input or computed), in1 int32 indices of any shape read row-major (T of them), out [T, D]. An index i < 0 reads
  /// row i + V (ONNX Gather); one outside [-V, V) reads a row of zeros (the host refuses such ids in a graph input,
  /// docs/onnx.md).
  embedding = 44,
};
inline constexpr std::uint32_t kOpKindCount = 45;
const char* op_kind_name(OpKind);
/// add, sub, mul, div, max, min, prelu, power, mod, fmod and the comparisons and logic (equal ...
/// logical_xor): two operands, the second equal-shaped, a row vector or a column.
bool is_binary(OpKind);
/// equal, less, less_or_equal, greater, greater_or_equal: booleans from two operands of one type.
bool is_comparison(OpKind);
/// relu, sigmoid, tanh, erf, sqrt, pow, clip, unary, logical_not, cast: one operand, elementwise.
bool is_unary(OpKind);
/// reduce_sum, reduce_mean, reduce: each row to one value.
bool is_row_reduction(OpKind);
/// transpose, split_heads, merge_heads, slice_columns: data moved, nothing computed.
bool is_relayout(OpKind);
/// conv, max_pool, avg_pool: a window slid over feature maps.
bool is_window(OpKind);

/// A gather op's affine run: for k < repeat and i < length, output element (row-major)
/// output_begin + k * output_step + i takes element input_begin + k * input_step + i * input_stride
/// of op input `input` (row-major). Strides may be negative (a reversed slice) or 0 (a broadcast).
struct GatherRun {
  std::uint64_t output_begin = 0;
  std::uint32_t input = 0;  ///< an index into the op's inputs
  std::int64_t input_begin = 0;
  std::uint64_t length = 0;
  std::int64_t input_stride = 1;
  std::uint64_t repeat = 1;
  std::uint64_t output_step = 0;
  std::int64_t input_step = 0;
  bool operator==(const GatherRun&) const = default;
};
/// A run as the flat list of numbers files store (signed fields as two's complement), and back.
inline constexpr std::size_t kGatherRunFields = 8;
std::array<std::uint64_t, kGatherRunFields> gather_run_fields(const GatherRun&);
GatherRun gather_run_from_fields(std::span<const std::uint64_t, kGatherRunFields>);
/// Calls `visit(output_index, input, input_index)` for every element of `op`'s runs, run by run.
template <typename Visit>
void for_each_gathered(const std::vector<GatherRun>& runs, Visit&& visit) {
  for (const GatherRun& run : runs)
    for (std::uint64_t k = 0; k < run.repeat; ++k)
      for (std::uint64_t i = 0; i < run.length; ++i)
        visit(run.output_begin + k * run.output_step + i, run.input,
              run.input_begin + static_cast<std::int64_t>(k) * run.input_step +
                  static_cast<std::int64_t>(i) * run.input_stride);
}

/// Where a window op's kernel goes over the feature maps of its `batch` images: the input
/// field, the kernel, strides, dilations and zero padding on each side.
struct Window {
  std::uint32_t height = 1, width = 1;  ///< the input field
  std::uint32_t kernel_h = 1, kernel_w = 1;
  std::uint32_t stride_h = 1, stride_w = 1;
  std::uint32_t dilation_h = 1, dilation_w = 1;
  std::uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::uint32_t groups = 1;        ///< conv only: channel groups (depthwise: one per channel)
  bool count_include_pad = false;  ///< avg_pool only: divide by the whole kernel, padding included
  /// The output field; 0 when the kernel does not fit the padded input.
  std::int64_t out_height() const;
  std::int64_t out_width() const;
  std::int64_t kernel_positions() const { return std::int64_t{kernel_h} * kernel_w; }
  bool operator==(const Window&) const = default;
};
/// A window as the flat list of numbers files store, in the order of its fields, and back.
inline constexpr std::size_t kWindowFields = 14;
std::array<std::uint32_t, kWindowFields> window_fields(const Window&);
Window window_from_fields(std::span<const std::uint32_t, kWindowFields>);

struct Op {
  OpKind kind = OpKind::matmul;
  std::vector<std::uint32_t> inputs;  ///< tensor indices; dense: {x, w} or {x, w, bias}
  std::uint32_t output = 0;
  bool relu = false;  ///< dense only: apply ReLU in the epilogue
  SourcePlace place;
  bool transpose_b = false;  ///< matmul only: out = in0 * in1^T (in1 is [n, k])
  /// matmul: `batch` products stacked by rows: in0 [batch*m, k], in1 [batch*k, n] (or
  /// [batch*n, k] with transpose_b), out [batch*m, n]; product i takes the i-th row block of each.
  /// transpose: in0 [batch*r, c] to [batch*c, r]. split_heads, merge_heads: the leading dim B.
  std::uint32_t batch = 1;
  std::uint32_t heads = 1;                           ///< split_heads, merge_heads only: the heads H
  std::uint32_t column_begin = 0, column_count = 0;  ///< slice_columns only: the columns it keeps
  double scale = 1.0;                                ///< softmax only: multiplies the row before the softmax
  double epsilon = 1e-5;                             ///< layer_norm only: added to the variance
  double exponent = 1.0;                             ///< pow only: the constant exponent
  Window window;                                     ///< conv, max_pool, avg_pool only (batch: the images)
  /// clip only: the bounds (infinite where ONNX's Clip leaves one out).
  double clip_low = -std::numeric_limits<double>::infinity(), clip_high = std::numeric_limits<double>::infinity();
  std::uint32_t function = 0;  ///< unary: a UnaryFunction; reduce: a ReduceFunction
  double alpha = 0.0;          ///< unary elu, celu, thresholded_relu only: ONNX's alpha
  /// gather only: the output's shape and its runs, which together write every output element once.
  std::vector<std::int64_t> gather_shape;
  std::vector<GatherRun> gather_runs;
};

struct Graph {
  std::string name;
  std::string source_file;
  /// sha256 of an imported model file (ONNX), whose weights a run reads back from it; empty
  /// for YAML models, whose weights come from `seed`.
  std::string source_sha256;
  /// How an imported model was fixed at compile time, as the options said it
  /// ("--input-shape NAME=DIMS", "--input-value NAME=VALUES"): a run imports it again the same way.
  std::vector<std::string> import_options;
  std::uint64_t seed = 0;
  std::vector<Tensor> tensors;
  std::vector<Op> ops;                 ///< in execution order
  std::vector<std::uint32_t> outputs;  ///< tensor indices the host reads back

  /// Index of the tensor called `name`, or -1.
  std::int64_t find_tensor(const std::string& name) const;
};

/// Loads a model YAML; checks names, shapes and dtypes. Throws Error with file:line:column.
Graph load_model(const std::string& path);

/// The deterministic initial value of element `index` of an input or weight tensor.
float initial_value(const Graph& graph, const Tensor& tensor, std::uint64_t index);

/// Whether input `slot` of `op` may be a float16 tensor: a matmul's right operand without
/// transpose_b, or a bias row vector (nothing else reads halves).
bool may_be_float16(const Graph& graph, const Op& op, std::size_t slot);

/// Stores as float16 every float32 weight that only ops reading halves read (may_be_float16):
/// matmul weights and biases, as IPU users run them; products still accumulate in float32.
/// Returns how many weights it changed and the bytes that saves.
struct Float16Storage {
  std::size_t weights = 0;
  std::uint64_t bytes_saved = 0;
};
Float16Storage store_weights_in_float16(Graph& graph);

/// Infers the output shape of `op` from its inputs; returns an error message or "".
std::string infer_shape(const Graph& graph, const Op& op, std::vector<std::int64_t>& shape);
/// Infers the element type of `op`'s output from its inputs' (cast: `dtype` holds the target on
/// entry); returns a message naming the operand whose type the op does not take, or "".
std::string infer_dtype(const Graph& graph, const Op& op, DType& dtype);

/// The first inconsistency of a graph read back from a file: a tensor of rank other than 1 or
/// 2 or a size not positive, an op or output naming a tensor that does not exist, an op whose
/// output shape or type is not what its inputs give. "" when the graph is consistent.
std::string check_graph(const Graph& graph);

}  // namespace tessera
