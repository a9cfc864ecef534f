// The float64 reference executor of a model graph, and the numerical test against it.
#include "tessera/runtime/reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"

namespace tessera::runtime {

namespace {

/// A tensor's values and its matrix view (1-D tensors are one row). Inputs and weights
/// stay float32 and are widened element by element; op results are double.
struct Matrix {
  const double* wide = nullptr;
  const float* narrow = nullptr;
  bool words = false;  ///< narrow holds int32 or bool words (int_word), not float values
  std::int64_t rows = 0, cols = 0;
  double at(std::int64_t r, std::int64_t c) const {
    const auto i = static_cast<std::size_t>(r * cols + c);
    if (wide != nullptr) return wide[i];
    return words ? static_cast<double>(word_int(narrow[i])) : static_cast<double>(narrow[i]);
  }
};

[[noreturn]] void fail(const Graph& graph, const Op& op, const std::string& message) {
  throw Error(graph.source_file.empty() ? graph.name : graph.source_file, static_cast<int>(op.place.line),
              static_cast<int>(op.place.column),
              fmt::format("reference executor: {} op: {}", op_kind_name(op.kind), message));
}

/// `batch` products stacked by rows: a [batch*m, k] times b [batch*k, n] (b [batch*n, k]
/// transposed), product i from the i-th row block of each; accumulated in double in k order.
std::vector<double> batched_matmul(const Matrix& a, const Matrix& b, std::uint32_t batch, bool transpose_b) {
  const std::int64_t m = a.rows / batch, k = a.cols, b_rows = b.rows / batch;
  const std::int64_t n = transpose_b ? b_rows : b.cols;
  std::vector<double> out(static_cast<std::size_t>(a.rows * n), 0.0);
  for (std::int64_t p = 0; p < batch; ++p)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0.0;
        for (std::int64_t d = 0; d < k; ++d)
          sum += a.at(p * m + i, d) * (transpose_b ? b.at(p * b_rows + j, d) : b.at(p * b_rows + d, j));
        out[static_cast<std::size_t>((p * m + i) * n + j)] = sum;
      }
  return out;
}

/// out[m,n] = a[m,k] * b[n,k]^T; accumulated in double in k order.
std::vector<double> matmul_transposed(const Matrix& a, const Matrix& b) {
  std::vector<double> out(static_cast<std::size_t>(a.rows * b.rows), 0.0);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (std::int64_t j = 0; j < b.rows; ++j) {
      double sum = 0.0;
      for (std::int64_t p = 0; p < a.cols; ++p) sum += a.at(i, p) * b.at(j, p);
      out[static_cast<std::size_t>(i * b.rows + j)] = sum;
    }
  return out;
}

std::vector<double> softmax(const Matrix& x, double scale) {
  std::vector<double> out(static_cast<std::size_t>(x.rows * x.cols));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    double largest = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < x.cols; ++c) largest = std::max(largest, scale * x.at(r, c));
    double sum = 0.0;
    double* row = out.data() + r * x.cols;
    for (std::int64_t c = 0; c < x.cols; ++c) sum += row[c] = std::exp(scale * x.at(r, c) - largest);
    for (std::int64_t c = 0; c < x.cols; ++c) row[c] /= sum;
  }
  return out;
}

std::vector<double> layer_norm(const Matrix& x, const Matrix& gamma, const Matrix& beta, double eps) {
  std::vector<double> out(static_cast<std::size_t>(x.rows * x.cols));
  for (std::int64_t r = 0; r < x.rows; ++r) {
    double mean = 0.0, variance = 0.0;
    for (std::int64_t c = 0; c < x.cols; ++c) mean += x.at(r, c);
    mean /= static_cast<double>(x.cols);
    for (std::int64_t c = 0; c < x.cols; ++c) variance += (x.at(r, c) - mean) * (x.at(r, c) - mean);
    variance /= static_cast<double>(x.cols);
    const double inverse = 1.0 / std::sqrt(variance + eps);
    for (std::int64_t c = 0; c < x.cols; ++c)
      out[static_cast<std::size_t>(r * x.cols + c)] = (x.at(r, c) - mean) * inverse * gamma.at(0, c) + beta.at(0, c);
  }
  return out;
}

