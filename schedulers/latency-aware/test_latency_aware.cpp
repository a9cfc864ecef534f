// The `latency-aware` scheduler, loaded through the real plugin host and compared with `greedy`.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"
#include "sanitizer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "exchange_testing.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "traffic_shapes.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

// A test budget: enough for every start on these sizes, small enough for a fast test.
constexpr std::uint64_t kBudgetMs = 400;

// Schedules through the public entry point (which validates), then re-checks it here.
ScheduleReport schedule_and_check(ExchangeScheduler& scheduler, const ExchangePhase& phase,
                                  const Target& target, Schedule* out = nullptr,
                                  std::uint64_t budget_ms = kBudgetMs) {
  ScheduleReport report;
  Schedule schedule = scheduler.schedule(phase, target, budget_ms, &report);
  const ScheduleReport again = validate_schedule(phase, schedule, target);
  INFO(again.first_conflict);
  REQUIRE(again.valid);
  REQUIRE(again.horizon == report.horizon);
  CHECK(report.horizon >= report.lower_bound);
  if (out) *out = std::move(schedule);
  return report;
}

Target without_multicast(Target target) {
  target.multicast = false;
  target.name += "-unicast";
  return target;
}

double ratio(const ScheduleReport& report) {
  return static_cast<double>(report.horizon) / static_cast<double>(report.lower_bound);
}

bool same_schedule(const Schedule& a, const Schedule& b) {
  return std::equal(a.segments.begin(), a.segments.end(), b.segments.begin(), b.segments.end(),
                    [](const Segment& x, const Segment& y) {
                      return x.transfer == y.transfer && x.start == y.start && x.words == y.words;
                    });
}

// Captures what the plugin logs through its spdlog logger.
class LogCapture {
public:
  LogCapture() : logger_(tessera::logger("tessera.scheduler.latency-aware")) {
    sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(stream_);
    sink_->set_pattern("%v");
    logger_->sinks().push_back(sink_);
    previous_level_ = logger_->level();
    logger_->set_level(spdlog::level::info);
  }
  ~LogCapture() {
    auto& sinks = logger_->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
    logger_->set_level(previous_level_);
  }
  std::string text() const { return stream_.str(); }

private:
  std::shared_ptr<spdlog::logger> logger_;
  std::ostringstream stream_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  spdlog::level::level_enum previous_level_;
};

// The value of `key=` in a key=value log line.
std::uint64_t field(const std::string& line, const std::string& key) {
  const std::size_t at = line.find(key + "=");
  REQUIRE(at != std::string::npos);
  return std::stoull(line.substr(at + key.size() + 1));
}

struct NamedPhase {
  const char* name;
  ExchangePhase phase;
};

// Unicast phases shaped like compiler traffic on 1472 tiles, small enough for a unit test.
std::vector<NamedPhase> realistic_unicast_phases() {
  RandomPhaseShape uniform;
  uniform.transfers = 30000;
  return {
      {"8 permutations of 1024 words", permutation_phase(1472, 8, 1024, 1024, 3)},
      {"16 permutations of 32..512 words", permutation_phase(1472, 16, 32, 512, 1)},
      {"32 permutations of 64..256 words", permutation_phase(1472, 32, 64, 256, 7)},
      {"all-to-all in strided groups of 23, 200 words",
       group_all_to_all_phase(1472, 23, 200, true)},
      {"all-to-all in column groups of 64, 32 words", group_all_to_all_phase(1472, 64, 32, false)},
      {"all-to-all in strided groups of 46, 1..64 words",
       group_all_to_all_phase(1472, 46, 1, true, 64, 4)},
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
  CHECK(names ==
        std::vector<std::string>{"budget_fraction", "seed", "max_improvement_rounds", "lookahead"});
  const Options defaults = shipped_plugins().resolve_options(*info, {}, "test");
  CHECK(defaults.get_number("budget_fraction") == Approx(0.4));
  CHECK(defaults.get_int("seed") == 1);
}

TEST_CASE("latency-aware schedules random 1472-tile phases validly, with and without multicast",
          "[latency-aware]") {
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
    const ScheduleReport mixed = schedule_and_check(*scheduler, with_multicast, realistic);
    CHECK(mixed.horizon <= schedule_and_check(*greedy, with_multicast, realistic).horizon);
    const ExchangePhase plain = random_phase(unicast, 10 + seed);
    schedule_and_check(*scheduler, plain, without_multicast(realistic));
    schedule_and_check(*scheduler, plain, shipped_target("t1472-ideal"));
  }
}

TEST_CASE("latency-aware handles latency and switch cost on a dense 16-tile phase",
          "[latency-aware]") {
  const Target small = shipped_target("t16");
  RandomPhaseShape shape;
  shape.tiles = 16;
  shape.transfers = 3000;
  shape.multicast_fraction = 0.3;
  shape.max_fanout = 5;
  const ExchangePhase phase = random_phase(shape, 5);
  const ScheduleReport report = schedule_and_check(*make_scheduler("latency-aware"), phase, small);
  const ScheduleReport greedy = schedule_and_check(*make_scheduler("greedy"), phase, small);
  INFO("latency-aware " << report.horizon << " greedy " << greedy.horizon << " bound "
                        << report.lower_bound);
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
    const ScheduleReport ours = schedule_and_check(*scheduler, named.phase, target, nullptr, 8 * kBudgetMs);
    const ScheduleReport theirs = schedule_and_check(*greedy, named.phase, target);
    INFO(named.name << ": latency-aware " << ours.horizon << " (" << ratio(ours) << "x), greedy "
                    << theirs.horizon << " (" << ratio(theirs) << "x), lower bound "
                    << ours.lower_bound);
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
    const ScheduleReport ours = schedule_and_check(*scheduler, named.phase, target);
    const ScheduleReport theirs = schedule_and_check(*greedy, named.phase, target);
    INFO(named.name << ": latency-aware " << ours.horizon << " greedy " << theirs.horizon
                    << " bound " << ours.lower_bound);
    CHECK(ours.horizon <= theirs.horizon);
  }
}

