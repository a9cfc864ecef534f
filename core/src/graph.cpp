// The Graph IR: loading a model YAML, shape inference, deterministic initial values.
#include "tessera/graph.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <tuple>
#include <unordered_map>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/strict_yaml.hpp"

namespace tessera {

const char* dtype_name(DType type) {
  switch (type) {
    case DType::float32:
      return "float32";
    case DType::float16:
      return "float16";
    case DType::int32:
      return "int32";
    case DType::boolean:
      return "bool";
  }
  return "?";
}
std::uint32_t dtype_bytes(DType type) { return type == DType::float16 ? 2 : 4; }
bool is_integer_word(DType type) { return type == DType::int32 || type == DType::boolean; }

std::uint64_t packed_words(std::uint64_t elements, DType type) {
  return type == DType::float16 ? (elements + 1) / 2 : elements;
}

std::uint16_t float_to_half(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t exponent = (bits >> 23) & 0xffu;
  std::uint32_t mantissa = bits & 0x7fffffu;
  if (exponent == 0xff)  // infinity stays infinity; NaN stays a (quiet) NaN
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa != 0 ? 0x200u : 0u));
  const int unbiased = static_cast<int>(exponent) - 127;
  if (unbiased > 15) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow
  // Normal halves keep 10 mantissa bits; subnormal ones fewer. Shift with round to nearest even.
  int shift = 13;
  std::uint32_t half_exponent = 0;
  if (unbiased >= -14) {
    half_exponent = static_cast<std::uint32_t>(unbiased + 15);
  } else {
    if (unbiased < -25) return sign;  // below half the smallest subnormal: rounds to zero
    mantissa |= 0x800000u;            // the implicit bit becomes explicit
    shift = 13 + (-14 - unbiased);
  }
  std::uint32_t result = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (result & 1u))) ++result;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  return static_cast<std::uint16_t>(sign + ((half_exponent << 10) + result));
}

float half_to_float(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  std::uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else {
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal or zero
    return sign != 0 ? -magnitude : magnitude;
  }
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::matmul:
      return "matmul";
    case OpKind::add:
      return "add";
    case OpKind::relu:
      return "relu";
    case OpKind::dense:
      return "dense";
    case OpKind::softmax:
      return "softmax";
    case OpKind::layer_norm:
      return "layer_norm";
    case OpKind::sub:
      return "sub";
    case OpKind::mul:
      return "mul";
    case OpKind::div:
      return "div";
    case OpKind::sigmoid:
      return "sigmoid";
    case OpKind::tanh:
      return "tanh";
    case OpKind::erf:
      return "erf";
    case OpKind::sqrt:
      return "sqrt";
    case OpKind::pow:
      return "pow";
    case OpKind::reduce_sum:
      return "reduce_sum";
    case OpKind::reduce_mean:
      return "reduce_mean";
    case OpKind::transpose:
      return "transpose";
    case OpKind::split_heads:
      return "split_heads";
    case OpKind::merge_heads:
      return "merge_heads";
    case OpKind::slice_columns:
      return "slice_columns";
    case OpKind::conv:
      return "conv";
    case OpKind::max_pool:
      return "max_pool";
    case OpKind::avg_pool:
      return "avg_pool";
    case OpKind::clip:
      return "clip";
    case OpKind::unary:
      return "unary";
    case OpKind::max:
      return "max";
    case OpKind::min:
      return "min";
    case OpKind::prelu:
      return "prelu";
    case OpKind::reduce:
      return "reduce";
    case OpKind::gather:
      return "gather";
    case OpKind::equal:
      return "equal";
    case OpKind::less:
      return "less";
    case OpKind::less_or_equal:
      return "less_or_equal";
    case OpKind::greater:
      return "greater";
    case OpKind::greater_or_equal:
      return "greater_or_equal";
    case OpKind::logical_and:
      return "logical_and";
    case OpKind::logical_or:
      return "logical_or";
    case OpKind::logical_xor:
      return "logical_xor";
    case OpKind::logical_not:
      return "logical_not";
    case OpKind::cast:
      return "cast";
    case OpKind::where:
      return "where";
    case OpKind::power:
      return "power";
    case OpKind::mod:
      return "mod";
    case OpKind::fmod:
      return "fmod";
    case OpKind::embedding:
      return "embedding";
  }
  return "?";
}

Broadcast binary_broadcast(const Tensor& a, const Tensor& b) {
  if (a.shape == b.shape) return Broadcast::same;
  if (b.shape.size() == 1 && !a.shape.empty() && a.shape.back() == b.shape[0]) return Broadcast::row;
  if (a.shape.size() == 2 && b.shape.size() == 2 && b.shape[0] == a.shape[0] && b.shape[1] == 1)
    return Broadcast::column;
  return Broadcast::none;
}

bool is_binary(OpKind kind) {
  return kind == OpKind::add || kind == OpKind::sub || kind == OpKind::mul || kind == OpKind::div ||
         kind == OpKind::max || kind == OpKind::min || kind == OpKind::prelu || kind == OpKind::power ||
         kind == OpKind::mod || kind == OpKind::fmod || is_comparison(kind) || kind == OpKind::logical_and ||
         kind == OpKind::logical_or || kind == OpKind::logical_xor;
}

bool is_comparison(OpKind kind) {
  return kind == OpKind::equal || kind == OpKind::less || kind == OpKind::less_or_equal || kind == OpKind::greater ||
         kind == OpKind::greater_or_equal;
}

bool is_unary(OpKind kind) {
  return kind == OpKind::relu || kind == OpKind::sigmoid || kind == OpKind::tanh || kind == OpKind::erf ||
         kind == OpKind::sqrt || kind == OpKind::pow || kind == OpKind::clip || kind == OpKind::unary ||
         kind == OpKind::logical_not || kind == OpKind::cast;
}

bool is_row_reduction(OpKind kind) {
  return kind == OpKind::reduce_sum || kind == OpKind::reduce_mean || kind == OpKind::reduce;
}

bool is_relayout(OpKind kind) {
  return kind == OpKind::transpose || kind == OpKind::split_heads || kind == OpKind::merge_heads ||
         kind == OpKind::slice_columns;
}

bool is_window(OpKind kind) { return kind == OpKind::conv || kind == OpKind::max_pool || kind == OpKind::avg_pool; }

static std::int64_t window_out(std::int64_t in, std::int64_t pad, std::int64_t kernel, std::int64_t stride,
                               std::int64_t dilation) {
  const std::int64_t span = (kernel - 1) * dilation + 1;
  if (stride <= 0 || kernel <= 0 || dilation <= 0 || in + pad < span) return 0;
  return (in + pad - span) / stride + 1;
}

std::int64_t Window::out_height() const {
  return window_out(height, std::int64_t{pad_top} + pad_bottom, kernel_h, stride_h, dilation_h);
}

std::int64_t Window::out_width() const {
  return window_out(width, std::int64_t{pad_left} + pad_right, kernel_w, stride_w, dilation_w);
}

std::array<std::uint32_t, kWindowFields> window_fields(const Window& w) {
  return {w.height,     w.width,   w.kernel_h, w.kernel_w,   w.stride_h,  w.stride_w, w.dilation_h,
          w.dilation_w, w.pad_top, w.pad_left, w.pad_bottom, w.pad_right, w.groups,   w.count_include_pad ? 1u : 0u};
}

