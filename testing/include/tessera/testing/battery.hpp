// The conformance batteries `tessera check-plugin` runs, as functions a plugin's own tests call.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/target.hpp"

namespace tessera {
class CostModel;
class ExchangeScheduler;
}  // namespace tessera

namespace tessera::testing {

/// What one check found: `detail` is the reason of a failure or the figures of a pass.
struct CheckOutcome {
  bool passed = false;
  std::string detail;
  static CheckOutcome pass(std::string figures = "") { return {true, std::move(figures)}; }
  static CheckOutcome fail(std::string why) { return {false, std::move(why)}; }
};

struct CheckResult {
  std::string name;  ///< e.g. "fan-in-switch-cost", "monotone-matmul-macs@t16"
  CheckOutcome outcome;
};

struct BatteryResult {
  std::vector<CheckResult> checks;  ///< in the order they ran
  bool all_passed() const;
  std::size_t failed() const;
  /// One line per failed check, "name: why"; empty when all passed.
  std::string failures() const;
};

/// Runs one check. The default runs it in this process and turns an exception into a
/// failure; `tessera check-plugin` runs each in a child process with a deadline instead.
using CheckRunner = std::function<CheckOutcome(const std::function<CheckOutcome()>& check)>;

struct BatteryOptions {
  std::uint64_t budget_ms = 500;       ///< time budget given to a scheduler per phase
  std::optional<Target> extra_target;  ///< checked as well as the built-in targets
  /// cost_model_battery only: false checks `extra_target` alone, for a model that estimates
  /// only the target it was calibrated on. Schedulers always meet the built-in fabrics.
  bool builtin_targets = true;
  /// The scheduler's `time-budget` check measures wall time (less run-queue waits); off in
  /// unit tests, which must not depend on the machine's load.
  bool check_time_budget = true;
  CheckRunner runner;                                 ///< empty: in this process
  std::function<void(const CheckResult&)> on_result;  ///< called as each check finishes
};

/// Makes a new scheduler configured as it should be checked (every check makes its own).
using SchedulerFactory = std::function<std::unique_ptr<ExchangeScheduler>()>;
using CostModelFactory = std::function<std::unique_ptr<CostModel>()>;

/// Valid schedules on structured and random phases over four built-in fabrics (ideal,
/// realistic latency, harsh latency and switch cost, no multicast) and `extra_target`; the
/// same schedule for the same phase; and the time budget kept.
BatteryResult scheduler_battery(const SchedulerFactory& make_scheduler, const BatteryOptions& options = {});

/// Plausible, finite estimates that never fall when the work grows (matmul size, elementwise
/// counts, calls, supersteps, copy and exchange words, fan-in), a peak memory that covers the
/// live buffers, and the same estimate twice for a whole-target program.
BatteryResult cost_model_battery(const CostModelFactory& make_cost_model, const BatteryOptions& options = {});

}  // namespace tessera::testing
