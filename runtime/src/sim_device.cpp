// The simulator backend: checks a package's tile images at load, then executes them exactly.
#include "tessera/runtime/sim_device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <malloc.h>
#include <limits>
#include <span>
#include <stdexcept>
#include <tuple>

#include "memory.hpp"
#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/host_exchange.hpp"

namespace tessera::runtime {

namespace {

constexpr std::uint32_t kWordBytes = 4;

/// A codelet call with operands as word indices into its tile's held memory.
struct LoadedCall {
  Codelet codelet = Codelet::copy;
  std::array<std::uint32_t, kMaxCodeletOperands> operand{};
  std::array<std::uint32_t, kMaxCodeletParams> param{};
};

/// `words` words from one tile's memory to another's, in one exchange phase, as word indices
/// into the device's one held mapping (12 bytes: a phase can have millions).
struct WordCopy {
  std::uint32_t source = 0;
  std::uint32_t destination = 0;
  std::uint32_t words = 0;
};

/// The most words the device holds: WordCopy indexes them in 32 bits (16 GiB of tile memory).
constexpr std::uint64_t kMaxHeldWords = std::numeric_limits<std::uint32_t>::max();

struct LoadedSuperstep {
  std::vector<LoadedCall> calls;          ///< tile by tile, each in program order
  std::vector<std::uint32_t> first_call;  ///< tile t's calls are [first_call[t], first_call[t + 1])
  std::vector<WordCopy> copies;           ///< every received word, by receiver
  std::uint64_t copied_words = 0;
  SuperstepProfile profile;  ///< cycles are data-independent: known at load
};

/// Where a problem is, for messages: "superstep 2 ('layer0'), tile 5".
std::string place(std::uint32_t superstep, const std::string& label, std::uint32_t tile) {
  return label.empty() ? fmt::format("superstep {}, tile {}", superstep, tile)
                       : fmt::format("superstep {} ('{}'), tile {}", superstep, label, tile);
}

/// Refuses an exchange whose cycle plus words could wrap around (see kMaxExchangeCycle).
template <typename Where, typename What>
void check_cycle(std::uint64_t cycle, std::uint32_t words, Where&& where, What&& what) {
  if (cycle > kMaxExchangeCycle - words)
    throw Error(fmt::format("{}: {} ends past cycle {}; exchange cycles must stay below it", where(), what(),
                            kMaxExchangeCycle));
}

/// Words [begin_word, end_word) of a tile's address space, held from `held_word` of the
/// tile's held memory: one or more buffer-table entries that touch or overlap.
struct HeldRun {
  std::uint32_t begin_word = 0;
  std::uint32_t end_word = 0;
  std::uint32_t held_word = 0;
};

bool overlaps(std::uint32_t a, std::uint64_t a_words, std::uint32_t b, std::uint64_t b_words) {
  return a_words != 0 && b_words != 0 && a < b + b_words && b < a + a_words;
}

// --- Codelet kernels on float32 tile memory ------------------------------------------------

/// `count` halves packed from word `word` of tile memory, widened to float.
std::vector<float> read_halves(const float* memory, std::uint32_t word, std::size_t count) {
  std::vector<std::uint16_t> bits(count);
  std::memcpy(bits.data(), memory + word, count * sizeof(std::uint16_t));
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = half_to_float(bits[i]);
  return values;
}

/// c[m,n] = a[m,k] * b[k,n] summed in float32 in k order; c must not alias a or b.
void multiply(const float* __restrict a, const float* __restrict b, float* __restrict c, std::uint32_t m,
              std::uint32_t k, std::uint32_t n) {
  for (std::uint32_t i = 0; i < m; ++i) {
    float* __restrict row = c + static_cast<std::size_t>(i) * n;
    std::fill(row, row + n, 0.0f);
    for (std::uint32_t p = 0; p < k; ++p) {
      const float scale = a[static_cast<std::size_t>(i) * k + p];
      const float* __restrict b_row = b + static_cast<std::size_t>(p) * n;
      for (std::uint32_t j = 0; j < n; ++j) row[j] += scale * b_row[j];
    }
  }
}

/// Runs `product` (writing c [m, n]) into c, or into c^T [n, m] when the call leaves it so.
template <class Product>
void store_product(float* memory, const LoadedCall& call, Product&& product) {
  const std::uint32_t m = call.param[0], n = call.param[2];
  float* c = memory + call.operand[2];
  if (!matmul_leaves_transpose(call.param)) return product(c);
  thread_local std::vector<float> rows;  // reused across calls and runs: no allocation per call
  rows.resize(static_cast<std::size_t>(m) * n);
  product(rows.data());
  for (std::uint32_t i = 0; i < m; ++i)
    for (std::uint32_t j = 0; j < n; ++j)
      c[static_cast<std::size_t>(j) * m + i] = rows[static_cast<std::size_t>(i) * n + j];
}

void run_matmul(float* memory, const LoadedCall& call) {
  store_product(memory, call, [&](float* c) {
    multiply(memory + call.operand[0], memory + call.operand[1], c, call.param[0], call.param[1], call.param[2]);
  });
}

void run_transpose(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const float* __restrict in = memory + call.operand[0];
  float* __restrict out = memory + call.operand[1];
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
}

/// c[m,n] = a[m,k] * b[n,k]^T summed in float32 in k order; c must not alias a or b.
void multiply_transposed(const float* __restrict a, const float* __restrict b, float* __restrict c, std::uint32_t m,
                         std::uint32_t k, std::uint32_t n) {
  for (std::uint32_t i = 0; i < m; ++i)
    for (std::uint32_t j = 0; j < n; ++j) {
      const float* a_row = a + static_cast<std::size_t>(i) * k;
      const float* b_row = b + static_cast<std::size_t>(j) * k;
      float sum = 0.0f;
      for (std::uint32_t p = 0; p < k; ++p) sum += a_row[p] * b_row[p];
      c[static_cast<std::size_t>(i) * n + j] = sum;
    }
}

void run_matmul_transposed(float* memory, const LoadedCall& call) {
  store_product(memory, call, [&](float* c) {
    multiply_transposed(memory + call.operand[0], memory + call.operand[1], c, call.param[0], call.param[1],
                        call.param[2]);
  });
}

// Both operands as halves (a rounded on load), products exact in float32, float32 sums.
void run_matmul_half(float* memory, const LoadedCall& call) {
  const std::uint32_t m = call.param[0], k = call.param[1], n = call.param[2];
  const float* a = memory + call.operand[0];
  std::vector<float> a_half(a, a + static_cast<std::size_t>(m) * k);
  for (float& value : a_half) value = round_to_half(value);
  const std::vector<float> b = read_halves(memory, call.operand[1], static_cast<std::size_t>(k) * n);
  store_product(memory, call, [&](float* c) {
    if (matmul_b_is_n_by_k(Codelet::matmul_half, call.param[kMatmulOrientationParam]))
      multiply_transposed(a_half.data(), b.data(), c, m, k, n);
    else multiply(a_half.data(), b.data(), c, m, k, n);
  });
}

void run_bias_add_half(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const bool relu = call.param[2] != 0;
  float* values = memory + call.operand[0];
  const std::vector<float> bias = read_halves(memory, call.operand[1], cols);
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < cols; ++c) {
      float& value = values[static_cast<std::size_t>(r) * cols + c];
      value = relu ? std::max(value + bias[c], 0.0f) : value + bias[c];
    }
}

// Each row is read before its outputs are written at the same positions: in place is fine.
void run_softmax(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const float scale = param_float(call.param[2]);
  for (std::uint32_t r = 0; r < rows; ++r) {
    const float* in = memory + call.operand[0] + static_cast<std::size_t>(r) * cols;
    float* out = memory + call.operand[1] + static_cast<std::size_t>(r) * cols;
    float largest = -std::numeric_limits<float>::infinity();
    for (std::uint32_t c = 0; c < cols; ++c) largest = std::max(largest, scale * in[c]);
    float sum = 0.0f;
    for (std::uint32_t c = 0; c < cols; ++c) {
      out[c] = std::exp(scale * in[c] - largest);
      sum += out[c];
    }
    for (std::uint32_t c = 0; c < cols; ++c) out[c] /= sum;
  }
}

void run_layer_norm(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const float eps = param_float(call.param[2]);
  const float* gamma = memory + call.operand[1];
  const float* beta = memory + call.operand[2];
  for (std::uint32_t r = 0; r < rows; ++r) {
    const float* in = memory + call.operand[0] + static_cast<std::size_t>(r) * cols;
    float* out = memory + call.operand[3] + static_cast<std::size_t>(r) * cols;
    float sum = 0.0f;
    for (std::uint32_t c = 0; c < cols; ++c) sum += in[c];
    const float mean = sum / static_cast<float>(cols);
    float squares = 0.0f;
    for (std::uint32_t c = 0; c < cols; ++c) squares += (in[c] - mean) * (in[c] - mean);
    const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(cols) + eps);
    for (std::uint32_t c = 0; c < cols; ++c) out[c] = (in[c] - mean) * inverse * gamma[c] + beta[c];
  }
}