/// An elementwise binary op in double: arithmetic (exact for int32 operands, whose division
/// truncates toward zero), comparisons and logic (1 for true, 0 for false), as ONNX defines them.
double binary(OpKind kind, double a, double b, bool integers) {
  switch (kind) {
    case OpKind::sub:
      return a - b;
    case OpKind::mul:
      return a * b;
    case OpKind::div:
      return integers ? std::trunc(a / b) : a / b;
    case OpKind::equal:
      return a == b ? 1.0 : 0.0;
    case OpKind::less:
      return a < b ? 1.0 : 0.0;
    case OpKind::less_or_equal:
      return a <= b ? 1.0 : 0.0;
    case OpKind::greater:
      return a > b ? 1.0 : 0.0;
    case OpKind::greater_or_equal:
      return a >= b ? 1.0 : 0.0;
    case OpKind::logical_and:
      return a != 0 && b != 0 ? 1.0 : 0.0;
    case OpKind::logical_or:
      return a != 0 || b != 0 ? 1.0 : 0.0;
    case OpKind::logical_xor:
      return (a != 0) != (b != 0) ? 1.0 : 0.0;
    case OpKind::max:  // ONNX Max and Min propagate NaN
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    case OpKind::min:
      return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    case OpKind::prelu:
      return a < 0.0 ? b * a : a;
    case OpKind::power:
      return std::pow(a, b);
    case OpKind::fmod:  // the sign of the dividend's (C's fmod; exact for int32 values)
      return std::fmod(a, b);
    case OpKind::mod: {  // the sign of the divisor's (Python's %)
      const double r = std::fmod(a, b);
      return r != 0 && (r < 0) != (b < 0) ? r + b : r;
    }
    default:
      return a + b;
  }
}

/// The unary functions from exp on, as ONNX's operator definitions state them.
double unary_function(const Op& op, double x) {
  switch (static_cast<UnaryFunction>(op.function)) {
    case UnaryFunction::exp:
      return std::exp(x);
    case UnaryFunction::log:
      return std::log(x);
    case UnaryFunction::neg:
      return -x;
    case UnaryFunction::abs:
      return std::abs(x);
    case UnaryFunction::reciprocal:
      return 1.0 / x;
    case UnaryFunction::floor:
      return std::floor(x);
    case UnaryFunction::ceil:
      return std::ceil(x);
    case UnaryFunction::round: {  // halves go to the even neighbour
      const double below = std::floor(x), fraction = x - below;
      if (fraction != 0.5) return std::round(x);
      return std::fmod(below, 2.0) == 0.0 ? below : below + 1.0;
    }
    case UnaryFunction::sign:
      return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : 0.0;
    case UnaryFunction::sin:
      return std::sin(x);
    case UnaryFunction::cos:
      return std::cos(x);
    case UnaryFunction::softplus:
      return std::log(std::exp(x) + 1.0);
    case UnaryFunction::softsign:
      return x / (1.0 + std::abs(x));
    case UnaryFunction::elu:
      return x >= 0.0 ? x : op.alpha * (std::exp(x) - 1.0);
    case UnaryFunction::celu:
      return std::max(0.0, x) + std::min(0.0, op.alpha * (std::exp(x / op.alpha) - 1.0));
    case UnaryFunction::thresholded_relu:
      return x > op.alpha ? x : 0.0;
    case UnaryFunction::mish:
      return x * std::tanh(std::log1p(std::exp(x)));
    case UnaryFunction::tan:
      return std::tan(x);
    case UnaryFunction::asin:
      return std::asin(x);
    case UnaryFunction::acos:
      return std::acos(x);
    case UnaryFunction::atan:
      return std::atan(x);
    case UnaryFunction::sinh:
      return std::sinh(x);
    case UnaryFunction::cosh:
      return std::cosh(x);
    case UnaryFunction::asinh:
      return std::asinh(x);
    case UnaryFunction::acosh:
      return std::acosh(x);
    case UnaryFunction::atanh:
      return std::atanh(x);
    case UnaryFunction::is_inf: {  // alpha's bit 1 detects +inf, bit 2 -inf
      const auto detect = static_cast<int>(op.alpha);
      return std::isinf(x) && (x > 0 ? (detect & 1) != 0 : (detect & 2) != 0) ? 1.0 : 0.0;
    }
    case UnaryFunction::is_nan:
      return std::isnan(x) ? 1.0 : 0.0;
    default:
      throw Error(fmt::format("unary function {} has no reference", op.function));
  }
}

