// The `milp` scheduler, loaded through the real plugin host: known optima, the ideal target's
// bound, multicast and switch cost, its fallbacks, and the heuristics measured against it.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "log_capture.hpp"
#include "shipped_target.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/schedule.hpp"
#include "tessera/testing/targets.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr const char* kLogger = "tessera.scheduler.milp";
// The plugin's summary line, one per phase scheduled.
constexpr const char* kScheduledLine = "milp scheduled exchange phase";

std::string field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find(" " + key + "=");
  REQUIRE(at != std::string::npos);
  const std::size_t begin = at + key.size() + 2;
  return line.substr(begin, line.find(' ', begin) - begin);
}
std::uint64_t number(const std::string& line, const std::string& key) { return std::stoull(field(line, key)); }

// The MILP's budget when a test does not need another: enough for GLPK on these small phases.
ScheduleReport schedule_checked(ExchangeScheduler& scheduler, const ExchangePhase& phase, const Target& target,
                                std::uint64_t budget_ms = 1000) {
  return schedule_and_check(scheduler, phase, target, {.budget_ms = budget_ms, .max_segments_per_transfer = 0}).report;
}

// Small phases on t16 (latency 6..9, switch cost 1, multicast), each decided in well under
// a second: the MILP's proven optima are the yardstick for the heuristics.
std::vector<ExchangePhase> small_t16_phases() {
  std::vector<ExchangePhase> phases;
  for (std::uint32_t transfers : {8u, 10u, 12u})
    for (std::uint64_t seed = 1; seed <= 2; ++seed)
      for (double multicast : {0.0, 0.3}) {
        RandomPhaseShape shape;
        shape.tiles = 16;
        shape.transfers = transfers;
        shape.max_words = 12;
        shape.multicast_fraction = multicast;
        shape.max_fanout = 3;
        phases.push_back(random_phase(shape, seed * 31 + transfers));
      }
  return phases;
}

}  // namespace

TEST_CASE("milp loads through the plugin host with its options", "[milp]") {
  const PluginInfo* info = shipped_plugins().find("milp");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::exchange_scheduler);
  const Options defaults = shipped_plugins().resolve_options(*info, {}, "test");
  CHECK(defaults.get_int("max_variables") == 200000);
  CHECK(defaults.get_number("budget_fraction") == Approx(0.9));
}

TEST_CASE("milp passes the check-plugin scheduler battery", "[milp][battery]") {
  check_battery(scheduler_battery([] { return make_scheduler("milp"); }, unit_test_battery_options()));
}

TEST_CASE("milp finds the optima known by hand", "[milp]") {
  const Target target = shipped_target("t1472");  // latency 6 + column distance, switch cost 1
  auto milp = make_scheduler("milp");
  LogCapture log(kLogger);

  SECTION("two transfers from one sender to its own column: the words, then the latency") {
    ExchangePhase phase;
    phase.tiles = 1472;
    phase.transfers = {Transfer{0, {1}, 10, 0, {}}, Transfer{0, {2}, 7, 0, {}}};
    CHECK(schedule_checked(*milp, phase, target).horizon == 10 + 7 + 6);
    CHECK(field(log.take_last_line_with(kScheduledLine), "optimal") == "true");
  }
  SECTION("two senders into one receiver: both transfers, the latency and one switch") {
    ExchangePhase phase;
    phase.tiles = 1472;
    phase.transfers = {Transfer{1, {0}, 10, 0, {}}, Transfer{2, {0}, 7, 0, {}}};
    CHECK(schedule_checked(*milp, phase, target).horizon == 6 + 10 + 7 + 1);
    CHECK(field(log.take_last_line_with(kScheduledLine), "optimal") == "true");
  }
  SECTION("a near and a far receiver: the far one first, which the list schedule misses") {
    // Tile 1400 is 21 columns away (latency 27), tile 1 in the sender's column (6). Far
    // first: max(10 + 27, 20 + 6) = 37. Near first, as the list schedule does: 20 + 27.
    ExchangePhase phase;
    phase.tiles = 1472;
    phase.transfers = {Transfer{0, {1}, 10, 0, {}}, Transfer{0, {1400}, 10, 0, {}}};
    REQUIRE(target.latency(0, 1400) == 27);
    CHECK(schedule_checked(*milp, phase, target).horizon == 37);
    const std::string line = log.take_last_line_with(kScheduledLine);
    CHECK(field(line, "optimal") == "true");
    CHECK(field(line, "solution") == "milp");
    CHECK(number(line, "list_horizon") == 47);
  }
}

TEST_CASE("milp reaches the endpoint bound on the ideal target without multicast", "[milp]") {
  // Latency 0 and no switch cost: the preemptive optimum is the endpoint bound (König).
  // Sums of three permutations with unequal sizes: the list schedule misses the bound on
  // some of them, so GLPK has to find it.
  const Target ideal = without_multicast(shipped_target("t1472-ideal"));
  auto milp = make_scheduler("milp");
  LogCapture log(kLogger);
  int solved_by_glpk = 0;
  for (std::uint32_t tiles : {5u, 6u, 8u})
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      const ExchangePhase phase = permutation_phase(tiles, 3, 2, 9, seed);
      const ScheduleReport report = schedule_checked(*milp, phase, ideal);
      const std::string line = log.take_last_line_with(kScheduledLine);
      INFO(tiles << " tiles, seed " << seed << ": " << line);
      CHECK(report.horizon == report.endpoint_lower_bound);
      CHECK(field(line, "optimal") == "true");
      solved_by_glpk += field(line, "solution") == "milp";
    }
  CHECK(solved_by_glpk >= 2);
}

