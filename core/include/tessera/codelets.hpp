// The codelet set: the kernels a tile runs, their operands and their cycle formulas.
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace tessera {

struct Target;

/// Version of the codelet set (semantics and cycle formulas); written into packages.
inline constexpr std::uint32_t kCodeletSetVersion = 2;

/// Operands are word offsets into buffers (program) or byte addresses (tile image);
/// params are the shape numbers listed per codelet. All data is float32.
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
};
inline constexpr std::uint32_t kCodeletCount = 7;
/// Most operands and params any codelet takes.
inline constexpr std::uint32_t kMaxCodeletOperands = 4;
inline constexpr std::uint32_t kMaxCodeletParams = 5;

const char* codelet_name(Codelet);
/// Number of operands and params a call of `codelet` must carry.
std::uint32_t codelet_operand_count(Codelet);
std::uint32_t codelet_param_count(Codelet);
/// Words each operand spans, given the params (for bounds checks).
std::uint64_t codelet_operand_words(Codelet, std::span<const std::uint32_t> params,
                                    std::uint32_t operand);
/// Cycles one call takes on one tile (the simulator charges exactly this).
std::uint64_t codelet_cycles(Codelet, std::span<const std::uint32_t> params, const Target&);

}  // namespace tessera
