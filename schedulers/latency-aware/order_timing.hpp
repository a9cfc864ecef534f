// Re-times a job order: every port serves its jobs in the order's sequence, each job as early
// as its sender and receivers allow (the semi-active schedule of that order).
#pragma once
#include <cstdint>
#include <vector>

#include "phase_model.hpp"

namespace tessera::latency_aware {

/// How good a timing is, compared lexicographically: the horizon, then how many receivers
/// finish at it, then the sum of all receivers' last arrivals (smaller is better). The
/// tie-breaks let the search cross plateaus of equal horizon toward a smaller one.
struct Score {
  std::uint64_t horizon = 0;
  std::uint32_t ports_at_horizon = 0;
  std::uint64_t completion_sum = 0;
  friend bool operator<(const Score& a, const Score& b) {
    if (a.horizon != b.horizon) return a.horizon < b.horizon;
    if (a.ports_at_horizon != b.ports_at_horizon) return a.ports_at_horizon < b.ports_at_horizon;
    return a.completion_sum < b.completion_sum;
  }
};

struct Timing {
  std::vector<std::uint64_t> start;  ///< per job: its first send cycle
  Score score;
};

/// Times orders of one model, reusing its per-port scratch state between calls.
class OrderTimer {
public:
  explicit OrderTimer(const PhaseModel& model);

  /// Times `order` (every job exactly once). Any order is feasible: ports serve jobs in
  /// order positions, so no job waits for a later one. Linear in jobs + endpoints.
  void time(const std::vector<std::uint32_t>& order, Timing& timing);
  /// The same, without per-job results.
  Score score(const std::vector<std::uint32_t>& order);

private:
  Score run(const std::vector<std::uint32_t>& order, std::uint64_t* start);

  const PhaseModel& model_;
  std::vector<std::uint64_t> send_free_, receive_free_;
  std::vector<std::uint32_t> receive_source_;
};

}  // namespace tessera::latency_aware
