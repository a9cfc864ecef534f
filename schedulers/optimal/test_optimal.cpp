// The `optimal` scheduler, loaded through the real plugin host and checked by the validator.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "shipped_target.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/schedule.hpp"
#include "tessera/testing/targets.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::unique_ptr<ExchangeScheduler> make_optimal(const std::string& repair = "") {
  Options given;
  if (!repair.empty()) given.values["repair"] = repair;
  return make_scheduler("optimal", given);
}

std::size_t transfers_with_words(const ExchangePhase& phase) {
  return static_cast<std::size_t>(
      std::count_if(phase.transfers.begin(), phase.transfers.end(), [](const Transfer& t) { return t.words > 0; }));
}

// schedule_and_check, and preemption stays rare: at most two segments per transfer on average.
CheckedSchedule schedule_checked(ExchangeScheduler& scheduler, const ExchangePhase& phase, const Target& target) {
  CheckedSchedule checked = schedule_and_check(scheduler, phase, target);
  CHECK(checked.schedule.segments.size() <= 2 * transfers_with_words(phase));
  return checked;
}

double segments_per_transfer(const Schedule& schedule, const ExchangePhase& phase) {
  return double(schedule.segments.size()) / double(std::max<std::size_t>(1, transfers_with_words(phase)));
}

struct NamedShape {
  std::string name;
  ExchangePhase phase;
  bool structured;  ///< made of same-sized rounds, which should come out whole
};

// The shapes the ideal-target tests run, at test size (well under a second each).
std::vector<NamedShape> unicast_shapes() {
  RandomPhaseShape uniform;
  uniform.transfers = 20000;
  return {
      {"uniform random", random_phase(uniform, 1), false},
      {"all-to-all 160 tiles", group_all_to_all_phase(160, 160, 1, false, 64, 2), false},
      {"reduce-scatter groups of 16", reduce_scatter_phase(1472, 16, 1, 3), false},
      {"reduce-scatter groups of 48, 3 parts", reduce_scatter_phase(1440, 48, 3, 4), false},
      {"hot receivers", skewed_phase(1472, 30000, 16, 5), false},
      {"sum of 24 permutations", permutation_phase(1472, 24, 1, 30, 6), true},
      {"sum of 8 permutations, 4 parts", permutation_phase(1472, 8, 1, 30, 7, 4), true},
      {"sum of 16 permutations, shuffled", shuffled(permutation_phase(1472, 16, 1, 30, 8), 9), true},
      {"scatter fanout 24", scatter_phase(1472, 24, 1, 48, 10), false},
  };
}

ExchangePhase multicast_phase(std::uint32_t transfers, std::uint64_t seed) {
  RandomPhaseShape shape;
  shape.transfers = transfers;
  shape.multicast_fraction = 0.25;
  shape.max_fanout = 6;
  return random_phase(shape, seed);
}

}  // namespace

TEST_CASE("optimal loads through the plugin host as an exchange scheduler", "[optimal]") {
  const PluginInfo* info = shipped_plugins().find("optimal");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::exchange_scheduler);
  REQUIRE(info->options.size() == 1);
  CHECK(info->options[0].name == "repair");
  CHECK(std::get<std::string>(info->options[0].default_value) == "best");
}

TEST_CASE("optimal passes the check-plugin scheduler battery", "[optimal][battery]") {
  check_battery(scheduler_battery([] { return make_optimal(); }, unit_test_battery_options()));
}

TEST_CASE("optimal reaches the endpoint bound exactly on the ideal target without multicast", "[optimal]") {
  const Target ideal = without_multicast(shipped_target("t1472-ideal"));
  auto optimal = make_optimal();
  for (const NamedShape& shape : unicast_shapes()) {
    const auto [schedule, report] = schedule_checked(*optimal, shape.phase, ideal);
    const double per_transfer = segments_per_transfer(schedule, shape.phase);
    INFO(shape.name << ": horizon " << report.horizon << " bound " << report.endpoint_lower_bound
                    << " segments per transfer " << per_transfer);
    CHECK(report.horizon == report.endpoint_lower_bound);
    CHECK(report.lower_bound == report.endpoint_lower_bound);
    // Preemption is rare: a transfer is split only to make room for a port with no slack.
    CHECK(per_transfer <= 1.1);
    // Same-sized rounds come out whole, whatever order the phase lists them in.
    if (shape.structured) CHECK(schedule.segments.size() == transfers_with_words(shape.phase));
  }
}