Window window_from_fields(std::span<const std::uint32_t, kWindowFields> f) {
  Window w;
  std::tie(w.height, w.width, w.kernel_h, w.kernel_w, w.stride_h, w.stride_w, w.dilation_h) =
      std::tuple{f[0], f[1], f[2], f[3], f[4], f[5], f[6]};
  std::tie(w.dilation_w, w.pad_top, w.pad_left, w.pad_bottom, w.pad_right, w.groups) =
      std::tuple{f[7], f[8], f[9], f[10], f[11], f[12]};
  w.count_include_pad = f[13] != 0;
  return w;
}

std::array<std::uint64_t, kGatherRunFields> gather_run_fields(const GatherRun& run) {
  return {run.output_begin,
          run.input,
          static_cast<std::uint64_t>(run.input_begin),
          run.length,
          static_cast<std::uint64_t>(run.input_stride),
          run.repeat,
          run.output_step,
          static_cast<std::uint64_t>(run.input_step)};
}

GatherRun gather_run_from_fields(std::span<const std::uint64_t, kGatherRunFields> f) {
  GatherRun run;
  run.output_begin = f[0];
  // An input slot past 32 bits is out of range either way; saturating keeps it so for the check.
  run.input = f[1] > std::numeric_limits<std::uint32_t>::max() ? std::numeric_limits<std::uint32_t>::max()
                                                               : static_cast<std::uint32_t>(f[1]);
  run.input_begin = static_cast<std::int64_t>(f[2]);
  run.length = f[3];
  run.input_stride = static_cast<std::int64_t>(f[4]);
  run.repeat = f[5];
  run.output_step = f[6];
  run.input_step = static_cast<std::int64_t>(f[7]);
  return run;
}

static std::string shape_text(const std::vector<std::int64_t>& shape);

/// gather: the shape, then every run inside the output and its input, no output element twice.
/// Runs come from files: sizes are checked before anything is allocated or walked.
static std::string infer_gather_shape(const Graph& graph, const Op& op, std::vector<std::int64_t>& shape) {
  if (op.inputs.empty()) return "gather takes at least 1 input, got 0";
  for (std::uint32_t input : op.inputs)  // words moved: one 32-bit type
    if (const DType dtype = graph.tensors.at(input).dtype;
        dtype == DType::float16 || dtype != graph.tensors.at(op.inputs[0]).dtype)
      return fmt::format("gather reads 32-bit tensors of one type; '{}' is {}", graph.tensors.at(input).name,
                         dtype_name(dtype));
  if (op.gather_shape.empty() || op.gather_shape.size() > 2)
    return fmt::format("gather's output shape {} must have rank 1 or 2", shape_text(op.gather_shape));
  __int128 elements = 1;
  for (std::int64_t d : op.gather_shape) {
    if (d <= 0 || d > (std::int64_t{1} << 31))
      return fmt::format("gather's output shape {} must have sizes in 1..2^31", shape_text(op.gather_shape));
    elements *= d;
  }
  if (elements > (std::int64_t{1} << 31))
    return fmt::format("gather's output {} has more than 2^31 elements", shape_text(op.gather_shape));
  unsigned __int128 written = 0;
  for (std::size_t i = 0; i < op.gather_runs.size(); ++i) {
    const GatherRun& run = op.gather_runs[i];
    if (run.input >= op.inputs.size())
      return fmt::format("gather run {} reads input {} of {}", i, run.input, op.inputs.size());
    if (run.length == 0 || run.repeat == 0)
      return fmt::format("gather run {} is empty (length and repeat must be positive)", i);
    // Counted first: with repeat and length bounded by the output, the products below cannot overflow.
    written += static_cast<unsigned __int128>(run.repeat) * run.length;
    if (written > static_cast<unsigned __int128>(elements))
      return "gather runs write more elements than the output has";
    if (run.repeat > 1 && run.output_step < run.length)
      return fmt::format("gather run {}: its repeats overlap (output_step {} below length {})", i, run.output_step,
                         run.length);
    const unsigned __int128 last_out = static_cast<unsigned __int128>(run.output_begin) +
                                       static_cast<unsigned __int128>(run.repeat - 1) * run.output_step + run.length;
    if (last_out > static_cast<unsigned __int128>(elements))
      return fmt::format("gather run {} writes past the {} output elements", i, static_cast<std::int64_t>(elements));
    const __int128 in_elements = graph.tensors.at(op.inputs[run.input]).elements();
    __int128 low = run.input_begin, high = run.input_begin;
    for (const __int128 move : {static_cast<__int128>(run.repeat - 1) * run.input_step,
                                static_cast<__int128>(run.length - 1) * run.input_stride})
      (move < 0 ? low : high) += move;
    if (low < 0 || high >= in_elements)
      return fmt::format("gather run {} reads outside input '{}' of {} elements", i,
                         graph.tensors.at(op.inputs[run.input]).name, static_cast<std::int64_t>(in_elements));
  }
  if (written != static_cast<unsigned __int128>(elements))
    return fmt::format("gather runs write {} of the {} output elements (they must write every one once)",
                       static_cast<std::uint64_t>(written), static_cast<std::int64_t>(elements));
  std::vector<bool> seen(static_cast<std::size_t>(elements), false);
  std::string overlap;
  for_each_gathered(op.gather_runs, [&](std::uint64_t out, std::uint32_t, std::int64_t) {
    if (seen[out] && overlap.empty()) overlap = fmt::format("gather runs write output element {} twice", out);
    seen[out] = true;
  });
  if (!overlap.empty()) return overlap;
  shape = op.gather_shape;
  return "";
}

std::int64_t Tensor::elements() const {
  std::int64_t count = 1;
  for (auto d : shape) count *= d;
  return count;
}

std::int64_t Graph::find_tensor(const std::string& tensor_name) const {
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == tensor_name) return static_cast<std::int64_t>(i);
  return -1;
}

static std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string check_graph(const Graph& graph) {
  for (const Tensor& t : graph.tensors) {
    if (t.shape.empty() || t.shape.size() > 2) return "tensor '" + t.name + "': rank must be 1 or 2";
    for (std::int64_t d : t.shape)
      if (d <= 0) return "tensor '" + t.name + "': sizes must be positive";
  }
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const Op& op = graph.ops[i];
    for (std::uint32_t input : op.inputs)
      if (input >= graph.tensors.size()) return fmt::format("op {}: input {} is not a tensor", i, input);
    if (op.output >= graph.tensors.size()) return fmt::format("op {}: output {} is not a tensor", i, op.output);
    // A gather's runs are walked element by element: its shape is held to its output tensor's
    // (bounded by the tensor checks of whoever read the graph) before they are.
    if (op.kind == OpKind::gather && op.gather_shape != graph.tensors[op.output].shape)
      return fmt::format("op {}: gather shape {} differs from its output '{}' {}", i, shape_text(op.gather_shape),
                         graph.tensors[op.output].name, shape_text(graph.tensors[op.output].shape));
    std::vector<std::int64_t> shape;
    if (std::string problem = infer_shape(graph, op, shape); !problem.empty())
      return fmt::format("op {}: {}", i, problem);
    if (shape != graph.tensors[op.output].shape)
      return fmt::format("op {}: output '{}' does not have the shape its inputs give", i,
                         graph.tensors[op.output].name);
    DType dtype = graph.tensors[op.output].dtype;
    if (std::string problem = infer_dtype(graph, op, dtype); !problem.empty())
      return fmt::format("op {}: {}", i, problem);
    if (dtype != graph.tensors[op.output].dtype)
      return fmt::format("op {}: output '{}' is {}, but its inputs give {}", i, graph.tensors[op.output].name,
                         dtype_name(graph.tensors[op.output].dtype), dtype_name(dtype));
  }
  for (std::uint32_t output : graph.outputs)
    if (output >= graph.tensors.size()) return fmt::format("graph output {} is not a tensor", output);
  return "";
}