void run_reduce_add(float* memory, const LoadedCall& call) {
  const std::uint32_t parts = call.param[0], count = call.param[1];
  const float* in = memory + call.operand[0];
  float* out = memory + call.operand[1];
  // Blocks keep the accumulators in cache and let `out` alias one of the parts: a block
  // is written only after all its inputs were read.
  constexpr std::uint32_t kBlock = 256;
  std::array<float, kBlock> sum;
  for (std::uint32_t begin = 0; begin < count; begin += kBlock) {
    const std::uint32_t size = std::min(kBlock, count - begin);
    std::fill(sum.begin(), sum.begin() + size, 0.0f);
    for (std::uint32_t part = 0; part < parts; ++part) {
      const float* source = in + static_cast<std::size_t>(part) * count + begin;
      for (std::uint32_t i = 0; i < size; ++i) sum[i] += source[i];
    }
    std::copy(sum.begin(), sum.begin() + size, out + begin);
  }
}

void run_bias_add(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const bool relu = call.param[2] != 0;
  float* __restrict values = memory + call.operand[0];
  const float* __restrict bias = memory + call.operand[1];
  for (std::uint32_t r = 0; r < rows; ++r) {
    float* row = values + static_cast<std::size_t>(r) * cols;
    for (std::uint32_t c = 0; c < cols; ++c) {
      const float sum = row[c] + bias[c];
      row[c] = relu ? std::max(sum, 0.0f) : sum;
    }
  }
}

void run_relu(float* memory, const LoadedCall& call) {
  float* values = memory + call.operand[0];
  for (std::uint32_t i = 0; i < call.param[0]; ++i) values[i] = std::max(values[i], 0.0f);
}

void run_add(float* memory, const LoadedCall& call) {
  const float* a = memory + call.operand[0];
  const float* b = memory + call.operand[1];
  float* out = memory + call.operand[2];
  for (std::uint32_t i = 0; i < call.param[0]; ++i) out[i] = a[i] + b[i];
}

void run_copy(float* memory, const LoadedCall& call) {
  if (call.operand[0] == call.operand[1]) return;
  std::memcpy(memory + call.operand[1], memory + call.operand[0],
              static_cast<std::size_t>(call.param[0]) * sizeof(float));
}

void run_reduce_bias(float* memory, const LoadedCall& call) {
  const std::uint32_t parts = call.param[0], rows = call.param[1], cols = call.param[2];
  const std::uint32_t stride = call.param[3];
  const bool relu = call.param[4] != 0;
  const float* __restrict in = memory + call.operand[0];
  const float* __restrict own = memory + call.operand[1];
  const float* __restrict bias = memory + call.operand[2];
  float* __restrict out = memory + call.operand[3];
  const std::size_t block = static_cast<std::size_t>(rows) * cols;
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < cols; ++c) {
      float sum = own[static_cast<std::size_t>(r) * stride + c];
      for (std::uint32_t p = 0; p < parts; ++p) sum += in[p * block + static_cast<std::size_t>(r) * cols + c];
      sum += bias[c];
      out[static_cast<std::size_t>(r) * cols + c] = relu ? std::max(sum, 0.0f) : sum;
    }
}

// Exact in place is allowed: each element is read before it is written.
void run_unary(float* memory, const LoadedCall& call) {
  const float* in = memory + call.operand[0];
  float* out = memory + call.operand[1];
  const float exponent = param_float(call.param[2]);
  const auto function = static_cast<UnaryFunction>(call.param[1]);
  for (std::uint32_t i = 0; i < call.param[0]; ++i) {
    const float x = in[i];
    switch (function) {
      case UnaryFunction::sigmoid:
        out[i] = 1.0f / (1.0f + std::exp(-x));
        break;
      case UnaryFunction::tanh:
        out[i] = std::tanh(x);
        break;
      case UnaryFunction::erf:
        out[i] = std::erf(x);
        break;
      case UnaryFunction::sqrt:
        out[i] = std::sqrt(x);
        break;
      case UnaryFunction::pow:
        out[i] = std::pow(x, exponent);
        break;
      case UnaryFunction::exp:
        out[i] = std::exp(x);
        break;
      case UnaryFunction::log:
        out[i] = std::log(x);
        break;
      case UnaryFunction::neg:
        out[i] = -x;
        break;
      case UnaryFunction::abs:
        out[i] = std::fabs(x);
        break;
      case UnaryFunction::reciprocal:
        out[i] = 1.0f / x;
        break;
      case UnaryFunction::floor:
        out[i] = std::floor(x);
        break;
      case UnaryFunction::ceil:
        out[i] = std::ceil(x);
        break;
      case UnaryFunction::round:
        out[i] = std::nearbyint(x);  // the default rounding mode: to nearest, ties to even
        break;
      case UnaryFunction::sign:
        out[i] = static_cast<float>((x > 0.0f) - (x < 0.0f));
        break;
      case UnaryFunction::sin:
        out[i] = std::sin(x);
        break;
      case UnaryFunction::cos:
        out[i] = std::cos(x);
        break;
      case UnaryFunction::softplus:
        out[i] = std::log(1.0f + std::exp(x));
        break;
      case UnaryFunction::softsign:
        out[i] = x / (1.0f + std::fabs(x));
        break;
      case UnaryFunction::elu:  // the parameter is alpha
        out[i] = x < 0.0f ? exponent * std::expm1(x) : x;
        break;
      case UnaryFunction::celu:
        out[i] = std::max(x, 0.0f) + std::min(exponent * std::expm1(x / exponent), 0.0f);
        break;
      case UnaryFunction::thresholded_relu:
        out[i] = x > exponent ? x : 0.0f;
        break;
      case UnaryFunction::mish:
        out[i] = x * std::tanh(std::log(1.0f + std::exp(x)));
        break;
      case UnaryFunction::logical_not:
        out[i] = int_word(word_int(x) == 0 ? 1 : 0);
        break;
      case UnaryFunction::tan:
        out[i] = std::tan(x);
        break;
      case UnaryFunction::asin:
        out[i] = std::asin(x);
        break;
      case UnaryFunction::acos:
        out[i] = std::acos(x);
        break;
      case UnaryFunction::atan:
        out[i] = std::atan(x);
        break;
      case UnaryFunction::sinh:
        out[i] = std::sinh(x);
        break;
      case UnaryFunction::cosh:
        out[i] = std::cosh(x);
        break;
      case UnaryFunction::asinh:
        out[i] = std::asinh(x);
        break;
      case UnaryFunction::acosh:
        out[i] = std::acosh(x);
        break;
      case UnaryFunction::atanh:
        out[i] = std::atanh(x);
        break;
      case UnaryFunction::is_inf: {  // the parameter's bit 1 detects +inf, bit 2 -inf
        const auto detect = static_cast<int>(exponent);
        out[i] = int_word(std::isinf(x) && (x > 0 ? (detect & 1) != 0 : (detect & 2) != 0) ? 1 : 0);
        break;
      }
      case UnaryFunction::is_nan:
        out[i] = int_word(std::isnan(x) ? 1 : 0);
        break;
    }
  }
}

/// int32 arithmetic as the machine does it: two's complement wrap-around (in 64 bits, then cut).
float wrapped(std::int64_t value) { return int_word(static_cast<std::int32_t>(static_cast<std::uint32_t>(value))); }

float apply(BinaryFunction function, float a, float b) {
  const std::int64_t i = word_int(a), j = word_int(b);
  auto flag = [](bool value) { return int_word(value ? 1 : 0); };
  switch (function) {
    case BinaryFunction::subtract:
      return a - b;
    case BinaryFunction::multiply:
      return a * b;
    case BinaryFunction::divide:
      return a / b;
    case BinaryFunction::add:
      return a + b;
    case BinaryFunction::max:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, b);
    case BinaryFunction::min:
      return std::isnan(a) || std::isnan(b) ? std::numeric_limits<float>::quiet_NaN() : std::min(a, b);
    case BinaryFunction::prelu:
      return a < 0.0f ? a * b : a;
    case BinaryFunction::equal:
      return flag(a == b);
    case BinaryFunction::less:
      return flag(a < b);
    case BinaryFunction::less_or_equal:
      return flag(a <= b);
    case BinaryFunction::greater:
      return flag(a > b);
    case BinaryFunction::greater_or_equal:
      return flag(a >= b);
    case BinaryFunction::int_add:
      return wrapped(i + j);
    case BinaryFunction::int_subtract:
      return wrapped(i - j);
    case BinaryFunction::int_multiply:
      return wrapped(i * j);
    case BinaryFunction::int_divide:  // truncates toward zero; by zero gives 0 (the reference refuses it)
      return wrapped(j == 0 ? 0 : i / j);
    case BinaryFunction::int_equal:
      return flag(i == j);
    case BinaryFunction::int_less:
      return flag(i < j);
    case BinaryFunction::int_less_or_equal:
      return flag(i <= j);
    case BinaryFunction::int_greater:
      return flag(i > j);
    case BinaryFunction::int_greater_or_equal:
      return flag(i >= j);
    case BinaryFunction::logical_and:
      return flag(i != 0 && j != 0);
    case BinaryFunction::logical_or:
      return flag(i != 0 || j != 0);
    case BinaryFunction::logical_xor:
      return flag((i != 0) != (j != 0));
    case BinaryFunction::int_max:
      return int_word(static_cast<std::int32_t>(std::max(i, j)));
    case BinaryFunction::int_min:
      return int_word(static_cast<std::int32_t>(std::min(i, j)));
    case BinaryFunction::power:
      return std::pow(a, b);
    case BinaryFunction::remainder:
      return std::fmod(a, b);
    case BinaryFunction::int_remainder:  // by zero gives 0 (the reference refuses it)
      return wrapped(j == 0 ? 0 : i % j);
    case BinaryFunction::int_modulo: {
      const std::int64_t r = j == 0 ? 0 : i % j;
      return wrapped(r != 0 && (r < 0) != (j < 0) ? r + j : r);
    }
  }
  return a;  // unreachable: the function is checked at load
}