TEST_CASE("optimal beats non-preemptive list scheduling where that falls short of the bound", "[optimal]") {
  // Every port of a sum of permutations is at the bound, so a port that waits once for a
  // busy partner can never catch up; greedy loses about 10% here.
  const Target ideal = without_multicast(shipped_target("t1472-ideal"));
  const ExchangePhase phase = permutation_phase(1472, 24, 1, 30, 6);
  const ScheduleReport optimal = schedule_checked(*make_optimal(), phase, ideal).report;
  ScheduleReport greedy;
  make_scheduler("greedy")->schedule(phase, ideal, 2000, &greedy);
  INFO("optimal " << optimal.horizon << " greedy " << greedy.horizon << " bound " << optimal.endpoint_lower_bound);
  CHECK(optimal.horizon == optimal.endpoint_lower_bound);
  CHECK(greedy.horizon > optimal.horizon);
}

TEST_CASE("optimal schedules multicast validly at the bound on the ideal target", "[optimal]") {
  const Target ideal = shipped_target("t1472-ideal");
  auto optimal = make_optimal();
  for (std::uint64_t seed : {11u, 12u}) {
    const ExchangePhase phase = multicast_phase(20000, seed);
    const auto [schedule, report] = schedule_checked(*optimal, phase, ideal);
    INFO("seed " << seed << ": horizon " << report.horizon << " lower bound " << report.lower_bound);
    // A multicast needs all its ports at once, so the bound is not always reachable; on
    // random phases it is reached or nearly (measured 1.000 to 1.037 over seeds 11 to 14).
    CHECK(double(report.horizon) <= 1.05 * double(report.lower_bound));
    CHECK(segments_per_transfer(schedule, phase) <= 1.1);
  }
}

TEST_CASE("optimal schedules broadcasts quickly and validly", "[optimal]") {
  // 100 transfers to every other tile among 20,000 unicast ones: a broadcast waits on one
  // busy port at a time instead of sitting in 1,471 lists that every freed receiver scans.
  ExchangePhase phase = broadcast_phase(1472, 100, 32, 31);
  RandomPhaseShape shape;
  shape.transfers = 20000;
  for (Transfer& transfer : random_phase(shape, 32).transfers) phase.transfers.push_back(std::move(transfer));
  auto optimal = make_optimal();
  for (const char* target_name : {"t1472-ideal", "t1472"}) {
    const auto started = std::chrono::steady_clock::now();
    const ScheduleReport report = schedule_checked(*optimal, phase, shipped_target(target_name)).report;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    INFO(target_name << ": horizon " << report.horizon << " lower bound " << report.lower_bound << ", " << seconds
                     << " s with validation");
    // Broadcasts conflict pairwise, so the bound (their sum plus the busiest port's unicast
    // words) is nearly reached: measured 1.011 and 1.025.
    CHECK(double(report.horizon) <= 1.1 * double(report.lower_bound));
  }
}

TEST_CASE("optimal stretches the horizon where multicast makes the bound unreachable", "[optimal]") {
  // Transfer 0 needs receivers 1 and 2 at once for 10 cycles; tile 3 must send 10 words to
  // each of them outside those cycles, one at a time: 30 cycles, though no port has more
  // than 20 words.
  ExchangePhase phase;
  phase.tiles = 4;
  phase.transfers = {transfer(0, {1, 2}, 10), transfer(3, {1}, 10), transfer(3, {2}, 10)};
  const auto [schedule, report] = schedule_checked(*make_optimal(), phase, shipped_target("t1472-ideal"));
  CHECK(report.endpoint_lower_bound == 20);
  CHECK(report.horizon == 30);
  CHECK(schedule.segments.size() == 3);
}

TEST_CASE("optimal places its schedule validly on targets with latency and switch cost", "[optimal]") {
  const Target realistic = shipped_target("t1472");
  std::vector<NamedShape> shapes = unicast_shapes();
  shapes.push_back({"random 25% multicast", multicast_phase(20000, 13), false});
  auto optimal = make_optimal();
  for (const NamedShape& shape : shapes) {
    const ScheduleReport report = schedule_checked(*optimal, shape.phase, realistic).report;
    INFO(shape.name << ": horizon " << report.horizon << " lower bound " << report.lower_bound);
    // Measured between 1.002 and 1.36 times the lower bound; the bound itself is not
    // reachable in general (latency and switch cost make the problem NP-hard).
    CHECK(double(report.horizon) <= 1.5 * double(report.lower_bound));
  }
}

