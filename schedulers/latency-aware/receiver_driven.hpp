// Receiver-driven list scheduling: each free receiver takes the sender whose words arrive first.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "phase_model.hpp"
#include "work_budget.hpp"

namespace tessera::latency_aware {

/// Receivers, in the order they become free, each take the unscheduled transfer whose first
/// word can arrive earliest (its sender free in time, latency and switch cost included);
/// among transfers arriving within `slack` cycles of the earliest, the one whose sender has
/// the most words left. Where receivers are the bottleneck (many sources, each switch
/// costing a cycle) this keeps them busy, which sender-driven list scheduling does not.
/// Remaining ties go to the lower job index, or with `tie_seed` > 0 to a seeded hash of it
/// (cheap diversification: every seed gives another good schedule).
/// Unicast phases only: returns nothing for a phase with multicast jobs, or once `budget` is
/// spent (unless `must_finish`: then the work is only recorded). Otherwise the jobs in the
/// order they were started (a valid job order).
std::optional<std::vector<std::uint32_t>> receiver_driven_order(const PhaseModel& model, std::uint32_t slack,
                                                                std::uint64_t tie_seed, WorkBudget& budget,
                                                                bool must_finish = false);

}  // namespace tessera::latency_aware
