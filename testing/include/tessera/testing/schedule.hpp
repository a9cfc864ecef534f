// Schedule a phase through a scheduler's public entry point and check the result independently.
#pragma once
#include <cstdint>
#include <stdexcept>

#include "tessera/exchange.hpp"

namespace tessera {
class ExchangeScheduler;
struct Target;
}  // namespace tessera

namespace tessera::testing {

/// What schedule_and_check asks of the schedule beyond the core's validator.
struct ScheduleExpectations {
  std::uint64_t budget_ms = 2000;
  /// Most segments a transfer with words may have: 1 for a non-preemptive scheduler
  /// (one segment carrying every word); 0 for no limit.
  std::uint32_t max_segments_per_transfer = 0;
};

struct CheckedSchedule {
  Schedule schedule;
  ScheduleReport report;  ///< the scheduler's report: horizon and lower bounds
};

/// Thrown by schedule_and_check with the phase, the target and what was wrong; test
/// frameworks report it as the test's failure.
class ScheduleCheckFailure : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// Schedules `phase` on `target` with ExchangeScheduler::schedule, then checks the result with
/// the core's public validator (validate_schedule): valid, the same horizon as reported, not
/// below the lower bound, and `expect`'s segment limit.
/// Returns the schedule and report, or throws ScheduleCheckFailure (a PluginError from the
/// scheduler itself passes through unchanged).
CheckedSchedule schedule_and_check(ExchangeScheduler& scheduler, const ExchangePhase& phase, const Target& target,
                                   const ScheduleExpectations& expect = {});

/// True when both have the same segments in the same order.
bool same_schedule(const Schedule& a, const Schedule& b);

}  // namespace tessera::testing
