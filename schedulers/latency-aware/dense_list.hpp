// Dense list scheduling of a phase, returning the order in which it committed jobs.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "phase_model.hpp"
#include "work_budget.hpp"

namespace tessera::latency_aware {

enum class ListPriority {
  load_first,     ///< heaviest remaining receiver load, then a receiver already listening
  longest_first,  ///< longest transfer, then receiver load
  phase_order,    ///< lowest transfer index
  best_fit,       ///< least receiver idle created (its words arrive right as it is free),
                  ///< then receiver load: keeps receivers, which pay the switch cost, busy
};

/// How a free sender picks its next job.
struct ListRule {
  ListPriority priority = ListPriority::load_first;
  /// 0: take only jobs that can start now (the `greedy` plugin's rule, see dense_list.cpp).
  /// N > 0: also jobs that can start within N cycles, waiting for them, scored
  /// by receiver load minus `wait_penalty` per cycle of waiting.
  std::uint32_t lookahead = 0;
  double wait_penalty = 0;
};

/// Runs the event-driven list scheduler (senders free in time order; heavier senders first
/// within a cycle) and returns the jobs in the order it started them. Re-timing that order
/// (OrderTimer) gives a schedule no later than the list schedule, since every port sees its
/// jobs in the same sequence. Charges `budget` as it goes and returns nothing once it is
/// spent, unless `must_finish` (then the work is only recorded).
std::optional<std::vector<std::uint32_t>> dense_list_order(const PhaseModel& model, const ListRule& rule,
                                                           WorkBudget& budget, bool must_finish = false);

}  // namespace tessera::latency_aware
