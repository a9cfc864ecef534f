// The cost-model plugin interface: estimated cycles of a candidate program.
#pragma once
#include <cstdint>

#include "tessera/plugin.hpp"

namespace tessera {

struct Program;
struct ExchangePhase;
struct Target;

struct CostEstimate {
  std::uint64_t compute_cycles = 0;   ///< sum over supersteps of the slowest tile's compute
  std::uint64_t exchange_cycles = 0;  ///< sum over exchange phases, overhead included
  std::uint64_t sync_cycles = 0;      ///< barriers
  std::uint64_t peak_tile_bytes = 0;  ///< largest sum of buffer bytes on one tile
  std::uint64_t total() const { return compute_cycles + exchange_cycles + sync_cycles; }
};

class CostModel : public PluginObject {
public:
  /// Estimates a whole (possibly unplaced, unscheduled) program. Exceptions from the
  /// plugin come out as PluginError.
  CostEstimate estimate(const Program& program, const Target& target);
  /// Estimates one exchange phase, phase overhead included.
  std::uint64_t estimate_exchange(const ExchangePhase& phase, const Target& target);

protected:
  virtual CostEstimate estimate_impl(const Program& program, const Target& target) = 0;
  virtual std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) = 0;
};

}  // namespace tessera
