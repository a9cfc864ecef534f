// Re-times a job order: every port serves its jobs in the order's sequence, each job as early
// as its sender and receivers allow (the semi-active schedule of that order).
#pragma once
#include <cstdint>
#include <vector>

#include "phase_model.hpp"

namespace latency_aware {

/// How good a timing is, compared lexicographically: the horizon, then how many receivers
/// finish at it, then the sum of all receivers' last arrivals (smaller is better).
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

/// The timing of one order. `binding[job]` is the job whose port made it wait (kNone when
/// it starts at cycle 0 or right when its sender is first free), the edge a critical path
/// follows back.
struct Timing {
  std::vector<std::uint64_t> start;
  std::vector<std::uint32_t> binding;
  Score score;
  std::uint32_t last_job = kNone;  ///< the first job in the order whose arrival ends at the horizon
};

/// Times orders of one model; holds the per-port scratch state so repeated calls (the local
/// search makes thousands) allocate nothing.
class OrderTimer {
public:
  explicit OrderTimer(const PhaseModel& model);

  /// Times `order` (every job exactly once). Any order is feasible: ports serve jobs in
  /// order positions, so no job waits for a later one. Cost: linear in jobs + endpoints.
  void time(const std::vector<std::uint32_t>& order, Timing& timing);

  /// Scores `order` without per-job results, for the moves the search rejects.
  Score score(const std::vector<std::uint32_t>& order);

private:
  template <bool kRecord>
  Score run(const std::vector<std::uint32_t>& order, Timing* timing);

  const PhaseModel& model_;
  std::vector<std::uint64_t> send_free_, receive_free_;
  std::vector<std::uint32_t> send_last_, receive_last_, receive_source_;
};

}  // namespace latency_aware