/// A row folded by a ReduceFunction from max on (ONNX's ReduceMax ... ReduceSumSquare).
double reduce_row(const Op& op, const double* row, std::int64_t cols) {
  const auto function = static_cast<ReduceFunction>(op.function);
  double result = function == ReduceFunction::prod ? 1.0 : 0.0;
  if (function == ReduceFunction::max) result = -std::numeric_limits<double>::infinity();
  if (function == ReduceFunction::min) result = std::numeric_limits<double>::infinity();
  for (std::int64_t c = 0; c < cols; ++c) {
    const double x = row[c];
    if (function == ReduceFunction::max) result = std::isnan(x) ? x : std::max(result, x);
    else if (function == ReduceFunction::min) result = std::isnan(x) ? x : std::min(result, x);
    else if (function == ReduceFunction::prod) result *= x;
    else if (function == ReduceFunction::l1) result += std::abs(x);
    else if (function == ReduceFunction::log_sum_exp) result += std::exp(x);
    else result += x * x;  // l2, sum_square
  }
  if (function == ReduceFunction::l2) return std::sqrt(result);
  if (function == ReduceFunction::log_sum_exp) return std::log(result);
  return result;
}

/// ONNX Cast of `x` to `to`: toward zero into integers (a NaN or a value outside int32 stays as
/// it is, so the comparison shows the device's result for it as the undefined case it is);
/// anything nonzero is true; integers become their float value.
double cast(double x, DType to) {
  if (to == DType::boolean) return x != 0 ? 1.0 : 0.0;
  if (to == DType::int32 && std::isfinite(x)) return std::trunc(x);
  return x;
}

/// An elementwise unary op (relu, sigmoid, tanh, erf, sqrt, pow) in double.
double unary(const Op& op, double x) {
  switch (op.kind) {
    case OpKind::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case OpKind::tanh:
      return std::tanh(x);
    case OpKind::erf:
      return std::erf(x);
    case OpKind::sqrt:
      return std::sqrt(x);
    case OpKind::pow:
      return std::pow(x, op.exponent);
    case OpKind::clip:
      return std::min(std::max(x, op.clip_low), op.clip_high);
    case OpKind::unary:
      return unary_function(op, x);
    default:
      return std::max(x, 0.0);
  }
}

/// out[m,n] = a[m,k] * b[k,n] (+ bias[n]); accumulated in double in k order.
std::vector<double> matmul(const Matrix& a, const Matrix& b, const Matrix* bias, bool relu) {
  std::vector<double> out(static_cast<std::size_t>(a.rows * b.cols), 0.0);
  for (std::int64_t i = 0; i < a.rows; ++i) {
    double* row = out.data() + i * b.cols;
    for (std::int64_t p = 0; p < a.cols; ++p) {
      const double scale = a.at(i, p);
      if (b.wide != nullptr) {
        const double* b_row = b.wide + p * b.cols;
        for (std::int64_t j = 0; j < b.cols; ++j) row[j] += scale * b_row[j];
      } else {
        const float* b_row = b.narrow + p * b.cols;
        for (std::int64_t j = 0; j < b.cols; ++j) row[j] += scale * static_cast<double>(b_row[j]);
      }
    }
    if (bias != nullptr)
      for (std::int64_t j = 0; j < b.cols; ++j) row[j] += bias->at(0, j);
    if (relu)
      for (std::int64_t j = 0; j < b.cols; ++j) row[j] = std::max(row[j], 0.0);
  }
  return out;
}

}  // namespace

