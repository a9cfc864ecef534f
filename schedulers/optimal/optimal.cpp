// The `optimal` exchange scheduler: preemptive, at the endpoint lower bound on an ideal fabric.
//
// The phase is scheduled by timed matchings of its demand graph (matching_decomposition.hpp).
// Without latency, switch cost and multicast, that schedule's horizon is the endpoint lower
// bound, the optimum (König; preemptive open shop, Gonzalez and Sahni 1976), and it is
// returned as it is. Multicast transfers take part as hyperedges (all their ports at once),
// which keeps the schedule valid on an ideal fabric but may stretch it. On a target with
// latency or switch cost (where the problem is NP-hard), the ideal schedule's pieces are
// placed by the rules of the target (ordered_placement.hpp, option `repair`): each port
// keeping the ideal order (a left shift), or densely with the ideal order as priority, or
// both, keeping the shorter. Either is valid by construction.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "matching_decomposition.hpp"
#include "ordered_placement.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::ExchangePhase;
using tessera::Schedule;
using tessera::Segment;
using tessera::Target;
using tessera::Transfer;
using tessera::optimal::Piece;

// True when no pair of tiles has latency and receivers switch for free: the ideal fabric.
bool is_ideal_fabric(const Target& target) {
  return target.switch_cost == 0 && target.exchange_base_latency == 0 && target.exchange_latency_per_column == 0;
}

std::uint64_t horizon_of(const ExchangePhase& phase, const Target& target, const std::vector<Segment>& segments) {
  std::uint64_t horizon = 0;
  for (const Segment& segment : segments) {
    const Transfer& transfer = phase.transfers[segment.transfer];
    for (std::uint32_t destination : transfer.destinations)
      horizon = std::max<std::uint64_t>(horizon,
                                        segment.start + target.latency(transfer.source, destination) + segment.words);
  }
  return horizon;
}

// The ideal schedule's pieces, in start order, placed on the target.
std::vector<Segment> place_on_target(const ExchangePhase& phase, const Target& target, std::vector<Segment> ideal,
                                     tessera::optimal::Placement placement) {
  std::sort(ideal.begin(), ideal.end(), [](const Segment& a, const Segment& b) {
    return a.start != b.start ? a.start < b.start : a.transfer < b.transfer;
  });
  std::vector<Piece> pieces;
  pieces.reserve(ideal.size());
  for (const Segment& segment : ideal) pieces.push_back({segment.transfer, segment.words});
  return tessera::optimal::place_in_order(phase, target, pieces, placement);
}

class OptimalScheduler final : public tessera::ExchangeScheduler {
public:
  static const tessera::OptionTable<OptimalScheduler>& option_table() {
    using tessera::optimal::Placement;
    static const tessera::OptionTable<OptimalScheduler> table{
        tessera::option("repair", &OptimalScheduler::placement_, Placement::best,
                        {{"best", Placement::best}, {"dense", Placement::dense}, {"left-shift", Placement::left_shift}},
                        "how the ideal schedule is placed on a target with latency or switch cost: left-shift "
                        "(every port keeps the ideal order, each piece as early as allowed), dense (a free "
                        "sender starts one of its next pieces in ideal order that can start now), or best (both, "
                        "keeping the shorter)"),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    const auto started = std::chrono::steady_clock::now();

    std::vector<std::uint32_t> transfers;
    std::size_t multicast = 0;
    transfers.reserve(phase.transfers.size());
    for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
      const Transfer& transfer = phase.transfers[index];
      if (transfer.words == 0) continue;  // nothing to send, so no segment
      transfers.push_back(index);
      multicast += transfer.destinations.size() > 1;
    }

    Schedule schedule;
    schedule.segments.reserve(transfers.size() + transfers.size() / 16);
    const tessera::optimal::DecompositionStats stats =
        tessera::optimal::decompose_into_matchings(phase, transfers, schedule.segments);
    const bool placed = !is_ideal_fabric(target);
    if (placed) schedule.segments = place_on_target(phase, target, std::move(schedule.segments), placement_);

    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    tessera::logger("tessera.scheduler.optimal")
        ->debug(
            "optimal scheduled exchange phase transfers={} multicast_transfers={} "
            "endpoint_lower_bound={} ideal_horizon={} horizon={} events={} "
            "augmenting_paths={} splits={} longest_path={} stalls={} segments={} "
            "segments_per_transfer={:.3f} placed_on_target={} elapsed_ms={} budget_ms={}",
            transfers.size(), multicast, stats.bound, stats.horizon,
            placed ? horizon_of(phase, target, schedule.segments) : stats.horizon, stats.events, stats.augmenting_paths,
            stats.splits, stats.longest_path, stats.stalls, schedule.segments.size(),
            transfers.empty() ? 0.0 : double(schedule.segments.size()) / double(transfers.size()), placed, elapsed_ms,
            budget_ms);
    return schedule;
  }

private:
  tessera::optimal::Placement placement_{};  // set by configure from option_table()
};

}  // namespace

extern "C" const TesseraPluginManifest* optimal_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "optimal", "0.1.0",
      "preemptive matching decomposition: the endpoint bound on an ideal fabric", OptimalScheduler::option_table(), "",
      "", &tessera::create_plugin_object<OptimalScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(optimal_manifest)
