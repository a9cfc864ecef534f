// The scheduler battery (`tessera check-plugin` on an exchange scheduler): valid schedules on
// structured and random phases over built-in fabrics, determinism, and the time budget.
#include <algorithm>
#include <fstream>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "battery_runner.hpp"
#include "tessera/exchange.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/testing/battery.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/targets.hpp"

namespace tessera::testing {
namespace {

using detail::Clock;
using detail::milliseconds_since;

// The built-in fabrics keep the names check-plugin has always printed.
Target battery_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column,
                      std::uint32_t base_latency, double latency_per_column, std::uint32_t switch_cost,
                      bool multicast) {
  Target target =
      fabric_target(name, Fabric{tiles, tiles_per_column, base_latency, latency_per_column, switch_cost, multicast});
  target.source_file = "(built into tessera check-plugin)";
  return target;
}

std::string schedule_figures(const ExchangePhase& phase, const Schedule& schedule, const ScheduleReport& report,
                             const Target& target, std::int64_t elapsed_ms) {
  const std::string ratio =
      report.lower_bound ? fmt::format("{:.3f}", double(report.horizon) / double(report.lower_bound)) : "-";
  return fmt::format("target={} transfers={} segments={} horizon={} lower_bound={} ratio={} elapsed_ms={}", target.name,
                     phase.transfers.size(), schedule.segments.size(), report.horizon, report.lower_bound, ratio,
                     elapsed_ms);
}

// ExchangeScheduler::schedule validates the result and throws PluginError naming the conflict.
CheckOutcome check_valid_schedule(const SchedulerFactory& make_scheduler, const ExchangePhase& phase,
                                  const Target& target, std::uint64_t budget_ms) {
  auto scheduler = make_scheduler();
  ScheduleReport report;
  const auto started = Clock::now();
  const Schedule schedule = scheduler->schedule(phase, target, budget_ms, &report);
  return CheckOutcome::pass(schedule_figures(phase, schedule, report, target, milliseconds_since(started)));
}

std::string first_difference(const Schedule& a, const Schedule& b) {
  const std::size_t common = std::min(a.segments.size(), b.segments.size());
  for (std::size_t i = 0; i < common; ++i) {
    const Segment& x = a.segments[i];
    const Segment& y = b.segments[i];
    if (x.transfer != y.transfer || x.start != y.start || x.words != y.words)
      return fmt::format("segment {} was (transfer {}, start {}, words {}), now (transfer {}, start {}, words {})", i,
                         x.transfer, x.start, x.words, y.transfer, y.start, y.words);
  }
  if (a.segments.size() != b.segments.size())
    return fmt::format("{} segments, now {}", a.segments.size(), b.segments.size());
  return "";
}

CheckOutcome check_deterministic(const SchedulerFactory& make_scheduler, const ExchangePhase& phase,
                                 const Target& target, std::uint64_t budget_ms) {
  auto scheduler = make_scheduler();
  const Schedule first = scheduler->schedule(phase, target, budget_ms);
  const Schedule again = scheduler->schedule(phase, target, budget_ms);
  if (auto difference = first_difference(first, again); !difference.empty())
    return CheckOutcome::fail("a second call on the same object returned another schedule: " + difference +
                              "; the same phase must give the same schedule (seed any randomness, and do not let "
                              "wall-clock time decide)");
  auto fresh = make_scheduler();
  const Schedule other = fresh->schedule(phase, target, budget_ms);
  if (auto difference = first_difference(first, other); !difference.empty())
    return CheckOutcome::fail("a new object returned another schedule: " + difference +
                              "; the same phase must give the same schedule");
  return CheckOutcome::pass(fmt::format("target={} transfers={} segments={}, 3 identical schedules", target.name,
                                        phase.transfers.size(), first.segments.size()));
}

// Nanoseconds this thread has waited on a run queue (/proc/thread-self/schedstat), 0 if unknown:
// time a busy machine took from the plugin, not time the plugin spent.
double run_queue_wait_ms() {
  std::ifstream in("/proc/thread-self/schedstat");
  unsigned long long on_cpu_ns = 0, waiting_ns = 0;
  if (!(in >> on_cpu_ns >> waiting_ns)) return 0;
  return static_cast<double>(waiting_ns) / 1e6;
}

CheckOutcome check_time_budget(const SchedulerFactory& make_scheduler, const ExchangePhase& phase, const Target& target,
                               std::uint64_t budget_ms) {
  auto scheduler = make_scheduler();
  ScheduleReport report;
  const auto started = Clock::now();
  const double waited_before_ms = run_queue_wait_ms();
  const Schedule schedule = scheduler->schedule(phase, target, budget_ms, &report);
  const std::int64_t elapsed_ms = milliseconds_since(started);
  // The plugin's time is the wall time less what it waited for a CPU: sleeping counts, load does not.
  const double charged_ms = static_cast<double>(elapsed_ms) - (run_queue_wait_ms() - waited_before_ms);
  const std::uint64_t allowed_ms = 2 * budget_ms + 100;
  if (charged_ms > static_cast<double>(allowed_ms))
    return CheckOutcome::fail(
        fmt::format("took {} ms ({:.0f} ms not counting waits for a busy CPU) on a phase of {} "
                    "transfers with a budget of {} ms (allowed: 2 x budget + 100 ms = {} ms); stop "
                    "searching when the budget is spent",
                    elapsed_ms, charged_ms, phase.transfers.size(), budget_ms, allowed_ms));
  return CheckOutcome::pass(schedule_figures(phase, schedule, report, target, elapsed_ms) +
                            fmt::format(" budget_ms={}", budget_ms));
}

}  // namespace