/// conv, max_pool, avg_pool over feature maps [batch*H*W, C] straight from the ONNX definitions
/// (input pixel = output pixel * stride + tap * dilation - leading pad; taps in padding are zero
/// for conv and skipped by pools), in double.
std::vector<double> window_op(const Op& op, const Matrix& x, const Matrix* weights, const Matrix* bias) {
  const Window& w = op.window;
  const std::int64_t out_h = w.out_height(), out_w = w.out_width(), channels = x.cols;
  const std::int64_t outs = weights != nullptr ? weights->cols : channels;
  const std::int64_t group_in = channels / w.groups, group_out = outs / w.groups;
  std::vector<double> out(static_cast<std::size_t>(std::int64_t{op.batch} * out_h * out_w * outs));
  std::vector<double> sum(static_cast<std::size_t>(outs));
  std::vector<std::int64_t> counted(static_cast<std::size_t>(outs));
  for (std::int64_t n = 0; n < op.batch; ++n)
    for (std::int64_t oh = 0; oh < out_h; ++oh)
      for (std::int64_t ow = 0; ow < out_w; ++ow) {
        const bool max = op.kind == OpKind::max_pool;
        std::fill(sum.begin(), sum.end(), max ? -std::numeric_limits<double>::infinity() : 0.0);
        std::fill(counted.begin(), counted.end(), 0);
        for (std::int64_t kh = 0; kh < w.kernel_h; ++kh) {
          const std::int64_t ih = oh * w.stride_h + kh * w.dilation_h - w.pad_top;
          if (ih < 0 || ih >= w.height) continue;
          for (std::int64_t kw = 0; kw < w.kernel_w; ++kw) {
            const std::int64_t iw = ow * w.stride_w + kw * w.dilation_w - w.pad_left;
            if (iw < 0 || iw >= w.width) continue;
            const std::int64_t pixel = (n * w.height + ih) * w.width + iw;
            for (std::int64_t m = 0; m < outs; ++m) {
              if (weights == nullptr) {
                const double v = x.at(pixel, m);
                sum[static_cast<std::size_t>(m)] =
                    max ? std::max(sum[static_cast<std::size_t>(m)], v) : sum[static_cast<std::size_t>(m)] + v;
                ++counted[static_cast<std::size_t>(m)];
                continue;
              }
              const std::int64_t group = m / group_out;
              for (std::int64_t c = 0; c < group_in; ++c)
                sum[static_cast<std::size_t>(m)] +=
                    x.at(pixel, group * group_in + c) * weights->at((kh * w.kernel_w + kw) * group_in + c, m);
            }
          }
        }
        double* pixel_out = out.data() + ((n * out_h + oh) * out_w + ow) * outs;
        for (std::int64_t m = 0; m < outs; ++m) {
          double v = sum[static_cast<std::size_t>(m)];
          if (op.kind == OpKind::avg_pool) {
            const double divisor = w.count_include_pad ? static_cast<double>(w.kernel_h * w.kernel_w)
                                                       : static_cast<double>(counted[static_cast<std::size_t>(m)]);
            v = divisor > 0 ? v / divisor : 0.0;
          }
          if (bias != nullptr) v += bias->at(0, m);
          if (op.relu) v = std::max(v, 0.0);
          pixel_out[m] = v;
        }
      }
  return out;
}

