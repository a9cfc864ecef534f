// The test kit itself: the zoo is deterministic and well formed, and schedule_and_check and the
// batteries catch the faults they exist for, on small schedulers and cost models defined here.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/exchange.hpp"
#include "tessera/program.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/testing/battery.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/schedule.hpp"
#include "tessera/testing/targets.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

bool same_phase(const ExchangePhase& a, const ExchangePhase& b) {
  return a.tiles == b.tiles && std::equal(a.transfers.begin(), a.transfers.end(), b.transfers.begin(),
                                          b.transfers.end(), [](const Transfer& x, const Transfer& y) {
                                            return x.source == y.source && x.destinations == y.destinations &&
                                                   x.words == y.words;
                                          });
}

// One transfer at a time, each after the previous one has arrived everywhere: always valid.
// `split` sends each transfer of 2+ words as two segments; `drift` starts one cycle later on
// every call, so the same phase gets another schedule; `overlap` starts everything at cycle 0.
class SerialScheduler : public ExchangeScheduler {
public:
  enum class Fault { none, split, drift, overlap };
  explicit SerialScheduler(Fault fault = Fault::none) : fault_(fault) {}

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t) override {
    const std::uint64_t gap = target.latency(0, target.tiles - 1) + target.switch_cost + 64;
    std::uint64_t cycle = fault_ == Fault::drift ? calls_++ : 0;
    Schedule schedule;
    for (std::uint32_t i = 0; i < phase.transfers.size(); ++i) {
      const std::uint32_t words = phase.transfers[i].words;
      if (words == 0) continue;
      const std::uint64_t start = fault_ == Fault::overlap ? 0 : cycle;
      if (fault_ == Fault::split && words >= 2) {
        schedule.segments.push_back({i, start, words / 2});
        schedule.segments.push_back({i, start + words / 2, words - words / 2});
      } else {
        schedule.segments.push_back({i, start, words});
      }
      cycle += words + gap;
    }
    return schedule;
  }

private:
  Fault fault_;
  std::uint64_t calls_ = 0;
};

// Charges every operand word once and a phase its busiest port: plausible and monotone.
// `shrinking` charges fewer cycles as calls are added, which the battery must catch.
class WordCountModel : public CostModel {
public:
  explicit WordCountModel(bool shrinking = false) : shrinking_(shrinking) {}

protected:
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    CostEstimate estimate;
    std::uint64_t calls = 0;
    for (const Superstep& step : program.supersteps) {
      for (const CodeletCall& call : step.compute) {
        ++calls;
        estimate.compute_cycles += 1;
        for (std::uint32_t operand = 0; operand < codelet_operand_count(call.codelet); ++operand)
          estimate.compute_cycles += codelet_operand_words(call.codelet, call.params, operand);
      }
      for (const Copy& copy : step.copies) estimate.exchange_cycles += copy.words;
      estimate.sync_cycles += target.sync_cycles;
    }
    if (shrinking_ && calls > 0) estimate.compute_cycles = 1'000'000 / calls;
    std::vector<std::uint64_t> bytes_on_tile(target.tiles, 0);
    for (const Buffer& buffer : program.buffers) bytes_on_tile[buffer.tile] += buffer.bytes;
    estimate.peak_tile_bytes = *std::max_element(bytes_on_tile.begin(), bytes_on_tile.end());
    return estimate;
  }
  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) override {
    return endpoint_lower_bound(phase) + target.exchange_phase_overhead;
  }

private:
  bool shrinking_;
};

BatteryOptions in_process() {
  BatteryOptions options;
  options.check_time_budget = false;  // wall-clock: not in a unit test
  return options;
}

const CheckResult* find_check(const BatteryResult& result, const std::string& name) {
  for (const CheckResult& check : result.checks)
    if (check.name == name) return &check;
  return nullptr;
}

}  // namespace

TEST_CASE("phase zoo gives the same phase for the same seed and another for another", "[testing]") {
  RandomPhaseShape shape;
  shape.tiles = 64;
  shape.transfers = 500;
  shape.multicast_fraction = 0.3;
  CHECK(same_phase(random_phase(shape, 7), random_phase(shape, 7)));
  CHECK_FALSE(same_phase(random_phase(shape, 7), random_phase(shape, 8)));
  CHECK(same_phase(per_tile_random_phase(64, 4, 256, true, 3), per_tile_random_phase(64, 4, 256, true, 3)));
  CHECK_FALSE(same_phase(per_tile_random_phase(64, 4, 256, true, 3), per_tile_random_phase(64, 4, 256, true, 4)));
  CHECK(same_phase(permutation_phase(64, 3, 1, 30, 5, 2), permutation_phase(64, 3, 1, 30, 5, 2)));
}