TEST_CASE("optimal keeps the shorter placement when asked for the best", "[optimal]") {
  const Target realistic = shipped_target("t1472");
  for (const NamedShape& shape : {NamedShape{"hot receivers", skewed_phase(1472, 30000, 16, 5), false},
                                  NamedShape{"multicast", multicast_phase(20000, 14), false}}) {
    const ScheduleReport best = schedule_checked(*make_optimal("best"), shape.phase, realistic).report;
    const ScheduleReport dense = schedule_checked(*make_optimal("dense"), shape.phase, realistic).report;
    const ScheduleReport shifted = schedule_checked(*make_optimal("left-shift"), shape.phase, realistic).report;
    INFO(shape.name << ": best " << best.horizon << " dense " << dense.horizon << " left-shift " << shifted.horizon);
    CHECK(best.horizon == std::min(dense.horizon, shifted.horizon));
  }
}

TEST_CASE("optimal schedules a dense 16-tile phase with latency, switch cost and multicast", "[optimal]") {
  const Target small = shipped_target("t16");
  RandomPhaseShape shape;
  shape.tiles = 16;
  shape.transfers = 3000;
  shape.multicast_fraction = 0.3;
  shape.max_fanout = 5;
  for (std::uint64_t seed = 20; seed < 23; ++seed)
    for (const char* repair : {"best", "dense", "left-shift"}) {
      const ScheduleReport report = schedule_checked(*make_optimal(repair), random_phase(shape, seed), small).report;
      INFO(repair << " seed " << seed << ": horizon " << report.horizon << " lower bound " << report.lower_bound);
      CHECK(double(report.horizon) <= 1.6 * double(report.lower_bound));
    }
}

TEST_CASE("optimal returns nothing for an empty phase or one without words", "[optimal]") {
  auto optimal = make_optimal();
  for (const char* target_name : {"t1472", "t1472-ideal"}) {
    ExchangePhase phase;
    phase.tiles = 1472;
    const CheckedSchedule empty = schedule_checked(*optimal, phase, shipped_target(target_name));
    CHECK(empty.report.horizon == 0);
    CHECK(empty.schedule.segments.empty());
    phase.transfers = {transfer(0, {1}, 0), transfer(2, {3, 4}, 0)};
    const CheckedSchedule wordless = schedule_checked(*optimal, phase, shipped_target(target_name));
    CHECK(wordless.report.horizon == 0);
    CHECK(wordless.schedule.segments.empty());
  }
}

TEST_CASE("optimal sends a single transfer at once in one segment", "[optimal]") {
  auto optimal = make_optimal();
  for (const char* target_name : {"t1472", "t1472-ideal"}) {
    const Target target = shipped_target(target_name);
    ExchangePhase phase;
    phase.tiles = 1472;
    phase.transfers = {transfer(5, {1400}, 100)};
    const auto [schedule, report] = schedule_checked(*optimal, phase, target);
    REQUIRE(schedule.segments.size() == 1);
    CHECK(schedule.segments[0].start == 0);
    CHECK(schedule.segments[0].words == 100);
    CHECK(report.horizon == 100 + target.latency(5, 1400));
    CHECK(report.horizon == report.lower_bound);
  }
}

TEST_CASE("optimal gives the same schedule for the same input", "[optimal]") {
  for (const char* target_name : {"t1472", "t1472-ideal"}) {
    const Target target = shipped_target(target_name);
    const ExchangePhase phase = multicast_phase(8000, 42);
    auto optimal = make_optimal();
    const Schedule first = schedule_checked(*optimal, phase, target).schedule;
    const Schedule second = schedule_checked(*optimal, phase, target).schedule;
    const Schedule third = schedule_checked(*make_optimal(), phase, target).schedule;
    CHECK(same_schedule(first, second));
    CHECK(same_schedule(first, third));
  }
}