ReferenceValues execute_reference(const Graph& graph, const HostTensors& values, bool outputs_only) {
  ReferenceValues computed;
  // Per tensor, the last op reading it (graph outputs: never freed).
  std::vector<std::size_t> last_reader(graph.tensors.size(), 0);
  std::vector<bool> kept(graph.tensors.size(), !outputs_only);
  for (std::size_t i = 0; i < graph.ops.size(); ++i)
    for (std::uint32_t input : graph.ops[i].inputs)
      if (input < last_reader.size()) last_reader[input] = i;
  for (std::uint32_t output : graph.outputs)
    if (output < kept.size()) kept[output] = true;
  auto lookup = [&](const Op& op, std::uint32_t index) -> Matrix {
    if (index >= graph.tensors.size()) fail(graph, op, fmt::format("input tensor index {} is out of range", index));
    const Tensor& tensor = graph.tensors[index];
    Matrix matrix;
    matrix.rows = tensor.rows();
    matrix.cols = tensor.cols();
    std::size_t size = 0;
    if (auto it = computed.find(tensor.name); it != computed.end()) {
      matrix.wide = it->second.data();
      size = it->second.size();
    } else if (tensor.kind == TensorKind::intermediate) {
      fail(graph, op, fmt::format("tensor '{}' is used before an op produces it", tensor.name));
    } else {
      auto given = values.find(tensor.name);
      if (given == values.end())
        fail(graph, op,
             fmt::format("no values given for {} '{}'", tensor.kind == TensorKind::weight ? "weight" : "input",
                         tensor.name));
      matrix.narrow = given->second.data();
      matrix.words = is_integer_word(tensor.dtype);
      size = given->second.size();
    }
    if (size != static_cast<std::size_t>(matrix.rows * matrix.cols))
      fail(graph, op,
           fmt::format("tensor '{}' has {} values but shape {}x{}", tensor.name, size, matrix.rows, matrix.cols));
    return matrix;
  };

  for (std::size_t op_index = 0; op_index < graph.ops.size(); ++op_index) {
    const Op& op = graph.ops[op_index];
    if (op.output >= graph.tensors.size())
      fail(graph, op, fmt::format("output tensor index {} is out of range", op.output));
    const Tensor& out_tensor = graph.tensors[op.output];
    std::vector<double> out;
    switch (op.kind) {
      case OpKind::matmul:
      case OpKind::dense: {
        const std::size_t most_inputs = op.kind == OpKind::matmul ? 2 : 3;  // dense: + bias
        if (op.inputs.size() < 2 || op.inputs.size() > most_inputs)
          fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        const Matrix b = lookup(op, op.inputs[1]);
        if (op.batch > 1) {
          out = batched_matmul(a, b, op.batch, op.transpose_b);
          break;
        }
        if (op.transpose_b) {
          if (op.kind != OpKind::matmul || op.inputs.size() != 2 || a.cols != b.cols)
            fail(graph, op,
                 fmt::format("cannot multiply {}x{} by the transpose of {}x{}", a.rows, a.cols, b.rows, b.cols));
          out = matmul_transposed(a, b);
          break;
        }
        if (a.cols != b.rows)
          fail(graph, op, fmt::format("inner dimensions differ: {}x{} times {}x{}", a.rows, a.cols, b.rows, b.cols));
        Matrix bias;
        const bool has_bias = op.inputs.size() == 3;
        if (has_bias) {
          bias = lookup(op, op.inputs[2]);
          if (bias.rows != 1 || bias.cols != b.cols)
            fail(graph, op, fmt::format("bias is {}x{}, expected a row of {}", bias.rows, bias.cols, b.cols));
        }
        out = matmul(a, b, has_bias ? &bias : nullptr, op.kind == OpKind::dense && op.relu);
        break;
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
        if (op.inputs.size() != 2) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        const Matrix b = lookup(op, op.inputs[1]);
        const bool same = b.rows == a.rows && b.cols == a.cols;
        const bool row = !same && b.rows == 1 && b.cols == a.cols;     // a value per column
        const bool column = !same && b.rows == a.rows && b.cols == 1;  // a value per row
        if (!same && !row && !column)
          fail(graph, op,
               fmt::format("cannot {} {}x{} and {}x{}", op_kind_name(op.kind), a.rows, a.cols, b.rows, b.cols));
        const bool integers = is_integer_word(graph.tensors[op.inputs[0]].dtype);
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t c = 0; c < a.cols; ++c) {
            const double divisor = b.at(row ? 0 : r, column ? 0 : c);
            const bool divides = op.kind == OpKind::div || op.kind == OpKind::mod || op.kind == OpKind::fmod;
            if (integers && divides && divisor == 0)
              fail(graph, op,
                   fmt::format("integer division by zero at element {} (undefined in ONNX); give divisors that are "
                               "not zero",
                               r * a.cols + c));
            out[static_cast<std::size_t>(r * a.cols + c)] = binary(op.kind, a.at(r, c), divisor, integers);
          }
        break;
      }
      case OpKind::logical_not:
      case OpKind::cast: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t c = 0; c < a.cols; ++c)
            out[static_cast<std::size_t>(r * a.cols + c)] =
                op.kind == OpKind::cast ? cast(a.at(r, c), out_tensor.dtype) : (a.at(r, c) == 0 ? 1.0 : 0.0);
        break;
      }
      case OpKind::where: {
        if (op.inputs.size() != 3) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix condition = lookup(op, op.inputs[0]), a = lookup(op, op.inputs[1]), b = lookup(op, op.inputs[2]);
        if (a.rows != condition.rows || a.cols != condition.cols || b.rows != a.rows || b.cols != a.cols)
          fail(graph, op, "the condition and both values must be of one shape");
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t c = 0; c < a.cols; ++c)
            out[static_cast<std::size_t>(r * a.cols + c)] = condition.at(r, c) != 0 ? a.at(r, c) : b.at(r, c);
        break;
      }
      case OpKind::embedding: {
        // The device's rule: negative indices count from the end, any other out of range reads zeros.
        std::vector<std::int64_t> shape;
        if (const std::string problem = infer_shape(graph, op, shape); !problem.empty()) fail(graph, op, problem);
        const Matrix table = lookup(op, op.inputs[0]), indices = lookup(op, op.inputs[1]);
        const std::int64_t count = indices.rows * indices.cols;
        out.assign(static_cast<std::size_t>(count * table.cols), 0.0);
        for (std::int64_t t = 0; t < count; ++t) {
          auto index = static_cast<std::int64_t>(indices.at(t / indices.cols, t % indices.cols));
          if (index < 0) index += table.rows;
          if (index < 0 || index >= table.rows) continue;
          for (std::int64_t c = 0; c < table.cols; ++c)
            out[static_cast<std::size_t>(t * table.cols + c)] = table.at(index, c);
        }
        break;
      }
      case OpKind::relu:
      case OpKind::sigmoid:
      case OpKind::tanh:
      case OpKind::erf:
      case OpKind::sqrt:
      case OpKind::pow:
      case OpKind::clip:
      case OpKind::unary: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::int64_t c = 0; c < a.cols; ++c)
            out[static_cast<std::size_t>(r * a.cols + c)] = unary(op, a.at(r, c));
        break;
      }
      case OpKind::reduce_sum:
      case OpKind::reduce_mean: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        out.assign(static_cast<std::size_t>(a.rows), 0.0);
        for (std::int64_t r = 0; r < a.rows; ++r) {
          for (std::int64_t c = 0; c < a.cols; ++c) out[static_cast<std::size_t>(r)] += a.at(r, c);
          if (op.kind == OpKind::reduce_mean) out[static_cast<std::size_t>(r)] /= static_cast<double>(a.cols);
        }
        break;
      }
      case OpKind::reduce: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        out.resize(static_cast<std::size_t>(a.rows));
        std::vector<double> row(static_cast<std::size_t>(a.cols));
        for (std::int64_t r = 0; r < a.rows; ++r) {
          for (std::int64_t c = 0; c < a.cols; ++c) row[static_cast<std::size_t>(c)] = a.at(r, c);
          out[static_cast<std::size_t>(r)] = reduce_row(op, row.data(), a.cols);
        }
        break;
      }
      case OpKind::softmax: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        out = softmax(lookup(op, op.inputs[0]), op.scale);
        break;
      }
      case OpKind::transpose: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        const std::int64_t rows = a.rows / op.batch;  // of each transposed block
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        for (std::int64_t p = 0; p < op.batch; ++p)
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < a.cols; ++c)
              out[static_cast<std::size_t>((p * a.cols + c) * rows + r)] = a.at(p * rows + r, c);
        break;
      }
      case OpKind::slice_columns: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        out.resize(static_cast<std::size_t>(a.rows) * op.column_count);
        for (std::int64_t r = 0; r < a.rows; ++r)
          for (std::uint32_t c = 0; c < op.column_count; ++c)
            out[static_cast<std::size_t>(r) * op.column_count + c] = a.at(r, op.column_begin + c);
        break;
      }
      case OpKind::split_heads:
      case OpKind::merge_heads: {
        if (op.inputs.size() != 1) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix a = lookup(op, op.inputs[0]);
        const bool split = op.kind == OpKind::split_heads;
        const std::int64_t heads = op.heads, depth = split ? a.cols / heads : a.cols;
        const std::int64_t tokens = split ? a.rows / op.batch : a.rows / (std::int64_t{op.batch} * heads);
        out.resize(static_cast<std::size_t>(a.rows * a.cols));
        // Element (b, h, s, d) sits at [b*S+s, h*D+d] merged and at [(b*H+h)*S+s, d] split.
        for (std::int64_t b = 0; b < op.batch; ++b)
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t s = 0; s < tokens; ++s)
              for (std::int64_t d = 0; d < depth; ++d) {
                const std::int64_t merged = (b * tokens + s) * heads * depth + h * depth + d;
                const std::int64_t split_at = ((b * heads + h) * tokens + s) * depth + d;
                const std::int64_t from = split ? merged : split_at;
                out[static_cast<std::size_t>(split ? split_at : merged)] = a.at(from / a.cols, from % a.cols);
              }
        break;
      }
      case OpKind::layer_norm: {
        if (op.inputs.size() != 3) fail(graph, op, fmt::format("has {} inputs", op.inputs.size()));
        const Matrix x = lookup(op, op.inputs[0]);
        const Matrix gamma = lookup(op, op.inputs[1]);
        const Matrix beta = lookup(op, op.inputs[2]);
        if (gamma.rows * gamma.cols != x.cols || beta.rows * beta.cols != x.cols)
          fail(graph, op, fmt::format("gamma and beta must hold {} values each", x.cols));
        out = layer_norm(x, gamma, beta, op.epsilon);
        break;
      }
      case OpKind::conv:
      case OpKind::max_pool:
      case OpKind::avg_pool: {
        std::vector<std::int64_t> shape;
        if (const std::string problem = infer_shape(graph, op, shape); !problem.empty()) fail(graph, op, problem);
        const Matrix x = lookup(op, op.inputs[0]);
        if (op.kind != OpKind::conv) {
          out = window_op(op, x, nullptr, nullptr);
          break;
        }
        const Matrix weights = lookup(op, op.inputs[1]);
        Matrix bias;
        if (op.inputs.size() == 3) bias = lookup(op, op.inputs[2]);
        out = window_op(op, x, &weights, op.inputs.size() == 3 ? &bias : nullptr);
        break;
      }
      case OpKind::gather: {
        // Element by element from the runs: output index, input, input index, each checked.
        std::vector<std::int64_t> shape;
        if (const std::string problem = infer_shape(graph, op, shape); !problem.empty()) fail(graph, op, problem);
        std::vector<Matrix> inputs;
        for (std::uint32_t input : op.inputs) inputs.push_back(lookup(op, input));
        out.assign(static_cast<std::size_t>(out_tensor.elements()), std::numeric_limits<double>::quiet_NaN());
        for (const GatherRun& run : op.gather_runs) {
          const Matrix& from = inputs.at(run.input);
          for (std::uint64_t k = 0; k < run.repeat; ++k)
            for (std::uint64_t i = 0; i < run.length; ++i) {
              const std::int64_t at = run.input_begin + static_cast<std::int64_t>(k) * run.input_step +
                                      static_cast<std::int64_t>(i) * run.input_stride;
              out.at(run.output_begin + k * run.output_step + i) = from.at(at / from.cols, at % from.cols);
            }
        }
        break;
      }
      default:
        fail(graph, op, "unsupported op kind");
    }
    if (out.size() != static_cast<std::size_t>(out_tensor.rows() * out_tensor.cols()))
      fail(graph, op,
           fmt::format("produces {} values but '{}' is {}x{}", out.size(), out_tensor.name, out_tensor.rows(),
                       out_tensor.cols()));
    computed[out_tensor.name] = std::move(out);
    for (std::uint32_t input : op.inputs)
      if (input < kept.size() && !kept[input] && last_reader[input] == op_index)
        computed.erase(graph.tensors[input].name);
  }
  return computed;
}

