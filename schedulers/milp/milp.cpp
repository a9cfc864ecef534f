// The `milp` exchange scheduler: the exact optimum of small phases, from a time-indexed model
// solved with GLPK, to measure how far the heuristics are from it where the lower bound is
// not reachable (latency, switch cost, multicast).
//
// A dense list schedule gives the horizon's upper bound, the core's lower bound the lower
// one; GLPK then decides horizons between them (time_indexed_model.cpp). Within the time
// budget this either proves the optimum (logged optimal=true) or returns the best schedule
// found with the remaining gap (optimal=false gap=...); a phase whose model would exceed
// `max_variables` gets the list schedule, and the log says so. The result is never worse
// than the list schedule.
#include <chrono>
#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "list_schedule.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "time_indexed_model.hpp"

namespace tessera::milp {
namespace {

using tessera::ExchangePhase;
using tessera::Schedule;
using tessera::Target;

double relative_gap(std::uint64_t horizon, std::uint64_t bound) {
  return horizon == 0 || bound >= horizon ? 0.0 : static_cast<double>(horizon - bound) / static_cast<double>(horizon);
}

class MilpScheduler final : public tessera::ExchangeScheduler {
public:
  static const tessera::OptionTable<MilpScheduler>& option_table() {
    static const tessera::OptionTable<MilpScheduler> table{
        tessera::option("max_variables", &MilpScheduler::max_variables_, 200000,
                        "largest model (columns) to build; a bigger phase gets the list schedule")
            .at_least(1),
        tessera::option("budget_fraction", &MilpScheduler::budget_fraction_, 0.9,
                        "share of the phase's time budget GLPK may use")
            .above(0.0)
            .at_most(1.0),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    const auto started = std::chrono::steady_clock::now();
    auto elapsed_ms = [&] {
      return static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
    };
    auto log = tessera::logger("tessera.scheduler.milp");

    Schedule list = list_schedule(phase, target);
    const tessera::ScheduleReport listed = tessera::validate_schedule(phase, list, target);
    // The list schedule is valid on any phase check_phase accepted.
    if (!listed.valid) throw std::logic_error("milp list schedule is invalid: " + listed.first_conflict);
    const std::uint64_t bound = listed.lower_bound;
    auto report = [&](std::uint64_t horizon, bool optimal, std::uint64_t proven, const char* how,
                      const std::string& detail) {
      log->info(
          "milp scheduled exchange phase transfers={} milp_horizon={} lower_bound={} "
          "proven_bound={} list_horizon={} optimal={} gap={:.4f} solution={} {} "
          "elapsed_ms={} budget_ms={}",
          phase.transfers.size(), horizon, bound, proven, listed.horizon, optimal, relative_gap(horizon, proven), how,
          detail, elapsed_ms(), budget_ms);
    };

    if (listed.horizon <= bound) {
      report(listed.horizon, true, listed.horizon, "list-schedule",
             "reason=\"the list schedule reaches the lower bound\"");
      return list;
    }
    const TimeIndexedModel model(phase, target, bound, listed.horizon);
    if (model.variables() > max_variables_) {
      log->info(
          "milp model too big for this phase: variables={} max_variables={}; returning "
          "the list schedule (raise max_variables to solve it)",
          model.variables(), max_variables_);
      report(listed.horizon, false, bound, "list-schedule",
             fmt::format("reason=too-many-variables variables={}", model.variables()));
      return list;
    }

    const auto planned_ms = static_cast<std::uint64_t>(static_cast<double>(budget_ms) * budget_fraction_);
    const std::uint64_t time_limit_ms = planned_ms > elapsed_ms() ? planned_ms - elapsed_ms() : 1;
    MilpOutcome outcome = model.solve(time_limit_ms);
    const std::string detail = fmt::format("models={} variables={} rows={} nonzeros={} status=\"{}\"", outcome.models,
                                           outcome.variables, outcome.rows, outcome.nonzeros, outcome.status);
    const std::uint64_t proven = std::max(bound, outcome.bound);
    if (outcome.solved && outcome.horizon < listed.horizon) {
      const tessera::ScheduleReport checked = tessera::validate_schedule(phase, outcome.schedule, target);
      if (!checked.valid) {
        // A model that admits an invalid schedule is a bug here; the user still gets a
        // valid schedule, and the log says what went wrong.
        log->error("milp model solution is invalid ({}); returning the list schedule", checked.first_conflict);
        report(listed.horizon, false, bound, "list-schedule", detail);
        return list;
      }
      report(checked.horizon, outcome.optimal, outcome.optimal ? checked.horizon : proven, "milp", detail);
      return std::move(outcome.schedule);
    }
    // GLPK found nothing better: the list schedule stands, optimal if GLPK proved it so.
    const bool optimal = outcome.optimal || proven >= listed.horizon;
    report(listed.horizon, optimal, optimal ? listed.horizon : proven, "list-schedule", detail);
    return list;
  }

private:
  std::uint64_t max_variables_ = 0;  // these two set by configure from option_table()
  double budget_fraction_ = 0;
};

}  // namespace
}  // namespace tessera::milp

extern "C" const TesseraPluginManifest* milp_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "milp", "0.1.0",
                             "exact time-indexed model solved with GLPK for small phases (list schedule otherwise)",
                             tessera::milp::MilpScheduler::option_table(), "", "",
                             &tessera::create_plugin_object<tessera::milp::MilpScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(milp_manifest)