/// conv, max_pool, avg_pool: the feature maps, the window, and (conv) the weights and bias.
static std::string infer_window_shape(const Graph& graph, const Op& op, std::vector<std::int64_t>& shape) {
  const bool conv = op.kind == OpKind::conv;
  const std::size_t low = conv ? 2 : 1, high = conv ? 3 : 1;
  if (op.inputs.size() < low || op.inputs.size() > high)
    return fmt::format("{} takes {} inputs, got {}", op_kind_name(op.kind),
                       low == high ? fmt::format("{}", low) : fmt::format("{} to {}", low, high), op.inputs.size());
  const Window& w = op.window;
  const auto values = {w.height,   w.width,      w.kernel_h,   w.kernel_w, w.stride_h,
                       w.stride_w, w.dilation_h, w.dilation_w, w.groups};
  for (std::uint32_t v : values)
    if (v == 0 || v > (1u << 24))
      return fmt::format("{}: the field, kernel, strides, dilations and groups must be in 1..{}", op_kind_name(op.kind),
                         1u << 24);
  if (w.pad_top > (1u << 24) || w.pad_left > (1u << 24) || w.pad_bottom > (1u << 24) || w.pad_right > (1u << 24))
    return fmt::format("{}: padding must be at most {}", op_kind_name(op.kind), 1u << 24);
  if (!conv && w.groups != 1) return fmt::format("{} does not take groups", op_kind_name(op.kind));
  if (op.kind != OpKind::avg_pool && w.count_include_pad)
    return fmt::format("{} does not take count_include_pad", op_kind_name(op.kind));
  const std::int64_t out_h = w.out_height(), out_w = w.out_width();
  if (out_h <= 0 || out_w <= 0)
    return fmt::format("{}: a {}x{} kernel (dilation {}x{}) does not fit the {}x{} field padded by {} {} {} {}",
                       op_kind_name(op.kind), w.kernel_h, w.kernel_w, w.dilation_h, w.dilation_w, w.height, w.width,
                       w.pad_top, w.pad_left, w.pad_bottom, w.pad_right);
  const Tensor& x = graph.tensors.at(op.inputs[0]);
  // Sizes from a file may be anything: products are formed wide and refused past int64.
  constexpr unsigned __int128 kLargest = std::numeric_limits<std::int64_t>::max();
  const unsigned __int128 wide_pixels = static_cast<unsigned __int128>(op.batch) * w.height * w.width;
  const unsigned __int128 wide_out =
      static_cast<unsigned __int128>(op.batch) * static_cast<std::uint64_t>(out_h) * static_cast<std::uint64_t>(out_w);
  if (wide_pixels > kLargest || wide_out > kLargest)
    return fmt::format("{} of {} images of {}x{}: too many pixels", op_kind_name(op.kind), op.batch, w.height, w.width);
  const auto pixels = static_cast<std::int64_t>(wide_pixels);
  if (x.shape.size() != 2 || x.shape[0] != pixels)
    return fmt::format("{} of {} images of {}x{} needs feature maps [{}, channels] (a row per pixel), got '{}' {}",
                       op_kind_name(op.kind), op.batch, w.height, w.width, pixels, x.name, shape_text(x.shape));
  const std::int64_t channels = x.shape[1], out_pixels = static_cast<std::int64_t>(wide_out);
  if (!conv) {
    shape = {out_pixels, channels};
    return "";
  }
  const Tensor& weights = graph.tensors.at(op.inputs[1]);
  if (channels % w.groups != 0)
    return fmt::format("conv of {} groups needs channels in as many equal groups, got '{}' {}", w.groups, x.name,
                       shape_text(x.shape));
  const unsigned __int128 wide_depth =
      static_cast<unsigned __int128>(w.kernel_positions()) * static_cast<std::uint64_t>(channels / w.groups);
  if (wide_depth > kLargest) return fmt::format("conv of a {}x{} kernel: too many weights", w.kernel_h, w.kernel_w);
  const auto depth = static_cast<std::int64_t>(wide_depth);
  if (weights.shape.size() != 2 || weights.shape[0] != depth || weights.shape[1] % w.groups != 0)
    return fmt::format(
        "conv weights '{}' {} must be [{}, M] ({}x{} kernel x {} channels a group) with M a multiple of "
        "{} groups",
        weights.name, shape_text(weights.shape), depth, w.kernel_h, w.kernel_w, channels / w.groups, w.groups);
  if (op.inputs.size() == 3) {
    const Tensor& bias = graph.tensors.at(op.inputs[2]);
    if (bias.shape.size() != 1 || bias.shape[0] != weights.shape[1])
      return fmt::format("conv bias '{}' {} must be [{}]", bias.name, shape_text(bias.shape), weights.shape[1]);
  }
  shape = {out_pixels, weights.shape[1]};
  return "";
}

/// The unary functions the `unary` op carries: exp to mish and tan on (the others, logical_not
/// among them, have op kinds of their own).
static bool is_unary_op_function(std::uint32_t function) {
  return (function >= static_cast<std::uint32_t>(UnaryFunction::exp) &&
          function <= static_cast<std::uint32_t>(UnaryFunction::mish)) ||
         (function >= static_cast<std::uint32_t>(UnaryFunction::tan) && function < kUnaryFunctionCount);
}

/// What is wrong with an op's function and alpha: a unary or reduce function outside the ones
/// those kinds carry (the others have kinds of their own), a function or alpha on another kind.
static std::string function_problem(const Op& op) {
  const auto first_reduce = static_cast<std::uint32_t>(ReduceFunction::max);
  if (op.kind == OpKind::unary && !is_unary_op_function(op.function))
    return fmt::format(
        "unary needs a function from exp to mish or from tan on (unary function {} to {}, {} to {}), "
        "got {}",
        static_cast<std::uint32_t>(UnaryFunction::exp), static_cast<std::uint32_t>(UnaryFunction::mish),
        static_cast<std::uint32_t>(UnaryFunction::tan), kUnaryFunctionCount - 1, op.function);
  if (op.kind == OpKind::reduce && (op.function < first_reduce || op.function >= kReduceFunctionCount))
    return fmt::format("reduce needs a function from max on (reduce function {} to {}), got {}", first_reduce,
                       kReduceFunctionCount - 1, op.function);
  if (op.function != 0 && op.kind != OpKind::unary && op.kind != OpKind::reduce)
    return std::string(op_kind_name(op.kind)) + " does not take a function";
  const bool takes_alpha =
      op.kind == OpKind::unary && (op.function == static_cast<std::uint32_t>(UnaryFunction::elu) ||
                                   op.function == static_cast<std::uint32_t>(UnaryFunction::celu) ||
                                   op.function == static_cast<std::uint32_t>(UnaryFunction::thresholded_relu) ||
                                   op.function == static_cast<std::uint32_t>(UnaryFunction::is_inf));
  if (!std::isfinite(op.alpha) || (op.alpha != 0.0 && !takes_alpha))
    return fmt::format("{} does not take an alpha of {}", op_kind_name(op.kind), op.alpha);
  if (op.kind == OpKind::unary && op.function == static_cast<std::uint32_t>(UnaryFunction::celu) && op.alpha == 0.0)
    return "celu needs a non-zero alpha";
  return "";
}

