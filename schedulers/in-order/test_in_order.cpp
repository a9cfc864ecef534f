// The `in-order` baseline scheduler, loaded through the real plugin host.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "shipped_target.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/schedule.hpp"
#include "tessera/testing/targets.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

// In phase order, one transfer at a time: never split.
constexpr ScheduleExpectations kWholeTransfers{.budget_ms = 2000, .max_segments_per_transfer = 1};

CheckedSchedule schedule_in_order(const ExchangePhase& phase, const Target& target) {
  return schedule_and_check(*make_scheduler("in-order"), phase, target, kWholeTransfers);
}

}  // namespace

TEST_CASE("in-order loads through the plugin host as an exchange scheduler", "[in-order]") {
  const PluginInfo* info = shipped_plugins().find("in-order");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::exchange_scheduler);
}

TEST_CASE("in-order passes the check-plugin scheduler battery", "[in-order][battery]") {
  check_battery(scheduler_battery([] { return make_scheduler("in-order"); }, unit_test_battery_options()));
}

TEST_CASE("in-order schedules random 1472-tile phases validly", "[in-order]") {
  RandomPhaseShape shape;
  shape.transfers = 5000;
  shape.multicast_fraction = 0.2;
  for (const char* name : {"t1472", "t1472-ideal"}) {
    INFO(name);
    const ExchangePhase phase = random_phase(shape, 8);
    CHECK(schedule_in_order(phase, shipped_target(name)).schedule.segments.size() == phase.transfers.size());
  }
}

TEST_CASE("in-order starts every transfer as early as phase order allows", "[in-order]") {
  // Each start must be forced: by the sender's previous transfer, or by a destination's
  // previous arrival (plus the switch cost when the source changes) minus the latency.
  const Target target = shipped_target("t16");
  RandomPhaseShape shape;
  shape.tiles = 16;
  shape.transfers = 2000;
  shape.multicast_fraction = 0.3;
  const ExchangePhase phase = random_phase(shape, 9);
  Schedule schedule = schedule_in_order(phase, target).schedule;
  REQUIRE(schedule.segments.size() == phase.transfers.size());
  std::sort(schedule.segments.begin(), schedule.segments.end(),
            [](const Segment& a, const Segment& b) { return a.transfer < b.transfer; });

  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint64_t> send_end(16, 0), arrival_end(16, 0);
  std::vector<std::uint32_t> heard(16, kNone);
  int unforced = 0, out_of_order = 0;
  for (const Segment& segment : schedule.segments) {
    const Transfer& transfer = phase.transfers[segment.transfer];
    if (segment.start < send_end[transfer.source]) ++out_of_order;
    bool forced = segment.start == 0 || segment.start == send_end[transfer.source];
    for (std::uint32_t d : transfer.destinations) {
      const std::uint64_t latency = target.latency(transfer.source, d);
      const std::uint64_t ready =
          arrival_end[d] + (heard[d] != kNone && heard[d] != transfer.source ? target.switch_cost : 0);
      if (segment.start + latency < ready) ++out_of_order;
      if (segment.start + latency == ready) forced = true;
    }
    if (!forced) ++unforced;
    send_end[transfer.source] = segment.start + segment.words;
    for (std::uint32_t d : transfer.destinations) {
      arrival_end[d] = segment.start + target.latency(transfer.source, d) + segment.words;
      heard[d] = transfer.source;
    }
  }
  CHECK(out_of_order == 0);
  CHECK(unforced == 0);
}

TEST_CASE("in-order handles the empty phase and a single transfer", "[in-order]") {
  const Target target = shipped_target("t1472");
  const CheckedSchedule empty = schedule_in_order(empty_phase(1472), target);
  CHECK(empty.schedule.segments.empty());
  CHECK(empty.report.horizon == 0);
  const CheckedSchedule one = schedule_in_order(single_transfer_phase(1472, 0, 1471, 7), target);
  REQUIRE(one.schedule.segments.size() == 1);
  CHECK(one.schedule.segments[0].start == 0);
  CHECK(one.report.horizon == 7 + target.latency(0, 1471));
}

TEST_CASE("in-order is deterministic and refuses what the target cannot do", "[in-order]") {
  const Target target = shipped_target("t1472");
  RandomPhaseShape shape;
  shape.transfers = 3000;
  const ExchangePhase phase = random_phase(shape, 10);
  CHECK(same_schedule(schedule_in_order(phase, target).schedule, schedule_in_order(phase, target).schedule));
  const ExchangePhase multicast = phase_of(1472, {transfer(3, {4, 5}, 2)});
  CHECK_THROWS_WITH(
      make_scheduler("in-order")->schedule(multicast, without_multicast(target), 100),
      Catch::Contains("given to scheduler 'in-order' is malformed") && Catch::Contains("has no multicast"));
}