double float16_relative_tolerance(const Graph& graph) {
  std::uint32_t half_matmuls = 0;
  for (const Op& op : graph.ops)
    if ((op.kind == OpKind::matmul || op.kind == OpKind::dense) && op.inputs.size() >= 2 &&
        op.inputs[1] < graph.tensors.size() && graph.tensors[op.inputs[1]].dtype == DType::float16)
      ++half_matmuls;
  return kFloat16Deviations * kFloat16UnitRoundoff * std::sqrt(static_cast<double>(half_matmuls));
}

NumericalReport compare_with_reference(const Graph& graph, const HostTensors& outputs, const ReferenceValues& reference,
                                       double atol, double rtol) {
  NumericalReport report;
  bool saw_nan = false;
  for (std::uint32_t index : graph.outputs) {
    const std::string& name = graph.tensors.at(index).name;
    auto device = outputs.find(name);
    if (device == outputs.end()) throw Error(fmt::format("numerical test: the device returned no output '{}'", name));
    auto expected = reference.find(name);
    if (expected == reference.end()) throw Error(fmt::format("numerical test: the reference computed no '{}'", name));
    if (device->second.size() != expected->second.size())
      throw Error(fmt::format("numerical test: output '{}' has {} values, the reference {}", name,
                              device->second.size(), expected->second.size()));
    const bool integers = is_integer_word(graph.tensors.at(index).dtype);
    for (std::size_t i = 0; i < device->second.size(); ++i) {
      const double want = expected->second[i];
      const float word = device->second[i];
      const double got = integers ? static_cast<double>(word_int(word)) : static_cast<double>(word);
      const double error = std::fabs(got - want);
      if (integers && got != want) ++report.inexact_integers;  // int32 and bool results must be exact
      report.max_abs_reference = std::max(report.max_abs_reference, std::fabs(want));
      // A NaN compares false with everything: record it as the worst element explicitly.
      if (std::isnan(error)) {
        if (!saw_nan) report.worst_tensor = name, report.worst_index = i;
        saw_nan = true;
      } else if (error > report.max_abs_error && !saw_nan) {
        report.max_abs_error = error;
        report.worst_tensor = name;
        report.worst_index = i;
      }
    }
    report.elements += device->second.size();
  }
  if (saw_nan) report.max_abs_error = std::numeric_limits<double>::quiet_NaN();
  report.tolerance = atol + (rtol + float16_relative_tolerance(graph)) * report.max_abs_reference;
  report.passed = !saw_nan && report.max_abs_error <= report.tolerance && report.inexact_integers == 0;
  return report;
}

