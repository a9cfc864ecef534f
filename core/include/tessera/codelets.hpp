// The codelet set: the kernels a tile runs, their operands and their cycle formulas.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace tessera {

struct Target;

/// Version of the codelet set (semantics and cycle formulas); written into packages.
inline constexpr std::uint32_t kCodeletSetVersion = 2;  // 2: reduce_bias, transposed, half-weight, softmax, layer_norm

/// Operands are word offsets into buffers (program) or byte addresses (tile image);
/// params are the shape numbers listed per codelet. Data is float32 unless marked half
/// (IEEE binary16, two per word, packed row-major, the last word padded). Float params
/// (scale, eps) are passed as their float32 bit patterns.
enum class Codelet : std::uint16_t {
  matmul = 0,      ///< operands {a, b, c}; params {m, k, n}: c[m,n] = a[m,k] * b[k,n]
  reduce_add = 1,  ///< operands {in, out}; params {parts, count}: out[i] = sum_p in[p*count+i]
  bias_add = 2,    ///< operands {inout, bias}; params {rows, cols, relu}: inout[r,c] += bias[c]
  relu = 3,        ///< operands {inout}; params {count}
  add = 4,         ///< operands {a, b, out}; params {count}: out = a + b
  copy = 5,        ///< operands {in, out}; params {count}
  /// A reduction's epilogue fused in: operands {in, own, bias, out}; params {parts, rows, cols,
  /// own_stride, relu}: out[r,c] = act(sum_p in[(p*rows+r)*cols+c] + own[r*own_stride+c] + bias[c]),
  /// so the owner's own partial is read in place (strided) instead of copied.
  reduce_bias = 6,
  matmul_transposed = 7,  ///< operands {a, b, c}; params {m, k, n}: c[m,n] = a[m,k] * b[n,k]^T
  matmul_half = 8,        ///< operands {a, b (half), c}; params {m, k, n}: c = half(a) * b, float32 sums
  bias_add_half = 9,      ///< operands {inout, bias (half)}; params {rows, cols, relu}
  softmax = 10,           ///< operands {in, out}; params {rows, cols, scale}: rows of softmax(scale * in)
  layer_norm = 11,        ///< operands {in, gamma, beta, out}; params {rows, cols, eps}
};
inline constexpr std::uint32_t kCodeletCount = 12;
/// Most operands and params any codelet takes.
inline constexpr std::uint32_t kMaxCodeletOperands = 4;
inline constexpr std::uint32_t kMaxCodeletParams = 5;

/// A float param's bit pattern, and back.
std::uint32_t float_param(float value);
float param_float(std::uint32_t bits);

const char* codelet_name(Codelet);
/// Number of operands and params a call of `codelet` must carry.
std::uint32_t codelet_operand_count(Codelet);
std::uint32_t codelet_param_count(Codelet);
/// Words each operand spans, given the params (for bounds checks). Saturates at the largest
/// uint64 instead of wrapping, so forged params cannot make a huge span look small.
std::uint64_t codelet_operand_words(Codelet, std::span<const std::uint32_t> params,
                                    std::uint32_t operand);
/// Whether `words` 32-bit words from byte `address` end at or before byte `limit`: exact for
/// any values (no wrap-around), so a forged size cannot pass a bounds check by overflowing.
constexpr bool words_fit(std::uint64_t address, std::uint64_t words, std::uint64_t limit) {
  return address <= limit && words <= (limit - address) / 4;
}
/// Cycles one call takes on one tile (the simulator charges exactly this).
std::uint64_t codelet_cycles(Codelet, std::span<const std::uint32_t> params, const Target&);

}  // namespace tessera
