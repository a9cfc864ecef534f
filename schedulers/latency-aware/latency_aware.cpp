// The `latency-aware` exchange scheduler: several constructive schedules for targets with
// latency, a receive-mux switch cost and multicast; the best is improved by critical-path
// neighbourhood moves.
//
// A constructive start is a global order of the phase's transfers, re-timed so every port
// serves its transfers in that order as early as latency, switch cost and multicast allow
// (order_timing.hpp). The starts: receiver-driven earliest-arrival list scheduling (the best
// where switch costs make receivers the bottleneck), the `greedy` plugin's dense list rule
// (so the result is, in practice, never later than greedy's; the tests check it), a best-fit
// and a waiting list schedule, and a round-by-round order from an edge colouring (what
// phases made of permutations need).
// Receiver-driven restarts with other tie-breaks follow; then the best schedule, as one
// sequence per port, is improved by moves on its critical path (order_search.hpp).
//
// Effort is counted in work units, not milliseconds (work_budget.hpp), so the same phase
// gets the same schedule on a busy machine; the time budget only bounds it.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "colour_order.hpp"
#include "dense_list.hpp"
#include "order_search.hpp"
#include "order_timing.hpp"
#include "phase_model.hpp"
#include "receiver_driven.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "work_budget.hpp"

namespace tessera::latency_aware {
namespace {

using tessera::ExchangePhase;
using tessera::Schedule;
using tessera::Target;

// What a sender-driven list scheduler's scans cost, roughly: each sender scans its jobs at
// each of its decisions.
std::uint64_t sender_scan_work(const PhaseModel& model) {
  std::vector<std::uint64_t> jobs(model.tiles, 0);
  for (std::uint32_t sender : model.source) ++jobs[sender];
  std::uint64_t work = 0;
  for (std::uint64_t count : jobs) work += count * count;
  return work;
}

std::uint64_t elapsed_ms(Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

// One constructive start and its timing.
struct Candidate {
  std::string name;
  std::vector<std::uint32_t> order;
  Score score;
};

// Times the starts' orders and keeps the best (ties: the earlier start).
class Portfolio {
public:
  Portfolio(const PhaseModel& model, WorkBudget& work)
      : model_(model), timer_(model), work_(work), log_(tessera::logger("tessera.scheduler.latency-aware")) {}

  /// Returns true when `order` is the new best.
  bool consider(const char* name, std::optional<std::vector<std::uint32_t>> order) {
    if (!order) {
      log_->debug("latency-aware start skipped start=\"{}\" reason=work-budget", name);
      return false;
    }
    work_.record(kUnitsPerTimedEntry * (model_.jobs() + model_.destination.size()));
    const Score score = timer_.score(*order);
    log_->debug("latency-aware start finished start=\"{}\" horizon={} work_units={}", name, score.horizon,
                work_.used());
    if (std::string_view(name).ends_with("-restart")) ++restarts_;
    if (best_ && !(score < best_->score)) return false;
    best_ = Candidate{name, std::move(*order), score};
    return true;
  }

  const Candidate& best() const { return *best_; }  // one start always finishes
  std::uint64_t restarts() const { return restarts_; }

private:
  static constexpr std::uint64_t kUnitsPerTimedEntry = 12;

  const PhaseModel& model_;
  OrderTimer timer_;
  WorkBudget& work_;
  std::shared_ptr<spdlog::logger> log_;
  std::optional<Candidate> best_;
  std::uint64_t restarts_ = 0;
};

class LatencyAwareScheduler final : public tessera::ExchangeScheduler {
public:
  static const tessera::OptionTable<LatencyAwareScheduler>& option_table() {
    static const tessera::OptionTable<LatencyAwareScheduler> table{
        tessera::option("budget_fraction", &LatencyAwareScheduler::budget_fraction_, 0.4,
                        "share of the phase's time budget to use; the search stops when it is spent")
            .above(0.0)
            .at_most(1.0),
        tessera::option("seed", &LatencyAwareScheduler::seed_, 1,
                        "seed of the move order; the same seed gives the same schedule"),
        tessera::option("max_improvement_rounds", &LatencyAwareScheduler::max_rounds_, 0,
                        "stop the neighbourhood search after trying this many moves (0: only the budget limits it)"),
        tessera::option("lookahead", &LatencyAwareScheduler::lookahead_, 24,
                        "cycles a sender may wait for a better transfer in the lookahead start (0: no such start)")
            .range(0, kMaxLookahead),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    const Clock::time_point started = Clock::now();
    const PhaseModel model = build_phase_model(phase, target);
    if (model.jobs() == 0) return {};
    const std::uint64_t bound = tessera::lower_bound(phase, target);

    // Work is planned for `budget_fraction` of the budget; the clock stops it only at the
    // whole budget (a machine twice as slow as planned still gets the same schedule).
    const auto work_limit = static_cast<std::uint64_t>(static_cast<double>(budget_ms) * budget_fraction_ *
                                                       WorkBudget::kUnitsPerMillisecond);
    WorkBudget work(work_limit, started + std::chrono::milliseconds(budget_ms));
    Portfolio portfolio(model, work);

    // 1. Constructive starts, at most half the work. The receiver-driven start (unicast
    //    only) always finishes: it is linear in the jobs, and the best where switch costs
    //    make receivers the bottleneck. Greedy's rule, the floor the others must beat, also
    //    always finishes unless its scans (each sender's jobs, squared) would be so long
    //    that the `greedy` plugin itself overruns a budget; then the budget may stop it.
    work.set_limit(work_limit / 2);
    const bool unicast = model.multicast_jobs == 0;
    portfolio.consider("receiver-earliest-arrival", receiver_driven_order(model, 1, 0, work, true));
    const bool greedy_must_finish = !unicast || sender_scan_work(model) < kGreedyAlwaysFinishesBelow;
    portfolio.consider("greedy-load-first",
                       dense_list_order(model, {ListPriority::load_first}, work, greedy_must_finish));
    portfolio.consider("best-fit", dense_list_order(model, {ListPriority::best_fit}, work));
    portfolio.consider("colour-rounds", colour_order(model, work));
    if (lookahead_ > 0) {
      const ListRule waiting{ListPriority::load_first, lookahead_, kWaitPenalty};
      portfolio.consider("lookahead-load-first", dense_list_order(model, waiting, work));
    }
    portfolio.consider("greedy-longest-first", dense_list_order(model, {ListPriority::longest_first}, work));
    auto log = tessera::logger("tessera.scheduler.latency-aware");
    log->debug("latency-aware stage finished stage=starts work_units={} elapsed_ms={}", work.used(),
               elapsed_ms(started));

    // 2. Receiver-driven restarts with other tie-breaks (each a different, equally
    //    principled schedule), up to 70% of the work; they stop once several in a row
    //    found nothing better.
    work.set_limit(work_limit / 10 * 7);
    for (std::uint64_t restart = 1, fruitless = 0; unicast && !work.spent() && fruitless < kRestartPatience;
         ++restart) {
      // Slack 0 suits a few hot receivers (any idle cycle there is lost), 2 spreads load
      // over many; the rotation tries both, then 1 again with another tie-break.
      const std::uint32_t slack = static_cast<std::uint32_t>((restart * 2) % 3);
      const bool better = portfolio.consider("receiver-earliest-arrival-restart",
                                             receiver_driven_order(model, slack, seed_ * 1000 + restart, work));
      fruitless = better ? 0 : fruitless + 1;
    }

    log->debug("latency-aware stage finished stage=restarts work_units={} elapsed_ms={}", work.used(),
               elapsed_ms(started));

    // 3. Critical-path search on the best, for the rest (none if the starts used it all:
    //    setting up the search costs a pass over every job).
    work.set_limit(work_limit);
    const Candidate& chosen = portfolio.best();
    const std::uint64_t initial_horizon = chosen.score.horizon;
    SearchResult searched;
    if (!work.spent()) {
      const SearchLimits limits{max_rounds_, seed_, bound};
      searched = improve_order(model, chosen.order, limits, work);
    } else {
      Timing timing;
      OrderTimer(model).time(chosen.order, timing);
      searched.start = std::move(timing.start);
      searched.horizon = timing.score.horizon;
    }

    if (work.stopped_by_clock())
      log->warn(
          "latency-aware stopped by the wall clock before its planned work was done "
          "(the machine is slower or busier than planned); this phase's schedule may "
          "differ from run to run transfers={} budget_ms={}",
          phase.transfers.size(), budget_ms);
    log->info(
        "latency-aware scheduled exchange phase transfers={} initial_horizon={} "
        "final_horizon={} lower_bound={} ratio={:.4f} start=\"{}\" restarts={} "
        "neighborhood_improvements={} evaluations={} work_units={} elapsed_ms={} "
        "budget_ms={}",
        phase.transfers.size(), initial_horizon, searched.horizon, bound,
        bound ? static_cast<double>(searched.horizon) / static_cast<double>(bound) : 1.0, chosen.name,
        portfolio.restarts(), searched.improvements, searched.evaluations, work.used(), elapsed_ms(started), budget_ms);
    return to_schedule(model, searched.start);
  }

private:
  // Receiver words one cycle of waiting must buy in the lookahead start (tuned on t1472).
  static constexpr double kWaitPenalty = 50.0;
  static constexpr std::uint32_t kMaxLookahead = 4096;
  static constexpr std::uint64_t kRestartPatience = 6;
  // Sum over senders of their jobs squared above which greedy's rule may be stopped: about
  // 400 jobs per sender on all 1472 tiles (a 590k-transfer shuffle, where the `greedy`
  // plugin takes seconds).
  static constexpr std::uint64_t kGreedyAlwaysFinishesBelow = 100'000'000;

  // Set by configure from option_table().
  double budget_fraction_ = 0;
  std::uint64_t seed_ = 0;
  std::uint64_t max_rounds_ = 0;
  std::uint32_t lookahead_ = 0;
};

}  // namespace
}  // namespace tessera::latency_aware

extern "C" const TesseraPluginManifest* latency_aware_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "latency-aware", "0.1.0",
                             "best of several list and round orders, improved by critical-path moves (latency, "
                             "switch cost, multicast)",
                             tessera::latency_aware::LatencyAwareScheduler::option_table(), "", "",
                             &tessera::create_plugin_object<tessera::latency_aware::LatencyAwareScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(latency_aware_manifest)
