// The capacity check: before planning, refuse a model no placement on the target could hold.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/pass.hpp"

namespace tessera::select_finalist {

/// The least memory any plan of a canonical graph needs, against what the target holds. Each
/// figure is a lower bound: every weight held once, only the activations that must coexist.
struct CapacityNeed {
  std::uint64_t weight_bytes = 0;                      ///< every weight once, as stored (float16 packed two a word)
  std::uint64_t interleaved_weight_bytes = 0;          ///< of those, the ones only the interleaved region takes
  std::uint64_t float16_weight_bytes = 0;              ///< weight_bytes with every weight that may be float16 stored so
  std::uint64_t float16_interleaved_weight_bytes = 0;  ///< interleaved_weight_bytes likewise
  std::uint64_t live_activation_bytes = 0;             ///< the most input and op-result bytes that must be live at once
  std::uint32_t peak_op = 0;                           ///< the op at which they are
  std::uint64_t standard_capacity = 0;                 ///< the standard region's bytes summed over the tiles
  std::uint64_t interleaved_capacity = 0;              ///< the interleaved region's, likewise
  std::uint64_t capacity() const { return standard_capacity + interleaved_capacity; }
  /// How many times the target's memory the binding region needs (above 1: cannot fit).
  double need_ratio() const;
};

/// Measures `graph` against `target` (no planning: linear in ops and tensors).
CapacityNeed capacity_need(const Graph& graph, const Target& target);

/// Fails, naming the model file, when even the most favourable placement cannot fit: the
/// weights, the region that is full, the capacity per region and what would fit (float16
/// storage, chips' worth, a smaller batch). Logs the figures when it fits.
Status check_capacity(const Graph& graph, const Target& target, PassContext& context);

}  // namespace tessera::select_finalist