TEST_CASE("milp schedules multicast with switch cost validly, and no heuristic beats a proven optimum", "[milp]") {
  const Target small = shipped_target("t16");
  auto milp = make_scheduler("milp");
  auto greedy = make_scheduler("greedy");
  auto latency_aware = make_scheduler("latency-aware");
  LogCapture log(kLogger);
  int proven = 0, multicast_proven = 0;
  for (const ExchangePhase& phase : small_t16_phases()) {
    const ScheduleReport exact = schedule_checked(*milp, phase, small, 1500);
    const std::string line = log.take_last_line_with(kScheduledLine);
    const ScheduleReport list = schedule_checked(*greedy, phase, small);
    const ScheduleReport heuristic = schedule_checked(*latency_aware, phase, small, 200);
    INFO(line << "\ngreedy " << list.horizon << " latency-aware " << heuristic.horizon);
    CHECK(exact.horizon <= number(line, "list_horizon"));
    CHECK(number(line, "proven_bound") <= exact.horizon);
    CHECK(number(line, "proven_bound") >= exact.lower_bound);
    if (field(line, "optimal") == "true") {
      ++proven;
      const bool has_multicast = std::any_of(phase.transfers.begin(), phase.transfers.end(),
                                             [](const Transfer& t) { return t.destinations.size() > 1; });
      multicast_proven += has_multicast;
      CHECK(list.horizon >= exact.horizon);
      CHECK(heuristic.horizon >= exact.horizon);
    }
  }
  CHECK(proven >= 8);  // measured: 11 of the 12 proven optimal within 1.5 s
  CHECK(multicast_proven >= 3);
}

TEST_CASE("milp falls back to the list schedule when the model is too big", "[milp]") {
  const Target target = shipped_target("t1472");
  ExchangePhase phase;
  phase.tiles = 1472;
  phase.transfers = {Transfer{0, {1}, 10, 0, {}}, Transfer{0, {1400}, 10, 0, {}}};
  LogCapture log(kLogger);
  auto small = make_scheduler("milp", options({{"max_variables", std::int64_t{20}}}));
  const ScheduleReport report = schedule_checked(*small, phase, target);
  const std::string line = log.take_last_line_with(kScheduledLine);
  CHECK(report.horizon == 47);  // the list schedule, near receiver first
  CHECK(field(line, "optimal") == "false");
  CHECK(field(line, "solution") == "list-schedule");
  CHECK(line.find("reason=too-many-variables") != std::string::npos);
}

TEST_CASE("milp stops at its time budget and reports the gap", "[milp]") {
  // A congested phase (20 transfers, multicast to up to 6 of 16 tiles) GLPK cannot decide
  // in a few hundred milliseconds.
  const Target small = shipped_target("t16");
  RandomPhaseShape shape;
  shape.tiles = 16;
  shape.transfers = 20;
  shape.max_words = 12;
  shape.multicast_fraction = 0.3;
  shape.max_fanout = 6;
  const ExchangePhase phase = random_phase(shape, 1);
  LogCapture log(kLogger);
  const auto started = std::chrono::steady_clock::now();
  const ScheduleReport report = schedule_checked(*make_scheduler("milp"), phase, small, 300);
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  const std::string line = log.take_last_line_with(kScheduledLine);
  INFO(line);
  INFO("elapsed " << elapsed << " ms for a 300 ms budget");  // not checked: the machine may be busy
  CHECK(field(line, "optimal") == "false");
  CHECK(std::stod(field(line, "gap")) > 0);
  CHECK(number(line, "milp_horizon") == report.horizon);
  CHECK(number(line, "lower_bound") == report.lower_bound);
  CHECK(line.find("elapsed_ms=") != std::string::npos);
}

TEST_CASE("milp returns nothing for an empty phase and refuses what the target cannot carry", "[milp]") {
  auto milp = make_scheduler("milp");
  const CheckedSchedule empty = schedule_and_check(*milp, empty_phase(16), shipped_target("t16"),
                                                   {.budget_ms = 100, .max_segments_per_transfer = 0});
  CHECK(empty.report.horizon == 0);
  CHECK(empty.schedule.segments.empty());
  const ExchangePhase phase = phase_of(16, {transfer(0, {1, 2}, 4)});
  CHECK_THROWS_WITH(milp->schedule(phase, without_multicast(shipped_target("t16")), 100),
                    Catch::Contains("given to scheduler 'milp' is malformed") &&
                        Catch::Contains("transfer 0 has 2 destinations but target 't16-unicast' has no multicast"));
  CHECK_THROWS_WITH(make_scheduler("milp", options({{"max_variables", std::int64_t{0}}})),
                    Catch::Contains("option 'max_variables' of plugin 'milp' must be >= 1, got 0"));
  CHECK_THROWS_WITH(make_scheduler("milp", options({{"budget_fraction", 0.0}})),
                    Catch::Contains("option 'budget_fraction' of plugin 'milp' must be in (0, 1], got 0"));
}