void run_binary(float* memory, const LoadedCall& call) {
  const float* a = memory + call.operand[0];
  const float* b = memory + call.operand[1];
  float* out = memory + call.operand[2];
  const auto function = static_cast<BinaryFunction>(call.param[1]);
  for (std::uint32_t i = 0; i < call.param[0]; ++i) out[i] = apply(function, a[i], b[i]);
}

// binary_row and binary_column: values[r, c] op= operand[c] (a row) or operand[r] (a column).
void run_binary_broadcast(float* memory, const LoadedCall& call, bool column) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  float* __restrict values = memory + call.operand[0];
  const float* __restrict operand = memory + call.operand[1];
  const auto function = static_cast<BinaryFunction>(call.param[2]);
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < cols; ++c) {
      float& value = values[static_cast<std::size_t>(r) * cols + c];
      value = apply(function, value, operand[column ? r : c]);
    }
}

void run_reduce_rows(float* memory, const LoadedCall& call) {
  const std::uint32_t rows = call.param[0], cols = call.param[1];
  const float* __restrict in = memory + call.operand[0];
  float* __restrict out = memory + call.operand[1];
  const auto function = static_cast<ReduceFunction>(call.param[2]);
  for (std::uint32_t r = 0; r < rows; ++r) {
    const float* row = in + static_cast<std::size_t>(r) * cols;
    float folded = function == ReduceFunction::prod ? 1.0f : 0.0f;
    if (function == ReduceFunction::max || function == ReduceFunction::min || function == ReduceFunction::log_sum_exp)
      folded = cols > 0 ? row[0] : 0.0f;
    // log_sum_exp folds the max first so that no exponential overflows.
    for (std::uint32_t c = 0; c < cols; ++c) {
      const float x = row[c];
      switch (function) {
        case ReduceFunction::max:
        case ReduceFunction::log_sum_exp:
          folded = std::isnan(x) || x > folded ? x : folded;
          break;
        case ReduceFunction::min:
          folded = std::isnan(x) || x < folded ? x : folded;
          break;
        case ReduceFunction::prod:
          folded *= x;
          break;
        case ReduceFunction::l1:
          folded += std::fabs(x);
          break;
        case ReduceFunction::l2:
        case ReduceFunction::sum_square:
          folded += x * x;
          break;
        default:
          folded += x;
      }
    }
    if (function == ReduceFunction::log_sum_exp) {
      float sum = 0.0f;
      for (std::uint32_t c = 0; c < cols; ++c) sum += std::exp(row[c] - folded);
      folded += std::log(sum);
    }
    if (function == ReduceFunction::mean) folded /= static_cast<float>(cols);
    if (function == ReduceFunction::l2) folded = std::sqrt(folded);
    out[r] = folded;
  }
}

/// The patch position a kernel tap reads, or -1 where it falls in the padding.
/// `before` is a signed count (a patch may start below output row 0's first tap).
inline std::int64_t patch_index(std::uint32_t out, std::uint32_t stride, std::uint32_t tap, std::uint32_t dilation,
                                std::uint32_t before, std::uint32_t size) {
  const std::int64_t at = std::int64_t{out} * stride + std::int64_t{tap} * dilation - static_cast<std::int32_t>(before);
  return at >= 0 && at < size ? at : -1;
}

// Sums in float32 in kernel row, kernel column, input channel order (the reference's order).
void run_conv(float* memory, const LoadedCall& call) {
  const auto& p = call.param;
  const float* __restrict in = memory + call.operand[0];
  const float* __restrict weights = memory + call.operand[1];
  const float* __restrict bias = memory + call.operand[2];
  float* __restrict out = memory + call.operand[3];
  const std::uint32_t channels = p[kConvInChannels], outs = p[kConvOutChannels];
  const std::uint32_t group_in = p[kConvGroupInChannels], group_out = p[kConvGroupOutChannels];
  const bool relu = (p[kConvFlags] & kConvRelu) != 0, has_bias = (p[kConvFlags] & kConvHasBias) != 0;
  for (std::uint32_t r = 0; r < p[kConvOutRows]; ++r)
    for (std::uint32_t c = 0; c < p[kConvOutWidth]; ++c) {
      float* pixel = out + (static_cast<std::size_t>(r) * p[kConvOutWidth] + c) * outs;
      std::fill(pixel, pixel + outs, 0.0f);
      for (std::uint32_t i = 0; i < p[kConvKernelH]; ++i) {
        const std::int64_t row = patch_index(r, p[kConvStrideH], i, p[kConvDilationH], p[kConvTop], p[kConvInRows]);
        if (row < 0) continue;
        for (std::uint32_t j = 0; j < p[kConvKernelW]; ++j) {
          const std::int64_t col = patch_index(c, p[kConvStrideW], j, p[kConvDilationW], p[kConvLeft], p[kConvInWidth]);
          if (col < 0) continue;
          const float* taps = in + (static_cast<std::size_t>(row) * p[kConvInWidth] + col) * channels;
          const float* tap_weights = weights + (static_cast<std::size_t>(i) * p[kConvKernelW] + j) * group_in * outs;
          for (std::uint32_t o = 0; o < outs; ++o) {
            const float* group_taps =
                taps + static_cast<std::size_t>((o + p[kConvFirstOutChannel]) / group_out) * group_in;
            float sum = pixel[o];
            for (std::uint32_t k = 0; k < group_in; ++k)
              sum += group_taps[k] * tap_weights[static_cast<std::size_t>(k) * outs + o];
            pixel[o] = sum;
          }
        }
      }
      for (std::uint32_t o = 0; o < outs; ++o) {
        float value = has_bias ? pixel[o] + bias[o] : pixel[o];
        pixel[o] = relu ? std::max(value, 0.0f) : value;
      }
    }
}

void run_pool(float* memory, const LoadedCall& call) {
  const auto& p = call.param;
  const float* __restrict in = memory + call.operand[0];
  float* __restrict out = memory + call.operand[1];
  const std::uint32_t channels = p[kPoolChannels];
  const auto mode = static_cast<PoolMode>(p[kPoolMode]);
  thread_local std::vector<float> accumulator;
  accumulator.resize(channels);
  for (std::uint32_t r = 0; r < p[kPoolOutRows]; ++r)
    for (std::uint32_t c = 0; c < p[kPoolOutWidth]; ++c) {
      std::fill(accumulator.begin(), accumulator.end(),
                mode == PoolMode::max ? -std::numeric_limits<float>::infinity() : 0.0f);
      std::uint32_t count = 0;
      for (std::uint32_t i = 0; i < p[kPoolKernelH]; ++i) {
        const std::int64_t row = patch_index(r, p[kPoolStrideH], i, p[kPoolDilationH], p[kPoolTop], p[kPoolInRows]);
        if (row < 0) continue;
        for (std::uint32_t j = 0; j < p[kPoolKernelW]; ++j) {
          const std::int64_t col = patch_index(c, p[kPoolStrideW], j, p[kPoolDilationW], p[kPoolLeft], p[kPoolInWidth]);
          if (col < 0) continue;
          ++count;
          const float* taps = in + (static_cast<std::size_t>(row) * p[kPoolInWidth] + col) * channels;
          for (std::uint32_t k = 0; k < channels; ++k)
            accumulator[k] = mode == PoolMode::max ? std::max(accumulator[k], taps[k]) : accumulator[k] + taps[k];
        }
      }
      float* pixel = out + (static_cast<std::size_t>(r) * p[kPoolOutWidth] + c) * channels;
      const float divisor = mode == PoolMode::average_with_padding
                                ? static_cast<float>(p[kPoolKernelH] * p[kPoolKernelW])
                                : static_cast<float>(count);
      for (std::uint32_t k = 0; k < channels; ++k)
        pixel[k] = mode == PoolMode::max ? accumulator[k] : (count == 0 ? 0.0f : accumulator[k] / divisor);
    }
}

