// A compact, checked view of one exchange phase: the jobs the latency-aware scheduler orders.
#pragma once
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera {
struct Target;
}

namespace tessera::latency_aware {

inline constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

/// One job per transfer that carries words (empty transfers need no segment). Arrays are
/// indexed by job; a job's destinations and their latencies are a slice of two flat arrays,
/// so the hot loops read memory in order.
struct PhaseModel {
  std::uint32_t tiles = 0;
  std::uint64_t switch_cost = 0;
  std::uint32_t max_latency = 0;
  std::uint32_t multicast_jobs = 0;

  std::vector<std::uint32_t> transfer;  ///< the phase's transfer index
  std::vector<std::uint32_t> source;
  std::vector<std::uint32_t> words;
  std::vector<std::uint32_t> endpoint_begin;  ///< jobs + 1 offsets into the two below
  std::vector<std::uint32_t> destination;
  std::vector<std::uint32_t> latency;  ///< target.latency(source, destination)

  std::uint32_t jobs() const { return static_cast<std::uint32_t>(transfer.size()); }
  std::span<const std::uint32_t> destinations_of(std::uint32_t job) const {
    return {destination.data() + endpoint_begin[job], destination.data() + endpoint_begin[job + 1]};
  }
  std::span<const std::uint32_t> latencies_of(std::uint32_t job) const {
    return {latency.data() + endpoint_begin[job], latency.data() + endpoint_begin[job + 1]};
  }
  /// Cycles from the job's first send to its last arrival anywhere.
  std::uint64_t span_of(std::uint32_t job) const;
};

/// Builds the model of a phase tessera::check_phase accepted for `target`.
PhaseModel build_phase_model(const tessera::ExchangePhase& phase, const tessera::Target& target);

/// The schedule of a job order: one segment per job at the given start cycles.
tessera::Schedule to_schedule(const PhaseModel& model, const std::vector<std::uint64_t>& start);

}  // namespace tessera::latency_aware