bool may_be_float16(const Graph& graph, const Op& op, std::size_t slot) {
  const bool matmul_weight = (op.kind == OpKind::matmul || op.kind == OpKind::dense) && slot == 1 && !op.transpose_b;
  const bool bias = (op.kind == OpKind::add && slot == 1 && graph.tensors[op.inputs[slot]].shape.size() == 1) ||
                    (op.kind == OpKind::dense && slot == 2);
  return matmul_weight || bias;
}

Float16Storage store_weights_in_float16(Graph& graph) {
  std::vector<bool> read(graph.tensors.size(), false), halves_only(graph.tensors.size(), true);
  for (const Op& op : graph.ops)
    for (std::size_t slot = 0; slot < op.inputs.size(); ++slot) {
      read.at(op.inputs[slot]) = true;
      halves_only[op.inputs[slot]] = halves_only[op.inputs[slot]] && may_be_float16(graph, op, slot);
    }
  for (std::uint32_t output : graph.outputs) halves_only.at(output) = false;  // read back as float32
  Float16Storage storage;
  for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
    Tensor& tensor = graph.tensors[t];
    if (tensor.kind != TensorKind::weight || tensor.dtype != DType::float32 || !read[t] || !halves_only[t]) continue;
    tensor.dtype = DType::float16;
    ++storage.weights;
    const auto elements = static_cast<std::uint64_t>(tensor.elements());
    storage.bytes_saved += (packed_words(elements, DType::float32) - packed_words(elements, DType::float16)) * 4;
  }
  return storage;
}

