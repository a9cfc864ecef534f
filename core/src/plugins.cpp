// The core side of every plugin call: catching exceptions at the boundary, validating results.
#include <atomic>
#include <chrono>

#include <boost/version.hpp>

#include "tessera/cost_model.hpp"
#include "tessera/pass.hpp"
#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/version.hpp"

namespace tessera {

const char* abi_tag() noexcept { return TESSERA_ABI_TAG; }

PluginObject::~PluginObject() = default;

Status PluginObject::configure(const Options&) { return Status::success(); }

namespace {
// Runs plugin code; any exception leaving it becomes a PluginError naming the plugin.
template <typename Function>
auto guarded(const std::string& plugin, const char* call, Function&& function) {
  try {
    return function();
  } catch (const PluginError&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError(plugin, std::string(call) + " threw: " + e.what());
  } catch (...) {
    throw PluginError(plugin, std::string(call) + " threw an unknown exception");
  }
}

std::atomic<std::uint64_t> cost_model_ns{0}, cost_model_calls{0}, scheduler_ns{0}, scheduler_calls{0};
thread_local int metered_depth = 0;  // a call made inside another (a fallback) is counted once

// Adds the wall time of this thread's outermost plugin call to a process-wide total.
class CallMeter {
public:
  CallMeter(std::atomic<std::uint64_t>& ns, std::atomic<std::uint64_t>& calls)
      : ns_(ns), calls_(calls), outermost_(metered_depth++ == 0), start_(std::chrono::steady_clock::now()) {}
  ~CallMeter() {
    --metered_depth;
    if (!outermost_) return;
    ns_ += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count());
    ++calls_;
  }

private:
  std::atomic<std::uint64_t>& ns_;
  std::atomic<std::uint64_t>& calls_;
  bool outermost_;
  std::chrono::steady_clock::time_point start_;
};
}  // namespace

PluginCallTotals plugin_call_totals() {
  return {cost_model_ns.load(), cost_model_calls.load(), scheduler_ns.load(), scheduler_calls.load()};
}

void PassContext::statistic(std::string name, double value) {
  if (record) record->statistics.push_back({pass, std::move(name), value});
}

void PassContext::progress(std::uint64_t done, std::uint64_t total, std::string_view unit) const {
  if (on_progress) on_progress(done, total, unit);
}

void PassContext::remark(PlanRemark plan) {
  if (record) record->plans.push_back(std::move(plan));
}

void PassContext::remark(ScheduleRemark schedule) {
  info(
      "optimized physical exchange schedule phase={} transfers={} words={} widest_multicast={} segments={} "
      "horizon={} endpoint_lower_bound={} lower_bound={} selected_kind=\"{}\" elapsed_ms={}",
      schedule.phase, schedule.transfers, schedule.words, schedule.widest_multicast, schedule.segments,
      schedule.horizon, schedule.endpoint_lower_bound, schedule.lower_bound, schedule.scheduler, schedule.elapsed_ms);
  if (record) record->schedules.push_back(std::move(schedule));
}

Status Pass::run(CompilationState& state, PassContext& context) {
  context.fault.reset();
  try {
    return guarded(plugin_name(), "run", [&] { return run_impl(state, context); });
  } catch (const PluginError& e) {
    context.fault = std::make_shared<const PluginError>(e);  // kept for the reproducer
    return Status::failure(e.what());
  } catch (const Error& e) {
    return Status::failure(e.what());
  }
}

CostEstimate CostModel::estimate(const Program& program, const Target& target) {
  CallMeter meter(cost_model_ns, cost_model_calls);
  return guarded(plugin_name(), "estimate", [&] { return estimate_impl(program, target); });
}

std::uint64_t CostModel::estimate_exchange(const ExchangePhase& phase, const Target& target) {
  CallMeter meter(cost_model_ns, cost_model_calls);
  return guarded(plugin_name(), "estimate_exchange", [&] { return estimate_exchange_impl(phase, target); });
}

Schedule ExchangeScheduler::schedule(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms,
                                     ScheduleReport* report) {
  CallMeter meter(scheduler_ns, scheduler_calls);
  // A malformed phase is the caller's error: no plugin is blamed and no reproducer written.
  if (std::string problem = check_phase(phase, target); !problem.empty())
    throw Error("the exchange phase given to scheduler '" + plugin_name() + "' is malformed: " + problem +
                "; the caller must build a phase the target can carry (the scheduler was not called)");
  // A failure carries a copy of the phase, so the driver can write a reproducer of it.
  Schedule schedule;
  try {
    schedule = guarded(plugin_name(), "schedule", [&] { return schedule_impl(phase, target, budget_ms); });
  } catch (PluginError& e) {
    if (!e.failing_phase) e.failing_phase = std::make_shared<const ExchangePhase>(phase);
    throw;
  }
  ScheduleReport checked = validate_schedule(phase, schedule, target);
  if (!checked.valid) {
    PluginError error(plugin_name(), "returned an invalid schedule for a phase of " +
                                         std::to_string(phase.transfers.size()) +
                                         " transfers: " + checked.first_conflict);
    error.failing_phase = std::make_shared<const ExchangePhase>(phase);
    throw error;
  }
  if (report) *report = checked;
  return schedule;
}

}  // namespace tessera