BatteryResult scheduler_battery(const SchedulerFactory& make_scheduler, const BatteryOptions& options) {
  detail::Battery battery(options);
  const std::optional<Target>& user_target = options.extra_target;
  const Target ideal = battery_target("check-ideal-1472", 1472, 64, 0, 0.0, 0, true);
  const Target realistic = battery_target("check-latency-1472", 1472, 64, 6, 1.0, 1, true);
  const Target harsh = battery_target("check-harsh-16", 16, 4, 20, 8.0, 5, true);
  const Target unicast = battery_target("check-unicast-16", 16, 4, 6, 1.0, 1, false);
  const std::uint64_t budget = options.budget_ms;
  auto valid = [&](const std::string& name, const ExchangePhase& phase, const Target& target) {
    battery.run(name, [&] { return check_valid_schedule(make_scheduler, phase, target, budget); });
  };

  valid("empty-phase-1-tile", empty_phase(1), realistic);
  valid("empty-phase-1472-tiles", empty_phase(1472), realistic);
  valid("zero-word-transfer", zero_word_phase(), realistic);
  valid("single-transfer", single_transfer_phase(2, 0, 1, 1000), realistic);
  valid("fan-out", one_to_all_phase(16), harsh);
  valid("fan-in-switch-cost", all_to_one_phase(16), harsh);
  valid("all-to-all", all_to_all_phase(16), harsh);
  valid("multicast", overlapping_multicast_phase(16), harsh);
  valid("no-multicast-target", per_tile_random_phase(16, 4, 64, false, 11), unicast);
  valid("huge-words", huge_words_phase(), realistic);
  valid("random-1472-ideal", per_tile_random_phase(1472, 4, 256, true, 1), ideal);
  valid("random-1472-latency", per_tile_random_phase(1472, 4, 256, true, 2), realistic);
  if (user_target) {
    const Target& target = *user_target;
    valid("random@" + target.name, per_tile_random_phase(target.tiles, 4, 256, target.multicast, 3), target);
    if (target.tiles >= 2)
      valid("fan-in@" + target.name, all_to_one_phase(std::min<std::uint32_t>(target.tiles, 64)), target);
  }

  const ExchangePhase repeated = per_tile_random_phase(1472, 4, 256, true, 4);
  battery.run("deterministic", [&] { return check_deterministic(make_scheduler, repeated, realistic, budget); });
  if (options.check_time_budget) {
    const ExchangePhase large = per_tile_random_phase(1472, 16, 1024, true, 5);
    battery.run("time-budget", [&] { return check_time_budget(make_scheduler, large, realistic, budget); });
  }
  return battery.take();
}

}  // namespace tessera::testing