std::string infer_shape(const Graph& graph, const Op& op, std::vector<std::int64_t>& shape) {
  auto input = [&](std::size_t i) -> const Tensor& { return graph.tensors.at(op.inputs.at(i)); };
  auto expect_inputs = [&](std::size_t low, std::size_t high) -> std::string {
    if (op.inputs.size() < low || op.inputs.size() > high)
      return std::string(op_kind_name(op.kind)) + " takes " + std::to_string(low) +
             (low == high ? "" : " to " + std::to_string(high)) + " inputs, got " + std::to_string(op.inputs.size());
    return "";
  };
  const bool batched = op.kind == OpKind::matmul || op.kind == OpKind::dense || op.kind == OpKind::transpose ||
                       op.kind == OpKind::split_heads || op.kind == OpKind::merge_heads || is_window(op.kind);
  const bool by_heads = op.kind == OpKind::split_heads || op.kind == OpKind::merge_heads;
  if (op.batch == 0 || (op.batch != 1 && !batched))
    return std::string(op_kind_name(op.kind)) + " does not take a batch of " + std::to_string(op.batch);
  if (op.heads == 0 || (op.heads != 1 && !by_heads))
    return std::string(op_kind_name(op.kind)) + " does not take " + std::to_string(op.heads) + " heads";
  if ((op.column_begin != 0 || op.column_count != 0) && op.kind != OpKind::slice_columns)
    return std::string(op_kind_name(op.kind)) + " does not take a column range";
  if (!is_window(op.kind) && op.window != Window{})
    return std::string(op_kind_name(op.kind)) + " does not take a window";
  if (op.kind != OpKind::clip && (op.clip_low != Op{}.clip_low || op.clip_high != Op{}.clip_high))
    return std::string(op_kind_name(op.kind)) + " does not take clip bounds";
  if (op.kind == OpKind::clip && (std::isnan(op.clip_low) || std::isnan(op.clip_high) || op.clip_low > op.clip_high))
    return fmt::format("clip needs bounds low <= high, got {} and {}", op.clip_low, op.clip_high);
  if (op.relu && op.kind != OpKind::dense && op.kind != OpKind::conv)
    return std::string(op_kind_name(op.kind)) + " does not take a fused relu";
  if (std::string problem = function_problem(op); !problem.empty()) return problem;
  if (op.kind != OpKind::gather && (!op.gather_shape.empty() || !op.gather_runs.empty()))
    return std::string(op_kind_name(op.kind)) + " does not take gather runs";
  switch (op.kind) {
    case OpKind::matmul:
    case OpKind::dense: {
      if (auto e = op.kind == OpKind::matmul ? expect_inputs(2, 2) : expect_inputs(2, 3); !e.empty()) return e;
      const Tensor& a = input(0);
      const Tensor& b = input(1);
      if (a.shape.size() != 2 || b.shape.size() != 2)
        return "matmul needs two matrices, got '" + a.name + "' " + shape_text(a.shape) + " and '" + b.name + "' " +
               shape_text(b.shape);
      if (op.transpose_b && op.kind == OpKind::dense) return "dense ops do not take transpose_b";
      if (op.batch != 1 && op.kind == OpKind::dense) return "dense ops do not take a batch";
      if (a.shape[0] % op.batch != 0 || b.shape[0] % op.batch != 0)
        return "a batch of " + std::to_string(op.batch) + " needs both operands' rows in as many equal blocks: '" +
               a.name + "' " + shape_text(a.shape) + " and '" + b.name + "' " + shape_text(b.shape);
      // transpose_b: b is [n, k] and the product is a * b^T; a batch stacks products by rows.
      const std::int64_t b_rows = b.shape[0] / op.batch;
      const std::int64_t depth = op.transpose_b ? b.shape[1] : b_rows;
      const std::int64_t columns = op.transpose_b ? b_rows : b.shape[1];
      if (a.shape[1] != depth)
        return "matmul inner dimensions differ: '" + a.name + "' " + shape_text(a.shape) + " x '" + b.name + "' " +
               shape_text(b.shape) + (op.transpose_b ? " transposed" : "") +
               (op.batch > 1 ? " (a batch of " + std::to_string(op.batch) + ": each product takes " +
                                   std::to_string(b_rows) + " rows of '" + b.name + "')"
                             : "");
      if (op.inputs.size() == 3 && (input(2).shape.size() != 1 || input(2).shape[0] != columns))
        return "bias '" + input(2).name + "' " + shape_text(input(2).shape) + " must be [" + std::to_string(columns) +
               "]";
      shape = {a.shape[0], columns};
      return "";
    }
    case OpKind::softmax: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      shape = input(0).shape;
      return "";
    }
    case OpKind::layer_norm: {
      if (auto e = expect_inputs(3, 3); !e.empty()) return e;
      const Tensor& x = input(0);
      for (std::size_t i = 1; i < 3; ++i)
        if (input(i).shape.size() != 1 || input(i).shape[0] != x.cols())
          return std::string(i == 1 ? "gamma" : "beta") + " '" + input(i).name + "' " + shape_text(input(i).shape) +
                 " must be [" + std::to_string(x.cols()) + "], one value per column of '" + x.name + "'";
      shape = x.shape;
      return "";
    }
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
    case OpKind::div:
    case OpKind::max:
    case OpKind::min:
    case OpKind::prelu:
    case OpKind::power:
    case OpKind::mod:
    case OpKind::fmod:
    case OpKind::equal:
    case OpKind::less:
    case OpKind::less_or_equal:
    case OpKind::greater:
    case OpKind::greater_or_equal:
    case OpKind::logical_and:
    case OpKind::logical_or:
    case OpKind::logical_xor: {
      if (auto e = expect_inputs(2, 2); !e.empty()) return e;
      const Tensor& a = input(0);
      const Tensor& b = input(1);
      if (binary_broadcast(a, b) == Broadcast::none)
        return std::string(op_kind_name(op.kind)) + " needs equal shapes, a row vector [" + std::to_string(a.cols()) +
               "] or a column [" + std::to_string(a.rows()) + ", 1]: '" + a.name + "' " + shape_text(a.shape) +
               " and '" + b.name + "' " + shape_text(b.shape);
      shape = a.shape;
      return "";
    }
    case OpKind::relu:
    case OpKind::sigmoid:
    case OpKind::tanh:
    case OpKind::erf:
    case OpKind::sqrt:
    case OpKind::pow:
    case OpKind::clip:
    case OpKind::unary:
    case OpKind::logical_not:
    case OpKind::cast: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      if (op.kind == OpKind::pow && !std::isfinite(op.exponent)) return "pow needs a finite exponent";
      shape = input(0).shape;
      return "";
    }
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
    case OpKind::reduce: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      shape = {input(0).rows(), 1};
      return "";
    }
    case OpKind::transpose: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      const Tensor& x = input(0);
      if (x.shape.size() != 2 || x.shape[0] % op.batch != 0)
        return "transpose needs a matrix of " + std::to_string(op.batch) + " equal row blocks, got '" + x.name + "' " +
               shape_text(x.shape);
      shape = {op.batch * x.shape[1], x.shape[0] / op.batch};
      return "";
    }
    case OpKind::split_heads:
    case OpKind::merge_heads: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      // split: [B*S, H*D] to [B*H*S, D]; merge: [B*H*S, D] to [B*S, H*D].
      const Tensor& x = input(0);
      const bool split = op.kind == OpKind::split_heads;
      const std::int64_t row_blocks = split ? std::int64_t{op.batch} : std::int64_t{op.batch} * op.heads;
      if (x.shape.size() != 2 || x.shape[0] % row_blocks != 0 || (split && x.shape[1] % op.heads != 0))
        return std::string(op_kind_name(op.kind)) + " of a batch of " + std::to_string(op.batch) + " and " +
               std::to_string(op.heads) + " heads needs a matrix of " +
               (split ? fmt::format("[{}*S, {}*D]", op.batch, op.heads) : fmt::format("[{}*S, D]", row_blocks)) +
               ", got '" + x.name + "' " + shape_text(x.shape);
      shape = split ? std::vector<std::int64_t>{x.shape[0] * op.heads, x.shape[1] / op.heads}
                    : std::vector<std::int64_t>{x.shape[0] / op.heads, x.shape[1] * op.heads};
      return "";
    }
    case OpKind::slice_columns: {
      if (auto e = expect_inputs(1, 1); !e.empty()) return e;
      const Tensor& x = input(0);
      if (x.shape.size() != 2 || op.column_count == 0 || std::int64_t{op.column_begin} + op.column_count > x.shape[1])
        return fmt::format("slice_columns of columns [{}, {}) needs a matrix that has them, got '{}' {}",
                           op.column_begin, std::int64_t{op.column_begin} + op.column_count, x.name,
                           shape_text(x.shape));
      shape = {x.shape[0], op.column_count};
      return "";
    }
    case OpKind::conv:
    case OpKind::max_pool:
    case OpKind::avg_pool:
      return infer_window_shape(graph, op, shape);
    case OpKind::gather:
      return infer_gather_shape(graph, op, shape);
    case OpKind::where: {
      if (auto e = expect_inputs(3, 3); !e.empty()) return e;
      if (input(0).shape != input(1).shape || input(0).shape != input(2).shape)
        return fmt::format("where needs a condition and two values of one shape, got '{}' {}, '{}' {} and '{}' {}",
                           input(0).name, shape_text(input(0).shape), input(1).name, shape_text(input(1).shape),
                           input(2).name, shape_text(input(2).shape));
      shape = input(0).shape;
      return "";
    }
    case OpKind::embedding: {
      if (auto e = expect_inputs(2, 2); !e.empty()) return e;
      const Tensor& table = input(0);
      if (table.shape.size() != 2)
        return fmt::format("embedding needs a table [rows, cols], got '{}' {}", table.name, shape_text(table.shape));
      if (table.shape[0] > std::numeric_limits<std::int32_t>::max())
        return fmt::format("embedding table '{}' has {} rows, more than int32 indices reach", table.name,
                           table.shape[0]);
      shape = {input(1).elements(), table.shape[1]};
      return "";
    }
  }
  return "unknown operation";
}

