// The `in-order` baseline scheduler, loaded through the real plugin host.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "exchange_testing.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

using namespace tessera;
using tessera::testing::random_phase;
using tessera::testing::RandomPhaseShape;
using tessera::testing::shipped_target;

namespace {

std::unique_ptr<ExchangeScheduler> make_in_order() {
  static PluginHost host;
  static const bool loaded = (host.load_directory(TESSERA_PLUGIN_DIR), true);
  (void)loaded;
  const PluginInfo* info = host.find("in-order");
  REQUIRE(info != nullptr);
  REQUIRE(info->kind == PluginKind::exchange_scheduler);
  return host.create_scheduler(*info, host.resolve_options(*info, {}, "test"));
}

Schedule schedule_valid(const ExchangePhase& phase, const Target& target,
                        ScheduleReport* report = nullptr) {
  ScheduleReport checked;
  Schedule schedule = make_in_order()->schedule(phase, target, 2000, &checked);
  INFO(checked.first_conflict);
  REQUIRE(validate_schedule(phase, schedule, target).valid);
  if (report) *report = checked;
  return schedule;
}

}  // namespace

TEST_CASE("in-order schedules random 1472-tile phases validly", "[in-order]") {
  RandomPhaseShape shape;
  shape.transfers = 5000;
  shape.multicast_fraction = 0.2;
  for (const char* name : {"t1472", "t1472-ideal"}) {
    INFO(name);
    ScheduleReport report;
    const ExchangePhase phase = random_phase(shape, 8);
    const Schedule schedule = schedule_valid(phase, shipped_target(name), &report);
    CHECK(schedule.segments.size() == phase.transfers.size());
    CHECK(report.horizon >= report.lower_bound);
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
  Schedule schedule = schedule_valid(phase, target);
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
  ExchangePhase phase;
  phase.tiles = 1472;
  ScheduleReport report;
  CHECK(schedule_valid(phase, target, &report).segments.empty());
  CHECK(report.horizon == 0);
  phase.transfers.push_back(Transfer{0, {1471}, 7, 0, {}});
  const Schedule one = schedule_valid(phase, target, &report);
  REQUIRE(one.segments.size() == 1);
  CHECK(one.segments[0].start == 0);
  CHECK(report.horizon == 7 + target.latency(0, 1471));
}

TEST_CASE("in-order is deterministic and refuses what the target cannot do", "[in-order]") {
  const Target target = shipped_target("t1472");
  RandomPhaseShape shape;
  shape.transfers = 3000;
  const ExchangePhase phase = random_phase(shape, 10);
  const Schedule a = schedule_valid(phase, target), b = schedule_valid(phase, target);
  REQUIRE(a.segments.size() == b.segments.size());
  for (std::size_t i = 0; i < a.segments.size(); ++i) {
    CHECK(a.segments[i].transfer == b.segments[i].transfer);
    CHECK(a.segments[i].start == b.segments[i].start);
  }
  Target unicast = target;
  unicast.multicast = false;
  ExchangePhase multicast;
  multicast.tiles = 1472;
  multicast.transfers.push_back(Transfer{3, {4, 5}, 2, 0, {}});
  CHECK_THROWS_WITH(make_in_order()->schedule(multicast, unicast, 100),
                    Catch::Contains("given to scheduler 'in-order' is malformed") && Catch::Contains("has no multicast"));
}