// Exact in place is allowed: each element is read before it is written.
void run_clip(float* memory, const LoadedCall& call) {
  const float* in = memory + call.operand[0];
  float* out = memory + call.operand[1];
  const float low = param_float(call.param[1]), high = param_float(call.param[2]);
  for (std::uint32_t i = 0; i < call.param[0]; ++i) out[i] = std::min(std::max(in[i], low), high);
}

/// A float32 to int32 conversion as ONNX's Cast (truncation), saturating where the value is out
/// of range and giving 0 for NaN, so every input has a defined result.
std::int32_t float_to_int32(float value) {
  if (std::isnan(value)) return 0;
  if (value >= 2147483648.0f) return std::numeric_limits<std::int32_t>::max();
  if (value <= -2147483648.0f) return std::numeric_limits<std::int32_t>::min();
  return static_cast<std::int32_t>(value);
}

// Exact in place is allowed: each element is read before it is written.
void run_cast(float* memory, const LoadedCall& call) {
  const float* in = memory + call.operand[0];
  float* out = memory + call.operand[1];
  const auto from = static_cast<DType>(call.param[1]), to = static_cast<DType>(call.param[2]);
  for (std::uint32_t i = 0; i < call.param[0]; ++i) {
    const float x = in[i];
    const std::int32_t whole = from == DType::float32 ? float_to_int32(x) : word_int(x);
    const bool truth = from == DType::float32 ? x != 0.0f : word_int(x) != 0;  // NaN is true, as numpy's bool()
    if (to == DType::float32) out[i] = from == DType::float32 ? x : static_cast<float>(word_int(x));
    else if (to == DType::int32) out[i] = int_word(whole);
    else out[i] = int_word(truth ? 1 : 0);
  }
}

// Exact in place (out equal to a or b) is allowed.
void run_select(float* memory, const LoadedCall& call) {
  const float* condition = memory + call.operand[0];
  const float* a = memory + call.operand[1];
  const float* b = memory + call.operand[2];
  float* out = memory + call.operand[3];
  for (std::uint32_t i = 0; i < call.param[0]; ++i) out[i] = word_int(condition[i]) != 0 ? a[i] : b[i];
}

// Indices are int32 words; the arithmetic is 64-bit, so no index or offset wraps.
void run_multi_slice(float* memory, const LoadedCall& call) {
  const float* table = memory + call.operand[0];
  const float* indices = memory + call.operand[1];
  float* out = memory + call.operand[2];
  const std::uint32_t rows = call.param[0], cols = call.param[1], count = call.param[2];
  const std::int64_t row_begin = call.param[3], table_rows = call.param[4];
  for (std::uint32_t t = 0; t < count; ++t) {
    std::int64_t index = word_int(indices[t]);
    if (index < 0) index += table_rows;
    const std::int64_t row = index - row_begin;
    float* out_row = out + std::uint64_t{t} * cols;
    if (index < 0 || index >= table_rows || row < 0 || row >= rows) std::fill(out_row, out_row + cols, 0.0f);
    else std::copy_n(table + static_cast<std::uint64_t>(row) * cols, cols, out_row);
  }
}

void run_call(float* memory, const LoadedCall& call) {
  switch (call.codelet) {
    case Codelet::matmul:
      return run_matmul(memory, call);
    case Codelet::reduce_add:
      return run_reduce_add(memory, call);
    case Codelet::bias_add:
      return run_bias_add(memory, call);
    case Codelet::relu:
      return run_relu(memory, call);
    case Codelet::add:
      return run_add(memory, call);
    case Codelet::copy:
      return run_copy(memory, call);
    case Codelet::reduce_bias:
      return run_reduce_bias(memory, call);
    case Codelet::matmul_transposed:
      return run_matmul_transposed(memory, call);
    case Codelet::matmul_half:
      return run_matmul_half(memory, call);
    case Codelet::bias_add_half:
      return run_bias_add_half(memory, call);
    case Codelet::softmax:
      return run_softmax(memory, call);
    case Codelet::layer_norm:
      return run_layer_norm(memory, call);
    case Codelet::unary:
      return run_unary(memory, call);
    case Codelet::binary:
      return run_binary(memory, call);
    case Codelet::binary_row:
    case Codelet::binary_column:
      return run_binary_broadcast(memory, call, call.codelet == Codelet::binary_column);
    case Codelet::reduce_rows:
      return run_reduce_rows(memory, call);
    case Codelet::transpose:
      return run_transpose(memory, call);
    case Codelet::conv:
      return run_conv(memory, call);
    case Codelet::pool:
      return run_pool(memory, call);
    case Codelet::clip:
      return run_clip(memory, call);
    case Codelet::cast:
      return run_cast(memory, call);
    case Codelet::select:
      return run_select(memory, call);
    case Codelet::multi_slice:
      return run_multi_slice(memory, call);
  }
  assert(false && "codelet checked at load");
}

/// Which operand overlaps a codelet may have. A real tile's vectorised loops give garbage
/// on any other overlap, so the simulator refuses it rather than compute something the
/// hardware would not.
std::string aliasing_problem(const LoadedCall& call, std::span<const std::uint64_t> words) {
  const auto& o = call.operand;
  auto same = [&](int x, int y) { return o[x] == o[y] && words[x] == words[y]; };
  switch (call.codelet) {
    case Codelet::matmul:
    case Codelet::matmul_transposed:
    case Codelet::matmul_half:
      if (overlaps(o[2], words[2], o[0], words[0]) || overlaps(o[2], words[2], o[1], words[1]))
        return "its output c overlaps an input (matmul cannot run in place)";
      return "";
    case Codelet::softmax:
      if (overlaps(o[1], words[1], o[0], words[0]) && !same(1, 0))
        return "its output partly overlaps its input (only exact in-place is allowed)";
      return "";
    case Codelet::layer_norm:
      if (overlaps(o[3], words[3], o[0], words[0]) && !same(3, 0))
        return "its output partly overlaps its input (only exact in-place is allowed)";
      if (overlaps(o[3], words[3], o[1], words[1]) || overlaps(o[3], words[3], o[2], words[2]))
        return "its output overlaps gamma or beta";
      return "";
    case Codelet::reduce_add: {
      if (!overlaps(o[1], words[1], o[0], words[0])) return "";
      const std::uint32_t count = call.param[1];
      // out may be exactly one of the parts: each block is read before it is written.
      if (count != 0 && o[1] >= o[0] && (o[1] - o[0]) % count == 0) return "";
      return "its output overlaps its input other than exactly on one part";
    }
    case Codelet::bias_add:
    case Codelet::bias_add_half:
      if (overlaps(o[0], words[0], o[1], words[1])) return "the bias overlaps the values";
      return "";
    case Codelet::relu:
      return "";
    case Codelet::unary:
    case Codelet::clip:
    case Codelet::cast:
      if (overlaps(o[1], words[1], o[0], words[0]) && !same(1, 0))
        return "its output partly overlaps its input (only exact in-place is allowed)";
      return "";
    case Codelet::binary_row:
      if (overlaps(o[0], words[0], o[1], words[1])) return "the row overlaps the values";
      return "";
    case Codelet::binary_column:
      if (overlaps(o[0], words[0], o[1], words[1])) return "the column overlaps the values";
      return "";
    case Codelet::reduce_rows:
    case Codelet::transpose:
      if (overlaps(o[1], words[1], o[0], words[0])) return "its output overlaps its input";
      return "";
    case Codelet::binary:
    case Codelet::add:
      if ((overlaps(o[2], words[2], o[0], words[0]) && !same(2, 0)) ||
          (overlaps(o[2], words[2], o[1], words[1]) && !same(2, 1)))
        return "its output partly overlaps an input (only exact in-place is allowed)";
      return "";
    case Codelet::copy:
      if (overlaps(o[1], words[1], o[0], words[0]) && !same(1, 0)) return "its output partly overlaps its input";
      return "";
    case Codelet::reduce_bias:
    case Codelet::conv:
      for (int input = 0; input < 3; ++input)
        if (overlaps(o[3], words[3], o[input], words[input])) return "its output overlaps an input";
      return "";
    case Codelet::pool:
      if (overlaps(o[1], words[1], o[0], words[0])) return "its output overlaps its input";
      return "";
    case Codelet::select:
      for (int input = 0; input < 3; ++input)
        if (overlaps(o[3], words[3], o[input], words[input]) && !same(3, input))
          return "its output partly overlaps an input (only exact in-place is allowed)";
      return "";
    case Codelet::multi_slice:
      for (int input = 0; input < 2; ++input)
        if (overlaps(o[2], words[2], o[input], words[input])) return "its output overlaps an input";
      return "";
  }
  return "";
}

/// A send checked and numbered among the phase's sent words.
struct LoadedSend {
  std::uint64_t cycle = 0;
  std::uint32_t word = 0;  ///< in the tile's held memory
  std::uint32_t words = 0;
  std::uint64_t first_sent = 0;  ///< number of its first word among the phase's sent words
  std::uint32_t address = 0;     ///< the byte address the package gave, for messages
};

struct LoadedReceive {
  std::uint64_t arrival = 0;
  std::uint32_t sender = 0;
  std::uint32_t word = 0;  ///< in the tile's held memory
  std::uint32_t words = 0;
  std::uint32_t address = 0;  ///< the byte address the package gave, for messages
};