std::string infer_dtype(const Graph& graph, const Op& op, DType& dtype) {
  auto type = [&](std::size_t i) { return graph.tensors.at(op.inputs.at(i)).dtype; };
  auto refuse = [&](std::size_t i, const char* takes) {
    const Tensor& t = graph.tensors.at(op.inputs.at(i));
    return fmt::format("{} takes {}, but operand {} '{}' is {}", op_kind_name(op.kind), takes, i, t.name,
                       dtype_name(t.dtype));
  };
  auto is_float = [](DType t) { return t == DType::float32 || t == DType::float16; };
  if (op.kind == OpKind::cast) {
    if (op.inputs.empty()) return "cast takes 1 input, got 0";
    if (type(0) == DType::float16) return refuse(0, "float32, int32 or bool");
    if (dtype == DType::float16) return "cast gives float32, int32 or bool, not float16";
    return "";
  }
  if (is_relayout(op.kind)) {  // data moved, whatever it is
    dtype = op.inputs.empty() ? DType::float32 : type(0);
    return "";
  }
  if (op.kind == OpKind::gather) {  // words moved: inputs of one 32-bit type
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (type(i) == DType::float16 || type(i) != type(0)) return refuse(i, "inputs of one 32-bit type");
    dtype = op.inputs.empty() ? DType::float32 : type(0);
    return "";
  }
  if (op.kind == OpKind::embedding) {
    if (op.inputs.size() != 2) return fmt::format("embedding takes 2 inputs, got {}", op.inputs.size());
    if (type(0) == DType::float16) return refuse(0, "a table of 32-bit words (float32, int32 or bool)");
    if (type(1) != DType::int32) return refuse(1, "int32 indices");
    dtype = type(0);
    return "";
  }
  if (op.kind == OpKind::where) {
    if (op.inputs.size() != 3) return fmt::format("where takes 3 inputs, got {}", op.inputs.size());
    if (type(0) != DType::boolean) return refuse(0, "a bool condition");
    if (type(1) == DType::float16) return refuse(1, "float32, int32 or bool values");
    if (type(2) != type(1)) return refuse(2, "two values of one type");
    dtype = type(1);
    return "";
  }
  const bool logic = op.kind == OpKind::logical_and || op.kind == OpKind::logical_or ||
                     op.kind == OpKind::logical_xor || op.kind == OpKind::logical_not;
  // Functions of two float or two int32 operands (mod: int32 only; prelu and power: floats only).
  // IsInf and IsNaN: a bool of each float.
  if (op.kind == OpKind::unary && (op.function == static_cast<std::uint32_t>(UnaryFunction::is_inf) ||
                                   op.function == static_cast<std::uint32_t>(UnaryFunction::is_nan))) {
    if (op.inputs.empty() || !is_float(type(0))) return refuse(0, "a float operand");
    dtype = DType::boolean;
    return "";
  }
  const bool arithmetic = op.kind == OpKind::add || op.kind == OpKind::sub || op.kind == OpKind::mul ||
                          op.kind == OpKind::div || op.kind == OpKind::max || op.kind == OpKind::min ||
                          op.kind == OpKind::mod || op.kind == OpKind::fmod;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const DType t = type(i);
    if (op.kind == OpKind::mod && t != DType::int32) return refuse(i, "int32 operands (floats take fmod)");
    if (logic && t != DType::boolean) return refuse(i, "bool operands");
    if (is_comparison(op.kind) && (t == DType::float16 || (i > 0 && t != type(0))))
      return refuse(i, "two operands of one type (float32, int32 or bool)");
    if (arithmetic && is_float(type(0)) != is_float(t)) return refuse(i, "two float or two int32 operands");
    if (arithmetic && t == DType::boolean) return refuse(i, "float or int32 operands");
    if (!logic && !is_comparison(op.kind) && !arithmetic && !is_float(t)) return refuse(i, "float operands");
  }
  dtype = logic || is_comparison(op.kind)         ? DType::boolean
          : arithmetic && type(0) == DType::int32 ? DType::int32
                                                  : DType::float32;
  return "";
}

static std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static std::uint64_t name_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

float initial_value(const Graph& graph, const Tensor& tensor, std::uint64_t index) {
  const std::uint64_t bits = splitmix64(graph.seed ^ name_hash(tensor.name) ^ splitmix64(index));
  const double unit = static_cast<double>(bits >> 11) * 0x1.0p-53;  // [0, 1)
  return static_cast<float>((2.0 * unit - 1.0) * tensor.init_scale);
}

/// A unary or reduce op's `function` by name (exp, log, ... for unary; max, min, ... for reduce).
static std::uint32_t parse_function(const std::string& file, const YAML::Node& op, OpKind kind) {
  const bool unary = kind == OpKind::unary;
  const YAML::Node node = op["function"];
  if (!node.IsDefined())
    yaml::fail(file, op, std::string(op_kind_name(kind)) + " needs 'function', e.g. " + (unary ? "exp" : "max"));
  const std::string text = node.Scalar();
  std::vector<std::string> known;
  const std::uint32_t first =
      unary ? static_cast<std::uint32_t>(UnaryFunction::exp) : static_cast<std::uint32_t>(ReduceFunction::max);
  const std::uint32_t count = unary ? kUnaryFunctionCount : kReduceFunctionCount;
  for (std::uint32_t f = first; f < count; ++f) {
    if (unary && !is_unary_op_function(f)) continue;
    known.push_back(unary ? unary_function_name(static_cast<UnaryFunction>(f))
                          : reduce_function_name(static_cast<ReduceFunction>(f)));
    if (text == known.back()) return f;
  }
  std::string near = yaml::nearest(text, known);
  yaml::fail(file, node,
             "unknown " + std::string(op_kind_name(kind)) + " function '" + text + "'" +
                 (near.empty() ? "" : "; did you mean '" + near + "'?") +
                 " (known: " + fmt::format("{}", fmt::join(known, ", ")) + ")");
}

static OpKind parse_op_kind(const std::string& file, const YAML::Node& node) {
  const std::string text = node.Scalar();
  if (text == "matmul") return OpKind::matmul;
  if (text == "add") return OpKind::add;
  if (text == "relu") return OpKind::relu;
  if (text == "dense") return OpKind::dense;
  if (text == "softmax") return OpKind::softmax;
  std::vector<std::string> known;
  for (std::uint32_t kind = 0; kind < kOpKindCount; ++kind) {
    known.push_back(op_kind_name(static_cast<OpKind>(kind)));
    if (text == known.back()) return static_cast<OpKind>(kind);
  }
  std::string near = yaml::nearest(text, known);
  yaml::fail(file, node,
             "unknown op '" + text + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
                 " (known: " + fmt::format("{}", fmt::join(known, ", ")) + ")");
}

static SourcePlace place_of(const YAML::Node& node) {
  if (node.Mark().is_null()) return {};
  return {static_cast<std::uint32_t>(node.Mark().line + 1), static_cast<std::uint32_t>(node.Mark().column + 1)};
}

// Sizes beyond which a model is refused as unreasonable rather than attempted.
constexpr std::int64_t kMaxDimension = 1ll << 24;
constexpr std::int64_t kMaxTensorElements = 1ll << 31;

/// A list of `count` integers in `low`..kMaxDimension under `key`, or `fallback` when absent.
static std::vector<std::uint32_t> get_sizes(const std::string& path, const YAML::Node& node, const char* key,
                                            std::size_t count, std::uint32_t low, std::vector<std::uint32_t> fallback,
                                            const char* example) {
  const YAML::Node list = node[key];
  if (!list.IsDefined()) {
    if (fallback.empty()) yaml::fail(path, node, fmt::format("missing required key '{}', e.g. {}", key, example));
    return fallback;
  }
  if (!list.IsSequence() || list.size() != count)
    yaml::fail(path, list, fmt::format("'{}' must be a list of {} integers, e.g. {}", key, count, example));
  std::vector<std::uint32_t> sizes;
  for (const auto& item : list) {
    std::int64_t value = 0;
    if (!item.IsScalar() || !yaml::parse_int(item.Scalar(), value) || value < low || value > kMaxDimension)
      yaml::fail(path, item, fmt::format("'{}' takes integers in {}..{}, e.g. {}", key, low, kMaxDimension, example));
    sizes.push_back(static_cast<std::uint32_t>(value));
  }
  return sizes;
}