TEST_CASE("optimal refuses malformed phases and a bad repair option with a fix", "[optimal]") {
  auto optimal = make_optimal();
  ExchangePhase phase;
  phase.tiles = 16;
  phase.transfers = {Transfer{0, {1, 2}, 4, 0, {}}};
  CHECK_THROWS_WITH(optimal->schedule(phase, without_multicast(shipped_target("t16")), 100),
                    Catch::Contains("given to scheduler 'optimal' is malformed") &&
                        Catch::Contains("transfer 0 has 2 destinations but target 't16-unicast' "
                                        "has no multicast; split it into one transfer per destination"));
  phase.transfers = {transfer(0, {16}, 4)};
  CHECK_THROWS_WITH(optimal->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("destination tile 16 is out of range"));
  phase.transfers = {Transfer{3, {}, 4, 0, {}}};
  CHECK_THROWS_WITH(optimal->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("transfer 0 (from tile 3) has no destination"));
  phase.transfers = {Transfer{3, {5, 5}, 4, 0, {}}};
  CHECK_THROWS_WITH(optimal->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("destination tile 5 is listed twice"));
  phase.tiles = 17;
  phase.transfers.clear();
  CHECK_THROWS_WITH(optimal->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("the phase has 17 tiles but target 't16' has only 16"));
  CHECK_THROWS_WITH(
      make_optimal("fastest"),
      Catch::Contains("option 'repair' of plugin 'optimal' must be one of: best, dense, left-shift, got 'fastest'"));
}

TEST_CASE("optimal schedules 150k transfers on 1472 tiles without per-word work", "[optimal][large]") {
  // About 0.2 s on one core: a figure of `make bench-exchange`, not a wall-clock check here.
  const ExchangePhase phase = scatter_phase(1472, 100, 18, 48, 150);
  const Target ideal = without_multicast(shipped_target("t1472-ideal"));
  const auto started = std::chrono::steady_clock::now();
  const auto [schedule, report] = schedule_checked(*make_optimal(), phase, ideal);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("150k transfers: " << seconds << " s with validation");
  CHECK(report.horizon == report.endpoint_lower_bound);
}

// Run with `test_optimal "[.perf]"`: a table of ratio to the lower bound, segments per
// transfer and elapsed time per shape and target, beside greedy, plus the 586k phase. The
// plugin's own log line (debug level) gives its elapsed time without the validation.
TEST_CASE("optimal prints its figures on the shipped targets", "[optimal][.perf]") {
  auto log = tessera::logger("tessera.scheduler.optimal");
  const spdlog::level::level_enum previous = log->level();
  log->set_level(spdlog::level::debug);
  auto run = [&](const std::string& shape, const ExchangePhase& phase, const Target& target, const std::string& name,
                 ExchangeScheduler& scheduler) {
    // CPU time as well as wall time: on a machine shared by several builds, wall time
    // measures the neighbours too.
    const auto started = std::chrono::steady_clock::now();
    const std::clock_t cpu_started = std::clock();
    ScheduleReport report;
    const Schedule schedule = scheduler.schedule(phase, target, 2000, &report);
    const double cpu_ms = 1000.0 * double(std::clock() - cpu_started) / CLOCKS_PER_SEC;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    fmt::print(
        "{:<36} {:<12} {:<8} transfers={:>6} endpoint_lower_bound={:>5} lower_bound={:>5} "
        "horizon={:>5} ratio={:.4f} segments_per_transfer={:.3f} with_validation_ms={:.0f} "
        "with_validation_cpu_ms={:.0f}\n",
        shape, target.name, name, phase.transfers.size(), report.endpoint_lower_bound, report.lower_bound,
        report.horizon, double(report.horizon) / double(std::max<std::uint64_t>(1, report.lower_bound)),
        segments_per_transfer(schedule, phase), ms, cpu_ms);
    CHECK(report.valid);
  };
  auto optimal = make_optimal();
  auto greedy = make_scheduler("greedy");
  const Target ideal = shipped_target("t1472-ideal");
  const Target realistic = shipped_target("t1472");
  std::vector<NamedShape> shapes = unicast_shapes();
  shapes.push_back({"random 25% multicast", multicast_phase(20000, 13), false});
  for (const NamedShape& shape : shapes)
    for (const Target* target : {&ideal, &realistic}) {
      run(shape.name, shape.phase, *target, "optimal", *optimal);
      run(shape.name, shape.phase, *target, "greedy", *greedy);
    }
  const ExchangePhase big = scatter_phase(1472, 398, 16, 44, 586);
  run("scatter 586k", big, ideal, "optimal", *optimal);
  run("scatter 586k", big, realistic, "optimal", *optimal);
  run("scatter 586k", big, realistic, "greedy", *greedy);
  log->set_level(previous);
}
