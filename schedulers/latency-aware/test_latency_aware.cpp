// The `latency-aware` scheduler, loaded through the real plugin host and compared with `greedy`.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"
#include "sanitizer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
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

// A test budget: enough for every start on these sizes, small enough for a fast test.
constexpr std::uint64_t kBudgetMs = 400;

CheckedSchedule schedule_checked(ExchangeScheduler& scheduler, const ExchangePhase& phase, const Target& target,
                                 std::uint64_t budget_ms = kBudgetMs) {
  return schedule_and_check(scheduler, phase, target, {.budget_ms = budget_ms, .max_segments_per_transfer = 0});
}

double ratio(const ScheduleReport& report) {
  return static_cast<double>(report.horizon) / static_cast<double>(report.lower_bound);
}

constexpr const char* kLogger = "tessera.scheduler.latency-aware";

// The value of `key=` in a key=value log line.
std::uint64_t field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find(key + "=");
  REQUIRE(at != std::string::npos);
  return std::stoull(line.substr(at + key.size() + 1));
}

// Unicast phases shaped like compiler traffic on 1472 tiles, small enough for a unit test.
std::vector<NamedPhase> realistic_unicast_phases() {
  RandomPhaseShape uniform;
  uniform.transfers = 30000;
  return {
      {"8 permutations of 1024 words", permutation_phase(1472, 8, 1024, 1024, 3)},
      {"16 permutations of 32..512 words", permutation_phase(1472, 16, 32, 512, 1)},
      {"32 permutations of 64..256 words", permutation_phase(1472, 32, 64, 256, 7)},
      {"all-to-all in strided groups of 23, 200 words", group_all_to_all_phase(1472, 23, 200, true)},
      {"all-to-all in column groups of 64, 32 words", group_all_to_all_phase(1472, 64, 32, false)},
      {"all-to-all in strided groups of 46, 1..64 words", group_all_to_all_phase(1472, 46, 1, true, 64, 4)},
      {"4 hot receivers over 20k random transfers", hot_receiver_phase(1472, 4, 1000, 20000, 5)},
      {"30k uniform random transfers", random_phase(uniform, 6)},
      {"rings of 3 steps in strided groups of 16", ring_phase(1472, 16, 512, 3)},
  };
}

}  // namespace

TEST_CASE("latency-aware loads through the plugin host with its options", "[latency-aware]") {
  const PluginInfo* info = shipped_plugins().find("latency-aware");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::exchange_scheduler);
  std::vector<std::string> names;
  for (const OptionSpec& option : info->options) names.push_back(option.name);
  CHECK(names == std::vector<std::string>{"budget_fraction", "seed", "max_improvement_rounds", "lookahead"});
  const Options defaults = shipped_plugins().resolve_options(*info, {}, "test");
  CHECK(defaults.get_number("budget_fraction") == Approx(0.4));
  CHECK(defaults.get_int("seed") == 1);
}

TEST_CASE("latency-aware passes the check-plugin scheduler battery", "[latency-aware][battery]") {
  check_battery(scheduler_battery([] { return make_scheduler("latency-aware"); }, unit_test_battery_options()));
}

TEST_CASE("latency-aware schedules random 1472-tile phases validly, with and without multicast", "[latency-aware]") {
  const Target realistic = shipped_target("t1472");
  RandomPhaseShape unicast;
  unicast.transfers = 6000;
  RandomPhaseShape multicast = unicast;
  multicast.multicast_fraction = 0.25;
  multicast.max_fanout = 6;
  auto scheduler = make_scheduler("latency-aware");
  auto greedy = make_scheduler("greedy");
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    INFO("seed " << seed);
    const ExchangePhase with_multicast = random_phase(multicast, seed);
    const ScheduleReport mixed = schedule_checked(*scheduler, with_multicast, realistic).report;
    CHECK(mixed.horizon <= schedule_checked(*greedy, with_multicast, realistic).report.horizon);
    const ExchangePhase plain = random_phase(unicast, 10 + seed);
    schedule_checked(*scheduler, plain, without_multicast(realistic));
    schedule_checked(*scheduler, plain, shipped_target("t1472-ideal"));
  }
}

TEST_CASE("latency-aware handles latency and switch cost on a dense 16-tile phase", "[latency-aware]") {
  const Target small = shipped_target("t16");
  RandomPhaseShape shape;
  shape.tiles = 16;
  shape.transfers = 3000;
  shape.multicast_fraction = 0.3;
  shape.max_fanout = 5;
  const ExchangePhase phase = random_phase(shape, 5);
  const ScheduleReport report = schedule_checked(*make_scheduler("latency-aware"), phase, small).report;
  const ScheduleReport greedy = schedule_checked(*make_scheduler("greedy"), phase, small).report;
  INFO("latency-aware " << report.horizon << " greedy " << greedy.horizon << " bound " << report.lower_bound);
  CHECK(report.horizon <= greedy.horizon);
  CHECK(report.lower_bound > report.endpoint_lower_bound);  // switch costs are charged
}