TEST_CASE("phase zoo's structured cases have the shapes their names say", "[testing]") {
  const ExchangePhase fan_in = all_to_one_phase(16);
  CHECK(fan_in.transfers.size() == 15);
  CHECK(std::all_of(fan_in.transfers.begin(), fan_in.transfers.end(),
                    [](const Transfer& t) { return t.destinations == std::vector<std::uint32_t>{0}; }));
  const ExchangePhase fan_out = one_to_all_phase(16);
  CHECK(
      std::all_of(fan_out.transfers.begin(), fan_out.transfers.end(), [](const Transfer& t) { return t.source == 0; }));
  CHECK(all_to_all_phase(16).transfers.size() == 16 * 15);
  // Every tile sends and receives the same words in a sum of permutations: the endpoint bound.
  const ExchangePhase permutations = permutation_phase(32, 4, 10, 10, 1);
  CHECK(endpoint_lower_bound(permutations) == 40);
  CHECK(shuffled(permutations, 3).transfers.size() == permutations.transfers.size());
  const ExchangePhase broadcasts = broadcast_phase(16, 3, 8, 1);
  CHECK(std::all_of(broadcasts.transfers.begin(), broadcasts.transfers.end(),
                    [](const Transfer& t) { return t.destinations.size() == 15; }));
}

TEST_CASE("phase zoo lists only phases its target accepts", "[testing]") {
  for (const Target& target :
       {latency_target("latency-16", 16, 4), without_multicast(latency_target("latency-16", 16, 4)),
        ideal_target("ideal-1472", 1472, 64), latency_target("two", 2, 1)}) {
    const std::vector<NamedPhase> zoo = phase_zoo(target);
    CHECK(zoo.size() >= (target.tiles >= 2 ? 8u : 1u));
    for (const NamedPhase& named : zoo) {
      INFO(target.name << ": " << named.name);
      CHECK(check_phase(named.phase, target).empty());
    }
  }
}

TEST_CASE("schedule_and_check returns a valid schedule with its report", "[testing]") {
  SerialScheduler serial;
  const Target target = latency_target("latency-16", 16, 4);
  for (const NamedPhase& named : phase_zoo(target)) {
    INFO(named.name);
    const CheckedSchedule checked =
        schedule_and_check(serial, named.phase, target, {.budget_ms = 100, .max_segments_per_transfer = 1});
    CHECK(checked.report.valid);
    CHECK(checked.report.horizon >= checked.report.lower_bound);
  }
}

TEST_CASE("schedule_and_check refuses a split transfer where whole ones are expected, naming it", "[testing]") {
  SerialScheduler splitting(SerialScheduler::Fault::split);
  const Target target = latency_target("latency-16", 16, 4);
  const ExchangePhase phase = single_transfer_phase(16, 0, 9, 10);
  CHECK(schedule_and_check(splitting, phase, target).schedule.segments.size() == 2);  // no limit: fine
  CHECK_THROWS_AS(schedule_and_check(splitting, phase, target, {.budget_ms = 100, .max_segments_per_transfer = 1}),
                  ScheduleCheckFailure);
  CHECK_THROWS_WITH(schedule_and_check(splitting, phase, target, {.budget_ms = 100, .max_segments_per_transfer = 1}),
                    Catch::Contains("target 'latency-16'") &&
                        Catch::Contains("transfer 0 (10 words) is split into 2 segments, more than the 1 expected"));
}

TEST_CASE("scheduler battery passes a correct scheduler on every check", "[testing]") {
  const BatteryResult result = scheduler_battery([] { return std::make_unique<SerialScheduler>(); }, in_process());
  INFO(result.failures());
  CHECK(result.all_passed());
  CHECK(result.checks.size() == 13);  // 12 phases and `deterministic`; time-budget is off
  CHECK(find_check(result, "time-budget") == nullptr);
  REQUIRE(find_check(result, "fan-in-switch-cost") != nullptr);
  CHECK_THAT(find_check(result, "fan-in-switch-cost")->outcome.detail,
             Catch::StartsWith("target=check-harsh-16 transfers=15 "));
}

