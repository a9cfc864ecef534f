// A job order by rounds: an edge colouring of the sender/receiver graph, round by round.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "phase_model.hpp"
#include "work_budget.hpp"

namespace tessera::latency_aware {

/// Colours jobs so no two of one colour share a sender or a receiver (König: unicast jobs
/// need no more colours than the busiest port has jobs; multicast jobs take the first colour
/// free at all their ports), heaviest jobs first so equal sizes share rounds, and returns the
/// jobs round by round. Re-timed, every port then works through the rounds in step, which
/// is what phases made of whole permutations need and list scheduling misses. Returns
/// nothing once `budget` is spent.
std::optional<std::vector<std::uint32_t>> colour_order(const PhaseModel& model, WorkBudget& budget);

}  // namespace tessera::latency_aware