TEST_CASE(
    "latency-aware is within 1.05x of the lower bound on realistic unicast t1472 phases and never "
    "worse than greedy",
    "[latency-aware]") {
  // Measured at this 400 ms budget, in the order below: 1.0052, 1.0135, 1.0290, 1.0192,
  // 1.0000, 1.0186, 1.0001, 1.0088, 1.0019; greedy: 1.374, 1.194, 1.113, 1.138, 1.000,
  // 1.041, 1.000, 1.021, 1.327.
  const Target target = without_multicast(shipped_target("t1472"));
  // The same planned work as the default fraction (0.4) of kBudgetMs, with 8x the wall clock,
  // so a loaded machine cannot cut it short: the test is about quality, not speed.
  auto scheduler = make_scheduler("latency-aware", options({{"budget_fraction", 0.05}}));
  auto greedy = make_scheduler("greedy");
  for (const NamedPhase& named : realistic_unicast_phases()) {
    const ScheduleReport ours = schedule_checked(*scheduler, named.phase, target, 8 * kBudgetMs).report;
    const ScheduleReport theirs = schedule_checked(*greedy, named.phase, target).report;
    INFO(named.name << ": latency-aware " << ours.horizon << " (" << ratio(ours) << "x), greedy " << theirs.horizon
                    << " (" << ratio(theirs) << "x), lower bound " << ours.lower_bound);
    CHECK(ratio(ours) <= 1.05);
    CHECK(ours.horizon <= theirs.horizon);
  }
}

TEST_CASE("latency-aware never loses to greedy on multicast and skewed phases", "[latency-aware]") {
  const Target target = shipped_target("t1472");
  auto scheduler = make_scheduler("latency-aware");
  auto greedy = make_scheduler("greedy");
  RandomPhaseShape broadcast;
  broadcast.transfers = 8000;
  broadcast.multicast_fraction = 0.5;
  broadcast.max_fanout = 8;
  const std::vector<NamedPhase> phases = {
      {"half multicast", random_phase(broadcast, 77)},
      {"skewed", skewed_phase(1472, 20000, 24, 99)},
  };
  for (const NamedPhase& named : phases) {
    const ScheduleReport ours = schedule_checked(*scheduler, named.phase, target).report;
    const ScheduleReport theirs = schedule_checked(*greedy, named.phase, target).report;
    INFO(named.name << ": latency-aware " << ours.horizon << " greedy " << theirs.horizon << " bound "
                    << ours.lower_bound);
    CHECK(ours.horizon <= theirs.horizon);
  }
}

TEST_CASE("latency-aware gives the same schedule for the same input", "[latency-aware]") {
  const Target target = shipped_target("t1472");
  RandomPhaseShape shape;
  shape.transfers = 5000;
  shape.multicast_fraction = 0.1;
  const ExchangePhase phase = random_phase(shape, 42);
  auto scheduler = make_scheduler("latency-aware");
  const Schedule first = schedule_checked(*scheduler, phase, target).schedule;
  const Schedule second = schedule_checked(*scheduler, phase, target).schedule;
  const Schedule third = schedule_checked(*make_scheduler("latency-aware"), phase, target).schedule;
  CHECK(same_schedule(first, second));
  CHECK(same_schedule(first, third));
  // Another seed explores other moves: still valid, and as good as the starts.
  const ScheduleReport reseeded =
      schedule_checked(*make_scheduler("latency-aware", options({{"seed", std::int64_t{7}}})), phase, target).report;
  CHECK(reseeded.horizon <= schedule_checked(*make_scheduler("greedy"), phase, target).report.horizon);
}

TEST_CASE("latency-aware logs its horizons and neighbourhood improvements", "[latency-aware]") {
  const Target target = without_multicast(shipped_target("t1472"));
  const ExchangePhase phase = group_all_to_all_phase(1472, 23, 200, true);
  LogCapture capture(kLogger);
  const ScheduleReport report = schedule_checked(*make_scheduler("latency-aware"), phase, target).report;
  const std::string text = capture.text();
  INFO(text);
  REQUIRE(text.find("latency-aware scheduled exchange phase") != std::string::npos);
  CHECK(field(text, "transfers") == phase.transfers.size());
  CHECK(field(text, "final_horizon") == report.horizon);
  CHECK(field(text, "initial_horizon") >= report.horizon);
  CHECK(field(text, "lower_bound") == report.lower_bound);
  CHECK(text.find("neighborhood_improvements=") != std::string::npos);
}

