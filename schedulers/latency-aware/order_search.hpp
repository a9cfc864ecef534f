// Improves a job order by neighbourhood moves on its critical path, within a time budget.
#pragma once
#include <cstdint>
#include <vector>

#include "phase_model.hpp"
#include "work_budget.hpp"

namespace latency_aware {

struct SearchLimits {
  std::uint64_t max_rounds = 0;     ///< moves tried at most; 0 = until the work budget is spent
  std::uint64_t seed = 1;           ///< breaks ties among equally good moves, reproducibly
  std::uint64_t lower_bound = 0;    ///< stop once the horizon reaches it
};

struct SearchResult {
  std::vector<std::uint64_t> start;  ///< per job: its first send cycle
  std::uint64_t horizon = 0;
  std::uint64_t improvements = 0;   ///< accepted moves
  std::uint64_t evaluations = 0;    ///< orders re-timed
};

/// Local search from `order`: a critical path of the re-timed order is a chain of jobs each
/// held up by the one before on a shared port. Moving a job of the chain ahead of its
/// blocker in the order (or the blocker behind it) re-sequences that port, and the move is
/// kept if the schedule gets better: an earlier horizon, or the same horizon with fewer
/// receivers finishing at it and then less total receiver completion time (so the search
/// can cross plateaus toward an earlier horizon). At a local optimum a few moves are forced
/// and the descent resumes (iterated local search); the best schedule seen is returned, so
/// the result is never worse than `order`. Runs until `budget` is spent.
SearchResult improve_order(const PhaseModel& model, const std::vector<std::uint32_t>& order,
                           const SearchLimits& limits, WorkBudget& budget);

}  // namespace latency_aware