/// Sent words [first_sent, first_sent + words) of a phase, stored by `receiver` from `arrival`.
struct ReceivedRun {
  std::uint64_t first_sent = 0;
  std::uint32_t words = 0;
  std::uint32_t receiver = 0;
  std::uint64_t arrival = 0;
  std::uint32_t sender = 0;
  std::uint64_t sent = 0;  ///< the cycle its first word left the sender
};

/// How many of a phase's sent words some receiver stored. Without multicast a word has at most
/// one receiver: a word two runs share is refused, naming the receiver met later (by tile, then
/// arrival) and the other one.
std::uint64_t received_sent_words(std::vector<ReceivedRun>& received, const Target& target, std::uint32_t step,
                                  const std::string& label) {
  std::sort(received.begin(), received.end(),
            [](const ReceivedRun& a, const ReceivedRun& b) { return a.first_sent < b.first_sent; });
  std::uint64_t covered = 0, covered_to = 0;
  const ReceivedRun* reaching = nullptr;  // the run that reaches covered_to
  for (const ReceivedRun& run : received) {
    if (run.first_sent < covered_to && !target.multicast) {
      const bool run_later = std::tie(run.receiver, run.arrival) > std::tie(reaching->receiver, reaching->arrival);
      const ReceivedRun& later = run_later ? run : *reaching;
      const ReceivedRun& earlier = run_later ? *reaching : run;
      const std::uint64_t offset = run.first_sent - later.first_sent;  // of the first shared word
      throw Error(
          fmt::format("{}, cycle {}: conflict: the word tile {} sends at cycle {} is received by "
                      "this tile and tile {}, but target '{}' has no multicast",
                      place(step, label, later.receiver), later.arrival + offset, later.sender, later.sent + offset,
                      earlier.receiver, target.name));
    }
    const std::uint64_t end = run.first_sent + run.words;
    if (end <= covered_to) continue;
    covered += end - std::max(run.first_sent, covered_to);
    covered_to = end;
    reaching = &run;
  }
  return covered;
}

/// No code runs between two receives of one phase, so a word a tile stores twice would only
/// lose its first value: refused, which also bounds a phase's received words by tile memory.
template <typename Where>
void check_stored_once(std::vector<LoadedReceive> receives, Where&& where) {
  std::sort(receives.begin(), receives.end(),
            [](const LoadedReceive& a, const LoadedReceive& b) { return a.word < b.word; });
  const LoadedReceive* reaching = nullptr;  // of those before, the one ending last
  for (const LoadedReceive& r : receives) {
    if (reaching != nullptr && r.word < reaching->word + reaching->words)
      throw Error(
          fmt::format("{}, cycle {}: the tile stores byte address {} twice in one phase "
                      "(the receive of {} words from tile {} overlaps the receive of {} "
                      "words from tile {} at byte {}, cycle {}); a phase writes each word "
                      "at most once",
                      where(), r.arrival, r.address, r.words, r.sender, reaching->words, reaching->sender,
                      reaching->address, reaching->arrival));
    if (reaching == nullptr || r.word + r.words > reaching->word + reaching->words) reaching = &r;
  }
}

/// A host stream and, per slice, the word of its tile's held memory where the block starts.
struct LoadedStream {
  PackageStream stream;
  std::vector<std::uint32_t> slice_words;
};

/// The send of `sends` (sorted, disjoint) that covers `cycle`, or null.
const LoadedSend* send_at(const std::vector<LoadedSend>& sends, std::uint64_t cycle) {
  auto after = std::upper_bound(sends.begin(), sends.end(), cycle,
                                [](std::uint64_t c, const LoadedSend& s) { return c < s.cycle; });
  if (after == sends.begin()) return nullptr;
  const LoadedSend& candidate = *(after - 1);
  return cycle < candidate.cycle + candidate.words ? &candidate : nullptr;
}

}  // namespace

// Tile memory holds only the bytes the buffer tables cover: each tile's entries, merged where
// they touch or overlap, packed one after another, all tiles in one zeroed mapping. Gaps
// between buffers cost nothing, so the host holds the device's bytes once.
struct SimDevice::Impl {
  Target target;
  std::uint32_t tile_count = 0;
  std::vector<std::uint64_t> tile_bytes;  ///< each tile's highest buffer-table byte: the first bound
  std::vector<HeldRun> runs;              ///< every tile's held runs, tile by tile, by address
  std::vector<std::uint32_t> first_run;   ///< tile t's runs are [first_run[t], first_run[t + 1])
  std::vector<std::uint64_t> first_word;  ///< tile t's held words are [first_word[t], first_word[t + 1])
  detail::ZeroedFloats memory;
  std::vector<LoadedSuperstep> supersteps;
  std::vector<LoadedStream> streams;
  CycleCounts cycles;

  float* tile_memory(std::uint32_t tile) const { return memory.data() + first_word[tile]; }
  std::uint64_t held_bytes(std::uint32_t tile) const { return (first_word[tile + 1] - first_word[tile]) * kWordBytes; }

  /// The held word where `words` words from byte `address` of `tile` start; refuses ranges
  /// that are unaligned, end past the buffer table or are not inside one run of buffers.
  /// `where` and `what` make the message's place and subject, so the common case formats nothing.
  template <typename Where, typename What>
  std::uint32_t checked_word(std::uint32_t tile, std::uint64_t address, std::uint64_t words, Where&& where,
                             What&& what) const {
    if (address % kWordBytes != 0)
      throw Error(
          fmt::format("{}: {} at byte address {} is not 4-byte aligned (data is float32 "
                      "words); the emitter must place buffers on word boundaries",
                      where(), what(), address));
    // In 128 bits: forged counts up to 2^64 words must not wrap to a small end.
    const unsigned __int128 end = address + static_cast<unsigned __int128>(words) * kWordBytes;
    if (!words_fit(address, words, tile_bytes[tile]))
      throw Error(
          fmt::format("{}: {} covers bytes [{}, {}) but the tile's buffer table ends at "
                      "byte {}; every operand must lie inside the tile's buffers",
                      where(), what(), address, end, tile_bytes[tile]));
    const auto word = static_cast<std::uint32_t>(address / kWordBytes);
    const HeldRun* begin = runs.data() + first_run[tile];
    const HeldRun* run = std::upper_bound(begin, runs.data() + first_run[tile + 1], word,
                                          [](std::uint32_t w, const HeldRun& r) { return w < r.begin_word; });
    if (run == begin || word + words > (--run)->end_word)
      throw Error(
          fmt::format("{}: {} covers bytes [{}, {}), which no buffer-table entry (or run "
                      "of adjacent entries) holds; every operand must lie inside the "
                      "tile's buffers",
                      where(), what(), address, end));
    return run->held_word + (word - run->begin_word);
  }

  void load_tiles(const Package& package);
  void load_compute(const Package& package, std::uint32_t step, LoadedSuperstep& loaded);
  void load_exchange(const Package& package, std::uint32_t step, LoadedSuperstep& loaded);
  void load_streams(const Package& package);
  void write_streams(StreamKind kind, const HostTensors& values);
  HostTensors read_outputs() const;
  void exchange(const LoadedSuperstep& step, std::vector<float>& staging);
};