TEST_CASE("latency-aware improves a start by neighbourhood moves", "[latency-aware]") {
  // All-to-all in strided groups of 64: every receiver pays 62 switches, latencies vary, and
  // the critical path has moves that pay (measured: 2238 -> 2217 cycles at a 2 s budget).
  const Target target = without_multicast(shipped_target("t1472"));
  const ExchangePhase phase = group_all_to_all_phase(1472, 64, 32, true);
  LogCapture capture(kLogger);
  // The work of the default fraction (0.4) of 1 s, with 8x the wall clock (see above).
  schedule_checked(*make_scheduler("latency-aware", options({{"budget_fraction", 0.05}})), phase, target, 8000);
  const std::string text = capture.text();
  INFO(text);
  CHECK(field(text, "neighborhood_improvements") > 0);
  CHECK(field(text, "final_horizon") < field(text, "initial_horizon"));
}

TEST_CASE("latency-aware respects its budget on 120k transfers", "[latency-aware][large]") {
  const Target target = shipped_target("t1472");
  RandomPhaseShape shape;
  shape.transfers = 120000;
  shape.multicast_fraction = 0.05;
  const ExchangePhase phase = random_phase(shape, 120);
  auto scheduler = make_scheduler("latency-aware");
  const std::uint64_t budget_ms = 2000;
  const auto started = std::chrono::steady_clock::now();
  ScheduleReport report;
  scheduler->schedule(phase, target, budget_ms, &report);  // includes the core's validation
  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  INFO("120k transfers: " << elapsed_ms << " ms, horizon " << report.horizon << ", bound " << report.lower_bound);
  CHECK(report.valid);
  // Work is planned for 40% of the budget and the wall clock stops it at the budget; the
  // elapsed time is shown, not checked: a wall-clock bound fails on a busy machine.
  CHECK(ratio(report) < 1.05);
}

TEST_CASE("latency-aware stops after max_improvement_rounds", "[latency-aware]") {
  const Target target = without_multicast(shipped_target("t1472"));
  const ExchangePhase phase = group_all_to_all_phase(1472, 64, 32, true);
  LogCapture capture(kLogger);
  schedule_checked(*make_scheduler("latency-aware", options({{"max_improvement_rounds", std::int64_t{5}}})), phase,
                   target);
  CHECK(field(capture.text(), "evaluations") <= 5);
}

TEST_CASE("latency-aware returns nothing for an empty phase and sends a lone transfer at once", "[latency-aware]") {
  const Target target = shipped_target("t1472");
  auto scheduler = make_scheduler("latency-aware");
  const CheckedSchedule empty = schedule_checked(*scheduler, empty_phase(1472), target);
  CHECK(empty.report.horizon == 0);
  CHECK(empty.schedule.segments.empty());
  const ExchangePhase phase = phase_of(1472, {transfer(5, {1400}, 100), transfer(6, {7}, 0)});  // no words: no segment
  const auto [schedule, report] = schedule_checked(*scheduler, phase, target);
  REQUIRE(schedule.segments.size() == 1);
  CHECK(schedule.segments[0].start == 0);
  CHECK(report.horizon == report.lower_bound);
}

TEST_CASE("latency-aware refuses phases the target cannot carry and bad options", "[latency-aware]") {
  ExchangePhase phase;
  phase.tiles = 16;
  phase.transfers.push_back(Transfer{0, {1, 2}, 4, 0, {}});
  auto scheduler = make_scheduler("latency-aware");
  CHECK_THROWS_WITH(scheduler->schedule(phase, without_multicast(shipped_target("t16")), 100),
                    Catch::Contains("given to scheduler 'latency-aware' is malformed") &&
                        Catch::Contains("transfer 0 has 2 destinations but target 't16-unicast' has no multicast"));
  phase.transfers[0].destinations = {16};
  CHECK_THROWS_WITH(scheduler->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("destination tile 16 is out of range"));
  CHECK_THROWS_WITH(make_scheduler("latency-aware", options({{"budget_fraction", 1.5}})),
                    Catch::Contains("option 'budget_fraction' of plugin 'latency-aware' must be in (0, 1], got 1.5"));
  CHECK_THROWS_WITH(make_scheduler("latency-aware", options({{"lookahead", std::int64_t{-3}}})),
                    Catch::Contains("option 'lookahead' of plugin 'latency-aware' must be in [0, 4096], got -3"));
}
