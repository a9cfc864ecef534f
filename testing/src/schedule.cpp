// schedule_and_check: the scheduler's own validation is not trusted alone; the test re-checks.
#include "tessera/testing/schedule.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace tessera::testing {

CheckedSchedule schedule_and_check(ExchangeScheduler& scheduler, const ExchangePhase& phase, const Target& target,
                                   const ScheduleExpectations& expect) {
  CheckedSchedule result;
  result.schedule = scheduler.schedule(phase, target, expect.budget_ms, &result.report);
  const ScheduleReport& reported = result.report;
  auto fail = [&](const std::string& problem) {
    throw ScheduleCheckFailure(fmt::format("scheduler '{}' on a phase of {} transfers over {} tiles, target '{}': {}",
                                           scheduler.plugin_name(), phase.transfers.size(), phase.tiles, target.name,
                                           problem));
  };
  const ScheduleReport checked = validate_schedule(phase, result.schedule, target);
  if (!checked.valid) fail("the validator refuses the schedule: " + checked.first_conflict);
  if (checked.horizon != reported.horizon)
    fail(fmt::format("the validator finds horizon {}, the scheduler reported {}", checked.horizon, reported.horizon));
  if (reported.horizon < reported.lower_bound)
    fail(fmt::format("horizon {} is below the lower bound {}", reported.horizon, reported.lower_bound));
  std::vector<std::uint32_t> segments(phase.transfers.size(), 0);
  for (const Segment& segment : result.schedule.segments) ++segments[segment.transfer];  // indices validated above
  for (std::size_t i = 0; i < phase.transfers.size(); ++i) {
    if (expect.max_segments_per_transfer != 0 && segments[i] > expect.max_segments_per_transfer)
      fail(fmt::format("transfer {} ({} words) is split into {} segments, more than the {} expected", i,
                       phase.transfers[i].words, segments[i], expect.max_segments_per_transfer));
  }
  return result;
}

bool same_schedule(const Schedule& a, const Schedule& b) {
  return std::equal(a.segments.begin(), a.segments.end(), b.segments.begin(), b.segments.end(),
                    [](const Segment& x, const Segment& y) {
                      return x.transfer == y.transfer && x.start == y.start && x.words == y.words;
                    });
}

}  // namespace tessera::testing