/// A window op's field, kernel, strides, dilations, pads (top, left, bottom, right) and groups.
static Window parse_window(const std::string& path, const YAML::Node& node) {
  Window w;
  const auto field = get_sizes(path, node, "field", 2, 1, {}, "[32, 32] (height, width of the input)");
  const auto kernel = get_sizes(path, node, "kernel", 2, 1, {}, "[3, 3]");
  const auto strides = get_sizes(path, node, "strides", 2, 1, {1, 1}, "[2, 2]");
  const auto dilations = get_sizes(path, node, "dilations", 2, 1, {1, 1}, "[1, 1]");
  const auto pads = get_sizes(path, node, "pads", 4, 0, {0, 0, 0, 0}, "[1, 1, 1, 1] (top, left, bottom, right)");
  std::tie(w.height, w.width) = std::tuple{field[0], field[1]};
  std::tie(w.kernel_h, w.kernel_w) = std::tuple{kernel[0], kernel[1]};
  std::tie(w.stride_h, w.stride_w) = std::tuple{strides[0], strides[1]};
  std::tie(w.dilation_h, w.dilation_w) = std::tuple{dilations[0], dilations[1]};
  std::tie(w.pad_top, w.pad_left, w.pad_bottom, w.pad_right) = std::tuple{pads[0], pads[1], pads[2], pads[3]};
  const std::uint64_t groups = yaml::get_uint_or(path, node, "groups", 1, kMaxDimension);
  if (groups == 0) yaml::fail(path, node["groups"], "'groups' must be a positive count, e.g. 1 (32 for depthwise)");
  w.groups = static_cast<std::uint32_t>(groups);
  w.count_include_pad = yaml::get_bool_or(path, node, "count_include_pad", false);
  return w;
}

/// A gather op's `shape` and `runs`, each run [output_begin, input, input_begin, length, input_stride,
/// repeat, output_step, input_step]; infer_shape then checks that they write every element once.
static void parse_gather(const std::string& path, const YAML::Node& node, Op& op) {
  constexpr const char* kRunExample =
      "[0, 0, 0, 8, 4, 4, 8, 1] (output_begin, input, input_begin, length, "
      "input_stride, repeat, output_step, input_step)";
  const YAML::Node shape = node["shape"];
  if (!shape.IsDefined() || !shape.IsSequence() || shape.size() < 1 || shape.size() > 2)
    yaml::fail(path, shape.IsDefined() ? shape : node, "a gather needs 'shape', 1 or 2 positive sizes, e.g. [4, 8]");
  for (const auto& d : shape) {
    std::int64_t size = 0;
    if (!d.IsScalar() || !yaml::parse_int(d.Scalar(), size) || size <= 0 || size > kMaxDimension)
      yaml::fail(path, d, "a shape size must be an integer in 1.." + std::to_string(kMaxDimension));
    op.gather_shape.push_back(size);
  }
  const YAML::Node runs = node["runs"];
  if (!runs.IsDefined() || !runs.IsSequence() || runs.size() == 0)
    yaml::fail(path, runs.IsDefined() ? runs : node,
               fmt::format("a gather needs 'runs', a list of runs like {}", kRunExample));
  for (const auto& run : runs) {
    if (!run.IsSequence() || run.size() != kGatherRunFields)
      yaml::fail(path, run, fmt::format("a run is a list of {} integers, e.g. {}", kGatherRunFields, kRunExample));
    std::array<std::int64_t, kGatherRunFields> values{};
    for (std::size_t i = 0; i < kGatherRunFields; ++i) {
      const bool may_be_negative = i == 2 || i == 4 || i == 7;  // input_begin, input_stride, input_step
      if (!run[i].IsScalar() || !yaml::parse_int(run[i].Scalar(), values[i]) || (!may_be_negative && values[i] < 0))
        yaml::fail(path, run[i],
                   fmt::format("run fields are integers (only input_stride and input_step may be "
                               "negative), e.g. {}",
                               kRunExample));
    }
    std::array<std::uint64_t, kGatherRunFields> fields{};
    for (std::size_t i = 0; i < kGatherRunFields; ++i) fields[i] = static_cast<std::uint64_t>(values[i]);
    op.gather_runs.push_back(gather_run_from_fields(fields));
  }
}