TEST_CASE("scheduler battery runs the extra target's checks and reports through its hooks", "[testing]") {
  BatteryOptions options = in_process();
  options.extra_target = latency_target("latency-32", 32, 8);
  std::vector<std::string> reported;
  int runs = 0;
  options.on_result = [&](const CheckResult& check) { reported.push_back(check.name); };
  options.runner = [&](const std::function<CheckOutcome()>& check) {
    ++runs;
    return check();
  };
  const BatteryResult result = scheduler_battery([] { return std::make_unique<SerialScheduler>(); }, options);
  CHECK(result.all_passed());
  CHECK(find_check(result, "random@latency-32") != nullptr);
  CHECK(find_check(result, "fan-in@latency-32") != nullptr);
  CHECK(runs == static_cast<int>(result.checks.size()));
  CHECK(reported.size() == result.checks.size());
}

TEST_CASE("scheduler battery fails a scheduler whose schedule changes between calls", "[testing]") {
  const BatteryResult result =
      scheduler_battery([] { return std::make_unique<SerialScheduler>(SerialScheduler::Fault::drift); }, in_process());
  const CheckResult* deterministic = find_check(result, "deterministic");
  REQUIRE(deterministic != nullptr);
  CHECK_FALSE(deterministic->outcome.passed);
  CHECK_THAT(deterministic->outcome.detail,
             Catch::Contains("a second call on the same object returned another schedule"));
  CHECK(result.failed() == 1);
  CHECK_THAT(result.failures(), Catch::StartsWith("deterministic: "));
}

TEST_CASE("scheduler battery fails an invalid schedule with the validator's conflict", "[testing]") {
  const BatteryResult result = scheduler_battery(
      [] { return std::make_unique<SerialScheduler>(SerialScheduler::Fault::overlap); }, in_process());
  CHECK_FALSE(result.all_passed());
  const CheckResult* fan_in = find_check(result, "fan-in-switch-cost");
  REQUIRE(fan_in != nullptr);
  CHECK_FALSE(fan_in->outcome.passed);
  CHECK_THAT(fan_in->outcome.detail, Catch::Contains("invalid schedule"));
  // The empty phase and a lone transfer cannot overlap: those still pass.
  CHECK(find_check(result, "empty-phase-1472-tiles")->outcome.passed);
  CHECK(find_check(result, "single-transfer")->outcome.passed);
}

TEST_CASE("cost-model battery passes a monotone model and fails one that shrinks with more calls", "[testing]") {
  const BatteryResult honest = cost_model_battery([] { return std::make_unique<WordCountModel>(); }, in_process());
  INFO(honest.failures());
  CHECK(honest.all_passed());
  CHECK(honest.checks.size() == 11);

  const BatteryResult shrinking =
      cost_model_battery([] { return std::make_unique<WordCountModel>(true); }, in_process());
  const CheckResult* calls = find_check(shrinking, "monotone-calls-per-tile");
  REQUIRE(calls != nullptr);
  CHECK_FALSE(calls->outcome.passed);
  CHECK_THAT(calls->outcome.detail,
             Catch::Contains("2-calls is estimated at") && Catch::Contains("more work must not cost fewer cycles"));
}

TEST_CASE("cost-model battery checks the extra target under its name", "[testing]") {
  BatteryOptions options = in_process();
  options.extra_target = latency_target("latency-16", 16, 4);
  const BatteryResult result = cost_model_battery([] { return std::make_unique<WordCountModel>(); }, options);
  CHECK(result.all_passed());
  CHECK(result.checks.size() == 22);
  CHECK(find_check(result, "peak-memory@latency-16") != nullptr);
}

TEST_CASE("cost-model battery checks only the extra target when the built-in ones are off", "[testing]") {
  BatteryOptions options = in_process();
  options.extra_target = latency_target("latency-16", 16, 4);
  options.builtin_targets = false;
  const BatteryResult result = cost_model_battery([] { return std::make_unique<WordCountModel>(); }, options);
  CHECK(result.all_passed());
  CHECK(result.checks.size() == 11);
  CHECK(std::all_of(result.checks.begin(), result.checks.end(),
                    [](const CheckResult& check) { return check.name.ends_with("@latency-16"); }));
}