void SimDevice::Impl::load_tiles(const Package& package) {
  const Target& t = package.target;
  if (package.codelet_set_version != kCodeletSetVersion)
    throw Error(
        fmt::format("package uses codelet set version {} but this simulator implements "
                    "version {}; rebuild the package with this compiler",
                    package.codelet_set_version, kCodeletSetVersion));
  if (t.tiles == 0 || package.tiles.size() != t.tiles)
    throw Error(fmt::format("package has {} tile images but its target '{}' has {} tiles", package.tiles.size(), t.name,
                            t.tiles));
  if (t.exchange_word_bytes != kWordBytes)
    throw Error(
        fmt::format("target '{}' has {}-byte exchange words; the simulator moves "
                    "32-bit words",
                    t.name, t.exchange_word_bytes));
  tile_count = t.tiles;
  const std::size_t step_count = package.tiles.front().supersteps.size();
  if (!package.superstep_labels.empty() && package.superstep_labels.size() != step_count)
    throw Error(fmt::format("package has {} superstep labels but tile 0 has {} supersteps",
                            package.superstep_labels.size(), step_count));

  tile_bytes.assign(tile_count, 0);
  first_run.assign(1, 0);
  first_word.assign(1, 0);
  std::vector<HeldRun> entries;  // one tile's entries as word ranges, reused
  for (std::uint32_t index = 0; index < tile_count; ++index) {
    const TileImage& image = package.tiles[index];
    if (image.tile != index)
      throw Error(fmt::format("tile image {} says it is for tile {}; images must be in tile order", index, image.tile));
    if (image.supersteps.size() != step_count)
      throw Error(
          fmt::format("tile {} has {} supersteps but tile 0 has {}; every tile runs "
                      "the same supersteps",
                      index, image.supersteps.size(), step_count));
    std::uint64_t extent = 0;
    for (std::size_t b = 0; b < image.buffers.size(); ++b) {
      const TileBufferEntry& entry = image.buffers[b];
      const std::uint64_t end = static_cast<std::uint64_t>(entry.offset) + entry.bytes;
      if (end > t.memory_bytes)
        throw Error(
            fmt::format("tile {} buffer-table entry {} covers bytes [{}, {}) past the "
                        "tile's {} bytes of memory (target '{}')",
                        index, b, entry.offset, end, t.memory_bytes, t.name));
      if (entry.region == Region::interleaved && entry.bytes != 0 && entry.offset < t.interleaved_start)
        throw Error(
            fmt::format("tile {} buffer-table entry {} is marked interleaved but starts at "
                        "byte {}, below the interleaved region at {} (target '{}')",
                        index, b, entry.offset, t.interleaved_start, t.name));
      extent = std::max(extent, end);
      if (entry.bytes != 0)
        entries.push_back(
            {entry.offset / kWordBytes, static_cast<std::uint32_t>((end + kWordBytes - 1) / kWordBytes), 0});
    }
    tile_bytes[index] = extent;
    std::sort(entries.begin(), entries.end(),
              [](const HeldRun& a, const HeldRun& b) { return a.begin_word < b.begin_word; });
    std::uint64_t held = 0;
    for (const HeldRun& entry : entries) {
      if (runs.size() > first_run.back() && entry.begin_word <= runs.back().end_word) {
        const std::uint32_t end_word = std::max(runs.back().end_word, entry.end_word);
        held += end_word - runs.back().end_word;
        runs.back().end_word = end_word;
        continue;
      }
      runs.push_back({entry.begin_word, entry.end_word, static_cast<std::uint32_t>(held)});
      held += entry.end_word - entry.begin_word;
    }
    entries.clear();
    first_run.push_back(static_cast<std::uint32_t>(runs.size()));
    first_word.push_back(first_word.back() + held);
  }
  if (first_word.back() > kMaxHeldWords)
    throw Error(fmt::format("the package's tiles hold {} bytes of buffers; the simulator holds at most {} bytes",
                            first_word.back() * kWordBytes, kMaxHeldWords * kWordBytes));
  memory = detail::ZeroedFloats(first_word.back());
}

void SimDevice::Impl::load_compute(const Package& package, std::uint32_t step, LoadedSuperstep& loaded) {
  const std::string& label = loaded.profile.label;
  loaded.first_call.assign(1, 0);
  loaded.profile.tile_compute_cycles.assign(tile_count, 0);
  for (std::uint32_t tile = 0; tile < tile_count; ++tile) {
    const auto& calls = package.tiles[tile].supersteps[step].compute;
    std::uint64_t tile_cycles = 0;
    for (std::size_t index = 0; index < calls.size(); ++index) {
      const TileCodeletCall& call = calls[index];
      auto where = [&] { return fmt::format("{}, call {}", place(step, label, tile), index); };
      const auto id = static_cast<std::uint32_t>(call.codelet);
      if (id >= kCodeletCount)
        throw Error(fmt::format("{}: unknown codelet id {} (codelet set version {} has {})", where(), id,
                                kCodeletSetVersion, kCodeletCount));
      const char* name = codelet_name(call.codelet);
      if (call.addresses.size() != codelet_operand_count(call.codelet) ||
          call.params.size() != codelet_param_count(call.codelet))
        throw Error(fmt::format("{}: {} takes {} operands and {} params, got {} and {}", where(), name,
                                codelet_operand_count(call.codelet), codelet_param_count(call.codelet),
                                call.addresses.size(), call.params.size()));
      if ((call.codelet == Codelet::bias_add || call.codelet == Codelet::bias_add_half) && call.params[2] > 1)
        throw Error(fmt::format("{}: bias_add's relu flag must be 0 or 1, got {}", where(), call.params[2]));
      if (call.codelet == Codelet::unary && call.params[1] >= kUnaryFunctionCount)
        throw Error(
            fmt::format("{}: unary's function must be below {}, got {}", where(), kUnaryFunctionCount, call.params[1]));
      if ((call.codelet == Codelet::binary || call.codelet == Codelet::binary_row ||
           call.codelet == Codelet::binary_column) &&
          call.params[function_param(call.codelet)] >= kBinaryFunctionCount)
        throw Error(fmt::format("{}: {}'s function must be below {}, got {}", where(), name, kBinaryFunctionCount,
                                call.params[function_param(call.codelet)]));
      if (call.codelet == Codelet::reduce_rows && call.params[2] >= kReduceFunctionCount)
        throw Error(fmt::format("{}: reduce_rows' function must be below {}, got {}", where(), kReduceFunctionCount,
                                call.params[2]));
      if (call.codelet == Codelet::cast)
        for (std::uint32_t i : {1u, 2u})
          if (call.params[i] >= kDTypeCount || static_cast<DType>(call.params[i]) == DType::float16)
            throw Error(fmt::format("{}: cast's {} type must be float32 ({}), int32 ({}) or bool ({}), got {}", where(),
                                    i == 1 ? "source" : "target", static_cast<std::uint32_t>(DType::float32),
                                    static_cast<std::uint32_t>(DType::int32),
                                    static_cast<std::uint32_t>(DType::boolean), call.params[i]));
      if (is_matmul(call.codelet) && call.params[kMatmulOrientationParam] >= kMatmulOrientations)
        throw Error(fmt::format("{}: {}'s orientation must be 0 (as_is) or 1 (swapped), got {}", where(), name,
                                call.params[kMatmulOrientationParam]));
      if (call.codelet == Codelet::reduce_bias && (call.params[4] > 1 || call.params[3] < call.params[2]))
        throw Error(
            fmt::format("{}: reduce_bias needs a relu flag of 0 or 1 and own_stride >= cols, "
                        "got relu={} own_stride={} cols={}",
                        where(), call.params[4], call.params[3], call.params[2]));
      if (call.codelet == Codelet::multi_slice && std::uint64_t{call.params[3]} + call.params[0] > call.params[4])
        throw Error(fmt::format("{}: multi_slice's rows [{}, {}) reach past its table's {} rows", where(),
                                call.params[3], std::uint64_t{call.params[3]} + call.params[0], call.params[4]));
      if (std::string problem = window_params_problem(call.codelet, call.params); !problem.empty())
        throw Error(fmt::format("{}: {}'s params are unusable: {}", where(), name, problem));
      LoadedCall result;
      result.codelet = call.codelet;
      std::array<std::uint64_t, kMaxCodeletOperands> words{};
      for (std::uint32_t o = 0; o < call.addresses.size(); ++o) {
        words[o] = codelet_operand_words(call.codelet, call.params, o);
        result.operand[o] = checked_word(tile, call.addresses[o], words[o], where,
                                         [&] { return fmt::format("{} operand {}", name, o); });
      }
      std::copy(call.params.begin(), call.params.end(), result.param.begin());
      if (std::string problem = aliasing_problem(result, words); !problem.empty())
        throw Error(fmt::format("{}: {} operands alias: {}", where(), name, problem));
      tile_cycles += codelet_cycles(call.codelet, call.params, package.target);
      loaded.calls.push_back(result);
    }
    loaded.first_call.push_back(static_cast<std::uint32_t>(loaded.calls.size()));
    loaded.profile.tile_compute_cycles[tile] = tile_cycles;
    if (tile_cycles > loaded.profile.compute_cycles) {
      loaded.profile.compute_cycles = tile_cycles;
      loaded.profile.busiest_tile = tile;
    }
  }
}