Graph load_model(const std::string& path) {
  using namespace yaml;
  YAML::Node root = load_file(path);
  require_map(path, root, "a model");
  check_keys(path, root, {"model", "seed", "tensors", "ops", "outputs"});
  Graph graph;
  graph.source_file = path;
  graph.name = get_name(path, root, "model");
  graph.seed = get_uint_or(path, root, "seed", 0);

  std::unordered_map<std::string, std::uint32_t> index;
  auto known_names = [&] {
    std::vector<std::string> names;
    for (const auto& t : graph.tensors) names.push_back(t.name);
    return names;
  };

  YAML::Node tensors = root["tensors"];
  if (!tensors.IsDefined() || !tensors.IsSequence() || tensors.size() == 0)
    fail(path, tensors.IsDefined() ? tensors : root, "'tensors' must be a non-empty list of inputs and weights");
  for (const auto& node : tensors) {
    require_map(path, node, "a tensor");
    check_keys(path, node, {"name", "shape", "dtype", "kind", "scale"});
    Tensor t;
    t.name = get_name(path, node, "name");
    t.place = place_of(node);
    if (index.count(t.name)) fail(path, node["name"], "tensor '" + t.name + "' is defined twice");
    YAML::Node shape = node["shape"];
    if (!shape.IsDefined() || !shape.IsSequence() || shape.size() < 1 || shape.size() > 2)
      fail(path, shape.IsDefined() ? shape : YAML::Node(node), "'shape' must be a list of 1 or 2 positive sizes");
    std::int64_t elements = 1;
    for (const auto& d : shape) {
      std::int64_t size = 0;
      if (!d.IsScalar() || !parse_int(d.Scalar(), size) || size <= 0 || size > kMaxDimension)
        fail(path, d, "a shape size must be an integer in 1.." + std::to_string(kMaxDimension));
      t.shape.push_back(size);
      elements *= size;
    }
    if (elements > kMaxTensorElements)
      fail(path, shape,
           "tensor '" + t.name + "' has " + std::to_string(elements) + " elements; the limit is " +
               std::to_string(kMaxTensorElements));
    const std::string dtype = node["dtype"].IsDefined() ? get_string(path, node, "dtype") : "float32";
    if (dtype == "float32") t.dtype = DType::float32;
    else if (dtype == "float16") t.dtype = DType::float16;
    else fail(path, node["dtype"], "dtype '" + dtype + "' is not supported; use float32 or float16");
    const std::string kind = get_string(path, node, "kind");
    if (kind == "input") t.kind = TensorKind::input;
    else if (kind == "weight") t.kind = TensorKind::weight;
    else fail(path, node["kind"], "kind must be 'input' or 'weight', got '" + kind + "'");
    if (t.dtype == DType::float16 && t.kind != TensorKind::weight)
      fail(path, node["dtype"],
           "float16 inputs are not supported yet: only weights may be stored as "
           "float16 (activations are float32); declare '" +
               t.name + "' float32");
    t.init_scale = get_number_or(path, node, "scale", 1.0);
    index[t.name] = static_cast<std::uint32_t>(graph.tensors.size());
    graph.tensors.push_back(std::move(t));
  }

  YAML::Node ops = root["ops"];
  if (!ops.IsDefined() || !ops.IsSequence() || ops.size() == 0)
    fail(path, ops.IsDefined() ? ops : root, "'ops' must be a non-empty list of operations");
  for (const auto& node : ops) {
    require_map(path, node, "an op");
    check_keys(path, node, {"op",           "inputs",    "output", "relu",   "transpose_b",       "batch", "heads",
                            "column_begin", "columns",   "scale",  "eps",    "exponent",          "field", "kernel",
                            "strides",      "dilations", "pads",   "groups", "count_include_pad", "low",   "high",
                            "function",     "alpha",     "shape",  "runs"});
    if (!node["op"].IsDefined()) fail(path, node, "missing required key 'op'");
    Op op;
    op.kind = parse_op_kind(path, node["op"]);
    op.place = place_of(node);
    op.relu = get_bool_or(path, node, "relu", false);
    if (op.relu && op.kind != OpKind::dense && op.kind != OpKind::conv)
      fail(path, node["relu"], "'relu' applies to dense and conv ops only");
    // Attributes belong to one op kind each; elsewhere they would be silently ignored.
    auto only_for = [&](const char* key, std::initializer_list<OpKind> kinds) {
      if (!node[key].IsDefined() || std::find(kinds.begin(), kinds.end(), op.kind) != kinds.end()) return;
      std::vector<std::string> names;
      for (OpKind kind : kinds) names.push_back(op_kind_name(kind));
      fail(path, node[key], fmt::format("'{}' applies to {} ops only", key, fmt::join(names, ", ")));
    };
    only_for("transpose_b", {OpKind::matmul});
    only_for("batch", {OpKind::matmul, OpKind::transpose, OpKind::split_heads, OpKind::merge_heads, OpKind::conv,
                       OpKind::max_pool, OpKind::avg_pool});
    for (const char* key : {"field", "kernel", "strides", "dilations", "pads"})
      only_for(key, {OpKind::conv, OpKind::max_pool, OpKind::avg_pool});
    only_for("groups", {OpKind::conv});
    only_for("count_include_pad", {OpKind::avg_pool});
    only_for("low", {OpKind::clip});
    only_for("high", {OpKind::clip});
    only_for("heads", {OpKind::split_heads, OpKind::merge_heads});
    only_for("column_begin", {OpKind::slice_columns});
    only_for("columns", {OpKind::slice_columns});
    only_for("scale", {OpKind::softmax});
    only_for("eps", {OpKind::layer_norm});
    only_for("exponent", {OpKind::pow});
    only_for("function", {OpKind::unary, OpKind::reduce});
    only_for("alpha", {OpKind::unary});
    if (op.kind == OpKind::unary || op.kind == OpKind::reduce) op.function = parse_function(path, node, op.kind);
    op.alpha = get_number_or(path, node, "alpha", 0.0);
    only_for("shape", {OpKind::gather});
    only_for("runs", {OpKind::gather});
    if (op.kind == OpKind::gather) parse_gather(path, node, op);
    op.transpose_b = get_bool_or(path, node, "transpose_b", false);
    const std::uint64_t batch = get_uint_or(path, node, "batch", 1, kMaxDimension);
    if (batch == 0) fail(path, node["batch"], "'batch' must be a positive count, e.g. 4");
    op.batch = static_cast<std::uint32_t>(batch);
    const std::uint64_t heads = get_uint_or(path, node, "heads", 1, kMaxDimension);
    if (heads == 0) fail(path, node["heads"], "'heads' must be a positive count, e.g. 4");
    op.heads = static_cast<std::uint32_t>(heads);
    op.column_begin = static_cast<std::uint32_t>(get_uint_or(path, node, "column_begin", 0, kMaxDimension));
    op.column_count = static_cast<std::uint32_t>(get_uint_or(path, node, "columns", 0, kMaxDimension));
    if (op.kind == OpKind::slice_columns && op.column_count == 0)
      fail(path, node["columns"].IsDefined() ? node["columns"] : YAML::Node(node),
           "slice_columns needs 'columns', the positive count of columns it keeps, e.g. 32");
    op.scale = get_number_or(path, node, "scale", 1.0);
    if (!std::isfinite(op.scale) || op.scale == 0.0)
      fail(path, node["scale"], "'scale' must be a finite non-zero number, e.g. 0.0625 for 1/sqrt(256)");
    op.epsilon = get_number_or(path, node, "eps", 1e-5);
    if (!std::isfinite(op.epsilon) || op.epsilon <= 0.0)
      fail(path, node["eps"], "'eps' must be a finite positive number, e.g. 1e-5");
    op.exponent = get_number_or(path, node, "exponent", 1.0);
    if (!std::isfinite(op.exponent)) fail(path, node["exponent"], "'exponent' must be a finite number, e.g. 2");
    if (is_window(op.kind)) op.window = parse_window(path, node);
    op.clip_low = get_number_or(path, node, "low", op.clip_low);
    op.clip_high = get_number_or(path, node, "high", op.clip_high);
    YAML::Node inputs = node["inputs"];
    if (!inputs.IsDefined() || !inputs.IsSequence())
      fail(path, inputs.IsDefined() ? inputs : YAML::Node(node), "'inputs' must be a list of tensor names");
    for (const auto& in : inputs) {
      const std::string name = in.Scalar();
      auto it = index.find(name);
      if (it == index.end()) {
        std::string near = nearest(name, known_names());
        fail(path, in,
             "unknown tensor '" + name + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?") +
                 " (a tensor must be defined before an op reads it)");
      }
      op.inputs.push_back(it->second);
    }
    const std::string output = get_name(path, node, "output");
    if (index.count(output)) fail(path, node["output"], "tensor '" + output + "' is defined twice");
    std::vector<std::int64_t> shape;
    if (std::string problem = infer_shape(graph, op, shape); !problem.empty()) fail(path, node, problem);
    // float16 weights feed the half-weight matmul and bias adds; nothing else reads halves.
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      const Tensor& in = graph.tensors[op.inputs[i]];
      if (in.dtype != DType::float16) continue;
      if (!may_be_float16(graph, op, i))
        fail(path, inputs[i],
             "float16 tensor '" + in.name + "' cannot be input " + std::to_string(i) + " of " + op_kind_name(op.kind) +
                 ": float16 is supported yet only for the right operand "
                 "of a matmul (without transpose_b) and for a bias row vector; declare it float32");
    }
    Tensor out;
    out.name = output;
    out.shape = shape;
    out.dtype = DType::float32;  // results are computed and kept in float32
    out.kind = TensorKind::intermediate;
    out.place = place_of(node["output"]);
    op.output = static_cast<std::uint32_t>(graph.tensors.size());
    index[output] = op.output;
    graph.tensors.push_back(std::move(out));
    graph.ops.push_back(std::move(op));
  }

  YAML::Node outputs = root["outputs"];
  if (!outputs.IsDefined() || !outputs.IsSequence() || outputs.size() == 0)
    fail(path, outputs.IsDefined() ? outputs : root, "'outputs' must be a non-empty list of tensor names");
  for (const auto& node : outputs) {
    auto it = index.find(node.Scalar());
    if (it == index.end()) {
      std::string near = nearest(node.Scalar(), known_names());
      fail(path, node,
           "unknown output tensor '" + node.Scalar() + "'" + (near.empty() ? "" : "; did you mean '" + near + "'?"));
    }
    if (graph.tensors[it->second].kind != TensorKind::intermediate)
      fail(path, node, "output '" + node.Scalar() + "' must be produced by an op");
    graph.outputs.push_back(it->second);
  }
  return graph;
}

}  // namespace tessera
