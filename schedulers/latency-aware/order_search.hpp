// Improves a schedule by neighbourhood moves on its critical path, within a work budget.
#pragma once
#include <cstdint>
#include <vector>

#include "phase_model.hpp"
#include "work_budget.hpp"

namespace tessera::latency_aware {

struct SearchLimits {
  std::uint64_t max_rounds = 0;   ///< moves tried at most; 0: until the work budget is spent
  std::uint64_t seed = 1;         ///< breaks ties among equally good moves, reproducibly
  std::uint64_t lower_bound = 0;  ///< stop once the horizon reaches it
};

struct SearchResult {
  std::vector<std::uint64_t> start;  ///< per job: its first send cycle
  std::uint64_t horizon = 0;
  std::uint64_t improvements = 0;  ///< moves that made the best schedule so far better
  std::uint64_t evaluations = 0;   ///< moves tried (each re-times what it can affect)
};

/// Iterated local search from the schedule of `order` (one sequence per port, see
/// PortSequences). Its critical path is the chain from the job finishing last back through
/// the jobs that held each one up on a shared port; runs of it on one port are blocks of
/// back-to-back jobs. A move swaps the first or last pair of a block, or moves one end of a
/// block past the other, on that port only. Moves late in the path are tried first (early
/// changes ripple through everything after them); the first one that makes the schedule
/// better (Score: horizon, then receivers finishing at it, then their total completion) is
/// kept. At a local optimum two swaps near the end of the path are forced and the descent
/// resumes, from the best schedule seen if the last descent did worse. Stops when `budget`
/// is spent, the lower bound is reached, or 64 local optima in a row brought nothing new.
/// Returns the best schedule seen, so never worse than `order`'s.
SearchResult improve_order(const PhaseModel& model, const std::vector<std::uint32_t>& order, const SearchLimits& limits,
                           WorkBudget& budget);

}  // namespace tessera::latency_aware