// The exchange rules (ARCHITECTURE.md, "The exchange problem"), all data-independent, so
// they are checked once here: a word sent by s at cycle c arrives at d at c + latency(s, d);
// per cycle a tile sends at most one word and receives at most one; a receiver changing
// the sender it listens to leaves switch_cost idle cycles; without multicast a word has at
// most one receiver. Each received word must have been sent by its sender at
// arrival - latency. A sent word nobody receives is allowed and counted.
void SimDevice::Impl::load_exchange(const Package& package, std::uint32_t step, LoadedSuperstep& loaded) {
  const Target& t = package.target;
  const std::string& label = loaded.profile.label;
  SuperstepProfile& profile = loaded.profile;

  std::vector<std::vector<LoadedSend>> sends(tile_count);
  std::uint64_t sent_words = 0;
  std::uint64_t horizon = 0;
  for (std::uint32_t tile = 0; tile < tile_count; ++tile) {
    for (const TileSend& send : package.tiles[tile].supersteps[step].sends) {
      if (send.words == 0) continue;
      auto where = [&] { return fmt::format("{}, cycle {}", place(step, label, tile), send.cycle); };
      auto what = [&] { return fmt::format("send of {} words", send.words); };
      check_cycle(send.cycle, send.words, where, what);
      sends[tile].push_back(
          {send.cycle, checked_word(tile, send.address, send.words, where, what), send.words, 0, send.address});
    }
    auto& list = sends[tile];
    std::sort(list.begin(), list.end(), [](const LoadedSend& a, const LoadedSend& b) { return a.cycle < b.cycle; });
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i > 0 && list[i].cycle < list[i - 1].cycle + list[i - 1].words)
        throw Error(
            fmt::format("{}, cycle {}: conflict: the tile sends two words in one cycle "
                        "(a send of {} words from cycle {} overlaps a send starting at "
                        "cycle {}); a tile sends at most one word per cycle",
                        place(step, label, tile), list[i].cycle, list[i - 1].words, list[i - 1].cycle, list[i].cycle));
      list[i].first_sent = sent_words;
      sent_words += list[i].words;
      profile.words_sent += list[i].words;
      horizon = std::max(horizon, list[i].cycle + list[i].words);
    }
  }

  // Which sent words each receive stored, as runs: multicast and unreceived words are counted
  // from them afterwards, in memory and time that grow with the package's entries, not its words.
  std::vector<ReceivedRun> received;
  std::vector<std::vector<LoadedReceive>> receives(tile_count);
  for (std::uint32_t tile = 0; tile < tile_count; ++tile) {
    auto& list = receives[tile];
    for (const TileReceive& receive : package.tiles[tile].supersteps[step].receives) {
      if (receive.words == 0) continue;
      auto where = [&] { return fmt::format("{}, cycle {}", place(step, label, tile), receive.arrival); };
      auto what = [&] { return fmt::format("receive of {} words", receive.words); };
      if (receive.sender >= tile_count)
        throw Error(
            fmt::format("{}: receive from tile {}, but the target has {} tiles", where(), receive.sender, tile_count));
      check_cycle(receive.arrival, receive.words, where, what);
      list.push_back({receive.arrival, receive.sender, checked_word(tile, receive.address, receive.words, where, what),
                      receive.words, receive.address});
    }
    std::sort(list.begin(), list.end(),
              [](const LoadedReceive& a, const LoadedReceive& b) { return a.arrival < b.arrival; });
    for (std::size_t i = 0; i < list.size(); ++i) {
      const LoadedReceive& r = list[i];
      if (i > 0) {
        const LoadedReceive& previous = list[i - 1];
        const std::uint64_t previous_end = previous.arrival + previous.words;
        if (r.arrival < previous_end)
          throw Error(
              fmt::format("{}, cycle {}: conflict: two words arrive in one cycle (from "
                          "tile {}, words arriving from cycle {}, and from tile {}, from "
                          "cycle {}); a tile receives at most one word per cycle",
                          place(step, label, tile), r.arrival, previous.sender, previous.arrival, r.sender, r.arrival));
        if (r.sender != previous.sender && r.arrival < previous_end + t.switch_cost)
          throw Error(
              fmt::format("{}, cycle {}: conflict: the receiver switches from tile {} "
                          "(last word at cycle {}) to tile {} after {} idle cycles; "
                          "target '{}' needs {} (switch_cost)",
                          place(step, label, tile), r.arrival, previous.sender, previous_end - 1, r.sender,
                          r.arrival - previous_end, t.name, t.switch_cost));
      }
      const std::uint32_t latency = t.latency(r.sender, tile);
      horizon = std::max(horizon, r.arrival + r.words);
      for (std::uint32_t done = 0; done < r.words;) {
        const std::uint64_t arrival = r.arrival + done;
        const LoadedSend* send = arrival >= latency ? send_at(sends[r.sender], arrival - latency) : nullptr;
        if (send == nullptr)
          throw Error(
              fmt::format("{}, cycle {}: receive with no matching send: the word arriving at cycle {} from "
                          "tile {} must leave it at cycle {} (latency {}), but tile {} sends nothing then",
                          place(step, label, tile), arrival, arrival, r.sender,
                          static_cast<std::int64_t>(arrival) - latency, latency, r.sender));
        const std::uint64_t sent = arrival - latency;
        const auto offset = static_cast<std::uint32_t>(sent - send->cycle);
        const std::uint32_t run = std::min(send->words - offset, r.words - done);
        received.push_back({send->first_sent + offset, run, tile, arrival, r.sender, sent});
        const WordCopy copy{static_cast<std::uint32_t>(first_word[r.sender] + send->word + offset),
                            static_cast<std::uint32_t>(first_word[tile] + r.word + done), run};
        WordCopy* last = loaded.copies.empty() ? nullptr : &loaded.copies.back();
        if (last != nullptr && last->source + last->words == copy.source &&
            last->destination + last->words == copy.destination)
          last->words += run;
        else loaded.copies.push_back(copy);
        loaded.copied_words += run;
        done += run;
      }
      profile.words_received += r.words;
    }
    check_stored_once(list, [&] { return place(step, label, tile); });
  }
  profile.words_unreceived = sent_words - received_sent_words(received, t, step, label);

  // The simulator reads every sent word before storing any received word, which is what
  // the hardware does unless a tile stores a word and then sends from the same address
  // within the phase (forwarding). Such a package would be simulated wrongly, so refuse it.
  for (std::uint32_t tile = 0; tile < tile_count; ++tile) {
    if (sends[tile].empty() || receives[tile].empty()) continue;
    std::vector<LoadedSend> by_address = sends[tile];
    std::sort(by_address.begin(), by_address.end(),
              [](const LoadedSend& a, const LoadedSend& b) { return a.word < b.word; });
    std::vector<std::uint64_t> reach(by_address.size());  // max end word of sends[0..i]
    for (std::size_t i = 0; i < by_address.size(); ++i)
      reach[i] = std::max<std::uint64_t>(i ? reach[i - 1] : 0, std::uint64_t{by_address[i].word} + by_address[i].words);
    for (const LoadedReceive& r : receives[tile]) {
      const std::uint64_t r_end = std::uint64_t{r.word} + r.words;
      auto first_after = std::lower_bound(by_address.begin(), by_address.end(), r_end,
                                          [](const LoadedSend& s, std::uint64_t end) { return s.word < end; });
      for (auto i = first_after - by_address.begin(); i-- > 0 && reach[i] > r.word;) {
        const LoadedSend& s = by_address[i];
        if (!overlaps(s.word, s.words, r.word, r.words)) continue;
        // Along an overlap both walk one word per cycle, so arrival - send cycle is the
        // same for every shared word.
        const std::int64_t arrival_minus_send =
            (static_cast<std::int64_t>(r.arrival) - r.word) - (static_cast<std::int64_t>(s.cycle) - s.word);
        if (arrival_minus_send <= 0) {
          const std::uint32_t shared = std::max(s.word, r.word);
          throw Error(
              fmt::format("{}, cycle {}: the tile sends byte address {} at cycle {} after a word from tile "
                          "{} was stored there at cycle {} in the same phase; forwarding within a phase "
                          "is not supported: send from a buffer no receive of this phase writes",
                          place(step, label, tile), s.cycle + (shared - s.word),
                          s.address + std::uint64_t{shared - s.word} * kWordBytes, s.cycle + (shared - s.word),
                          r.sender, r.arrival + (shared - r.word)));
        }
      }
    }
  }

  profile.exchange_horizon = profile.words_sent == 0 ? 0 : horizon;
  profile.exchange_cycles = profile.words_sent == 0 ? 0 : horizon + package.target.exchange_phase_overhead;
}