TEST_CASE("latency-aware gives the same schedule for the same input", "[latency-aware]") {
  const Target target = shipped_target("t1472");
  RandomPhaseShape shape;
  shape.transfers = 5000;
  shape.multicast_fraction = 0.1;
  const ExchangePhase phase = random_phase(shape, 42);
  Schedule first, second, third;
  auto scheduler = make_scheduler("latency-aware");
  schedule_and_check(*scheduler, phase, target, &first);
  schedule_and_check(*scheduler, phase, target, &second);
  schedule_and_check(*make_scheduler("latency-aware"), phase, target, &third);
  CHECK(same_schedule(first, second));
  CHECK(same_schedule(first, third));
  // Another seed explores other moves: still valid, and as good as the starts.
  Schedule other;
  const ScheduleReport reseeded =
      schedule_and_check(*make_scheduler("latency-aware", options({{"seed", std::int64_t{7}}})),
                         phase, target, &other);
  CHECK(reseeded.horizon <= schedule_and_check(*make_scheduler("greedy"), phase, target).horizon);
}

TEST_CASE("latency-aware logs its horizons and neighbourhood improvements", "[latency-aware]") {
  const Target target = without_multicast(shipped_target("t1472"));
  const ExchangePhase phase = group_all_to_all_phase(1472, 23, 200, true);
  LogCapture capture;
  const ScheduleReport report = schedule_and_check(*make_scheduler("latency-aware"), phase, target);
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
  LogCapture capture;
  // The work of the default fraction (0.4) of 1 s, with 8x the wall clock (see above).
  schedule_and_check(*make_scheduler("latency-aware", options({{"budget_fraction", 0.05}})), phase, target, nullptr,
                     8000);
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
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - started)
                              .count();
  INFO("120k transfers: " << elapsed_ms << " ms, horizon " << report.horizon << ", bound "
                          << report.lower_bound);
  CHECK(report.valid);
  // Work is planned for 40% of the budget and the wall clock stops it at the budget; the
  // elapsed time is shown, not checked: a wall-clock bound fails on a busy machine.
  CHECK(ratio(report) < 1.05);
}

TEST_CASE("latency-aware stops after max_improvement_rounds", "[latency-aware]") {
  const Target target = without_multicast(shipped_target("t1472"));
  const ExchangePhase phase = group_all_to_all_phase(1472, 64, 32, true);
  LogCapture capture;
  schedule_and_check(
      *make_scheduler("latency-aware", options({{"max_improvement_rounds", std::int64_t{5}}})),
      phase, target);
  CHECK(field(capture.text(), "evaluations") <= 5);
}

TEST_CASE("latency-aware returns nothing for an empty phase and sends a lone transfer at once",
          "[latency-aware]") {
  const Target target = shipped_target("t1472");
  ExchangePhase phase;
  phase.tiles = 1472;
  auto scheduler = make_scheduler("latency-aware");
  Schedule schedule;
  CHECK(schedule_and_check(*scheduler, phase, target, &schedule).horizon == 0);
  CHECK(schedule.segments.empty());
  phase.transfers.push_back(Transfer{5, {1400}, 100, 0, {}});
  phase.transfers.push_back(Transfer{6, {7}, 0, 0, {}});  // no words: no segment
  const ScheduleReport report = schedule_and_check(*scheduler, phase, target, &schedule);
  REQUIRE(schedule.segments.size() == 1);
  CHECK(schedule.segments[0].start == 0);
  CHECK(report.horizon == report.lower_bound);
}

TEST_CASE("latency-aware refuses phases the target cannot carry and bad options",
          "[latency-aware]") {
  ExchangePhase phase;
  phase.tiles = 16;
  phase.transfers.push_back(Transfer{0, {1, 2}, 4, 0, {}});
  auto scheduler = make_scheduler("latency-aware");
  CHECK_THROWS_WITH(
      scheduler->schedule(phase, without_multicast(shipped_target("t16")), 100),
      Catch::Contains("given to scheduler 'latency-aware' is malformed") &&
          Catch::Contains(
              "transfer 0 has 2 destinations but target 't16-unicast' has no multicast"));
  phase.transfers[0].destinations = {16};
  CHECK_THROWS_WITH(scheduler->schedule(phase, shipped_target("t16"), 100),
                    Catch::Contains("destination tile 16 is out of range"));
  CHECK_THROWS_WITH(make_scheduler("latency-aware", options({{"budget_fraction", 1.5}})),
                    Catch::Contains("option 'budget_fraction' of plugin 'latency-aware' must be in (0, 1], got 1.5"));
  CHECK_THROWS_WITH(make_scheduler("latency-aware", options({{"lookahead", std::int64_t{-3}}})),
                    Catch::Contains("option 'lookahead' of plugin 'latency-aware' must be in [0, 4096], got -3"));
}