ExpectationReport compare_with_expected(const Graph& graph, const HostTensors& outputs, const HostTensors& expected,
                                        double atol, double rtol) {
  ExpectationReport report;
  bool mismatched = false;
  for (const auto& [name, want] : expected) {
    auto device = outputs.find(name);
    if (device == outputs.end()) throw Error(fmt::format("expected output '{}' is not an output of the package", name));
    if (device->second.size() != want.size())
      throw Error(
          fmt::format("expected output '{}' has {} values, the device's {}", name, want.size(), device->second.size()));
    // int32 and bool outputs hold words, compared exactly (no tolerance makes sense for them).
    const std::int64_t index = graph.find_tensor(name);
    const bool integers = index >= 0 && is_integer_word(graph.tensors[static_cast<std::size_t>(index)].dtype);
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double got = integers ? word_int(device->second[i]) : device->second[i];
      const double expect = integers ? word_int(want[i]) : want[i];
      const double error = std::fabs(got - expect);
      const bool both_nan = std::isnan(got) && std::isnan(expect);  // assert_allclose's equal_nan
      const bool ok = both_nan || (got == expect) || (!integers && error <= atol + rtol * std::fabs(expect));
      if (!both_nan && !(got == expect)) {
        if (std::isnan(error) || error > report.max_abs_error) {
          report.max_abs_error = std::isnan(error) ? std::numeric_limits<double>::infinity() : error;
          if (!mismatched) report.worst_tensor = name, report.worst_index = i;
        }
        if (expect != 0) report.max_rel_error = std::max(report.max_rel_error, error / std::fabs(expect));
      }
      if (!ok) {
        if (!mismatched) report.worst_tensor = name, report.worst_index = i;
        mismatched = true;
        ++report.mismatches;
      }
    }
    report.elements += want.size();
  }
  report.passed = report.mismatches == 0;
  return report;
}

}  // namespace tessera::runtime