void SimDevice::Impl::load_streams(const Package& package) {
  const Graph& graph = package.graph;
  for (const PackageStream& stream : package.streams) {
    const std::string name = fmt::format("host stream '{}' ({})", stream.tensor, stream_kind_name(stream.kind));
    const std::int64_t index = graph.find_tensor(stream.tensor);
    if (index < 0) throw Error(fmt::format("{}: the package's graph has no tensor '{}'", name, stream.tensor));
    const Tensor& tensor = graph.tensors[static_cast<std::size_t>(index)];
    if (stream.rows != tensor.rows() || stream.cols != tensor.cols())
      throw Error(fmt::format("{}: stream is {}x{} but tensor '{}' is {}x{}", name, stream.rows, stream.cols,
                              tensor.name, tensor.rows(), tensor.cols()));
    const bool kind_matches = (stream.kind == StreamKind::weight && tensor.kind == TensorKind::weight) ||
                              (stream.kind == StreamKind::input && tensor.kind == TensorKind::input) ||
                              (stream.kind == StreamKind::output &&
                               std::find(graph.outputs.begin(), graph.outputs.end(), index) != graph.outputs.end());
    if (!kind_matches)
      throw Error(fmt::format("{}: tensor '{}' is not a graph {}", name, tensor.name, stream_kind_name(stream.kind)));
    if (stream.dtype != tensor.dtype || (stream.dtype == DType::float16 && stream.kind != StreamKind::weight))
      throw Error(fmt::format("{}: stream is {} but tensor '{}' is {} (only weights are streamed as float16)", name,
                              dtype_name(stream.dtype), tensor.name, dtype_name(tensor.dtype)));
    // Every element of a weight or an output must come from (or go to) some slice, or the device
    // would compute with zeros and the host would read nothing.
    std::vector<bool> covered(static_cast<std::size_t>(stream.rows) * stream.cols, false);
    LoadedStream& loaded = streams.emplace_back(LoadedStream{stream, {}});
    for (std::size_t s = 0; s < stream.slices.size(); ++s) {
      const PackageSlice& slice = stream.slices[s];
      auto where = [&] { return fmt::format("{}, slice {}, tile {}", name, s, slice.tile); };
      if (slice.tile >= tile_count) throw Error(fmt::format("{}: the target has {} tiles", where(), tile_count));
      if (std::uint64_t{slice.row_begin} + slice.rows > stream.rows ||
          std::uint64_t{slice.col_begin} + slice.cols > stream.cols)
        throw Error(
            fmt::format("{}: block rows [{}, {}) cols [{}, {}) is outside the {}x{} "
                        "tensor",
                        where(), slice.row_begin, slice.row_begin + slice.rows, slice.col_begin,
                        slice.col_begin + slice.cols, stream.rows, stream.cols));
      if (slice.transposed && stream.kind == StreamKind::output)
        throw Error(fmt::format("{}: an output slice cannot be transposed; only inputs and weights may be", where()));
      loaded.slice_words.push_back(checked_word(slice.tile, slice.address,
                                                packed_words(std::uint64_t{slice.rows} * slice.cols, stream.dtype),
                                                where, [] { return "the block"; }));
      for (std::uint32_t r = 0; r < slice.rows; ++r)
        std::fill_n(covered.begin() +
                        static_cast<std::ptrdiff_t>(std::uint64_t{slice.row_begin + r} * stream.cols + slice.col_begin),
                    slice.cols, true);
    }
    // An input's elements no op reads (a Slice or a downsampling Resize of a graph input) may be
    // in no slice; a weight or an output must be whole.
    auto gap = std::find(covered.begin(), covered.end(), false);
    if (stream.kind != StreamKind::input && gap != covered.end()) {
      const auto element = static_cast<std::uint64_t>(gap - covered.begin());
      throw Error(
          fmt::format("{}: element [{}, {}] is in no slice; the slices must cover the "
                      "tensor",
                      name, element / stream.cols, element % stream.cols));
    }
  }
  for (std::uint32_t output : graph.outputs) {
    const bool streamed = std::any_of(streams.begin(), streams.end(), [&](const LoadedStream& s) {
      return s.stream.kind == StreamKind::output && s.stream.tensor == graph.tensors.at(output).name;
    });
    if (!streamed)
      throw Error(fmt::format("graph output '{}' has no output host stream", graph.tensors.at(output).name));
  }
}

void SimDevice::Impl::write_streams(StreamKind kind, const HostTensors& values) {
  for (const auto& [stream, slice_words] : streams) {
    if (stream.kind != kind) continue;
    auto found = values.find(stream.tensor);
    if (found == values.end())
      throw Error(fmt::format("no host values for {} tensor '{}'", stream_kind_name(kind), stream.tensor));
    const std::vector<float>& tensor = found->second;
    if (tensor.size() != static_cast<std::size_t>(stream.rows) * stream.cols)
      throw Error(fmt::format("host values for '{}' have {} elements; the stream needs {}x{}", stream.tensor,
                              tensor.size(), stream.rows, stream.cols));
    for (std::size_t s = 0; s < stream.slices.size(); ++s) {
      const PackageSlice& slice = stream.slices[s];
      float* destination = tile_memory(slice.tile) + slice_words[s];
      const std::size_t count = static_cast<std::size_t>(slice.rows) * slice.cols;
      if (stream.dtype != DType::float16) {  // float32 values, int32 and bool words: a word each
        pack_slice(tensor, stream.cols, slice, std::span<float>(destination, count));
        continue;
      }
      // The host converts to half, two a word; the padding half of an odd block is zero.
      std::vector<float> block(count);
      pack_slice(tensor, stream.cols, slice, block);
      std::vector<std::uint16_t> halves(count + count % 2, 0);
      for (std::size_t i = 0; i < count; ++i) halves[i] = float_to_half(block[i]);
      std::memcpy(destination, halves.data(), halves.size() * sizeof(std::uint16_t));
    }
  }
}

HostTensors SimDevice::Impl::read_outputs() const {
  HostTensors outputs;
  for (const auto& [stream, slice_words] : streams) {
    if (stream.kind != StreamKind::output) continue;
    std::vector<float>& tensor = outputs[stream.tensor];
    tensor.assign(static_cast<std::size_t>(stream.rows) * stream.cols, 0.0f);
    // Replicated slices hold the same values; the last one read wins.
    for (std::size_t s = 0; s < stream.slices.size(); ++s) {
      const PackageSlice& slice = stream.slices[s];
      const float* source = tile_memory(slice.tile) + slice_words[s];
      unpack_slice(std::span<const float>(source, static_cast<std::size_t>(slice.rows) * slice.cols), stream.cols,
                   slice, tensor);
    }
  }
  return outputs;
}

void SimDevice::Impl::exchange(const LoadedSuperstep& step, std::vector<float>& staging) {
  // Read every word first, then store: a sent word is the value at its send cycle, and the
  // load-time check guarantees no receive of this phase wrote it before then.
  staging.resize(step.copied_words);
  std::size_t at = 0;
  for (const WordCopy& copy : step.copies) {
    std::memcpy(staging.data() + at, memory.data() + copy.source, copy.words * sizeof(float));
    at += copy.words;
  }
  at = 0;
  for (const WordCopy& copy : step.copies) {
    std::memcpy(memory.data() + copy.destination, staging.data() + at, copy.words * sizeof(float));
    at += copy.words;
  }
}

SimDevice::SimDevice() : impl_(std::make_unique<Impl>()) {}
SimDevice::~SimDevice() = default;

std::uint64_t SimDevice::tile_memory_bytes(std::uint32_t tile) const {
  return tile < impl_->tile_count ? impl_->held_bytes(tile) : 0;
}

std::uint64_t SimDevice::allocated_bytes() const {
  return impl_->first_word.empty() ? 0 : impl_->first_word.back() * kWordBytes;
}

std::vector<float> SimDevice::read_words(std::uint32_t tile, std::uint32_t address, std::uint32_t words) const {
  if (tile >= impl_->tile_count)
    throw Error(fmt::format("read of tile {}: the device has {} tiles", tile, impl_->tile_count));
  const std::uint32_t first = impl_->checked_word(
      tile, address, words, [&] { return fmt::format("tile {}", tile); }, [] { return "the read"; });
  const float* tile_memory = impl_->tile_memory(tile);
  return {tile_memory + first, tile_memory + first + words};
}

void SimDevice::attach_impl() {}

void SimDevice::load_impl(const Package& package) { load_package(package, nullptr); }

void SimDevice::load_releasing_impl(Package& package) { load_package(package, &package); }

void SimDevice::load_package(const Package& package, Package* releasing) {
  Impl fresh;
  fresh.target = package.target;
  fresh.load_tiles(package);
  const std::size_t step_count = package.tiles.front().supersteps.size();
  fresh.supersteps.resize(step_count);
  for (std::uint32_t step = 0; step < step_count; ++step) {
    LoadedSuperstep& loaded = fresh.supersteps[step];
    loaded.profile.label =
        package.superstep_labels.empty() ? fmt::format("superstep {}", step) : package.superstep_labels[step];
    fresh.load_compute(package, step, loaded);
    fresh.load_exchange(package, step, loaded);
    if (releasing != nullptr) {
      for (TileImage& image : releasing->tiles) image.supersteps[step] = TileSuperstep{};
      ::malloc_trim(0);  // millions of small entries freed: give their pages back before the next step grows
    }
    loaded.profile.sync_cycles = package.target.sync_cycles;
    fresh.cycles.compute += loaded.profile.compute_cycles;
    fresh.cycles.exchange += loaded.profile.exchange_cycles;
    fresh.cycles.sync += loaded.profile.sync_cycles;
  }
  fresh.load_streams(package);
  *impl_ = std::move(fresh);  // a package that fails to load leaves the device as it was
}

void SimDevice::initialize_impl(const HostTensors& weights) { impl_->write_streams(StreamKind::weight, weights); }

HostTensors SimDevice::run_impl(const HostTensors& inputs, ExecutionProfile& profile) {
  Impl& sim = *impl_;
  sim.write_streams(StreamKind::input, inputs);
  std::vector<float> staging;
  for (const LoadedSuperstep& step : sim.supersteps) {
    for (std::uint32_t tile = 0; tile < sim.tile_count; ++tile) {
      float* tile_memory = sim.tile_memory(tile);
      for (std::uint32_t c = step.first_call[tile]; c < step.first_call[tile + 1]; ++c)
        run_call(tile_memory, step.calls[c]);
    }
    // The barrier needs no action in a sequential simulation; exchange follows it.
    sim.exchange(step, staging);
  }
  profile.target_name = sim.target.name;
  profile.tiles = sim.tile_count;
  profile.clock_hz = sim.target.clock_hz;
  profile.cycles = sim.cycles;
  profile.supersteps.clear();
  for (const LoadedSuperstep& step : sim.supersteps) profile.supersteps.push_back(step.profile);
  return sim.read_outputs();
}

}  // namespace tessera::runtime
