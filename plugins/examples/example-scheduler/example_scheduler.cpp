// example-scheduler: longest-first list scheduling, an out-of-tree exchange-scheduler plugin.
//
// Built against the installed Tessera SDK (see docs/plugin-guide.md). Transfers are placed one
// at a time, longest first (ties in phase order), each as one segment at the earliest cycle
// where its source is free and every destination can take all its words: a word sent at
// cycle c arrives at destination d at c + latency(source, d), each tile sends and receives at
// most one word per cycle, and a receiver that changes the tile it listens to needs the
// target's switch cost in idle cycles between the two. With the `backfill` option (default on)
// a transfer may take an idle gap left earlier on its ports; off, it only goes after
// everything already booked there, which is simpler and usually longer.
//
// The core validates whatever this returns; a bug here is reported as an invalid schedule
// naming this plugin, never run on the device.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <vector>

#include <fmt/format.h>
#include <spdlog/logger.h>

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
using tessera::Target;
using tessera::Transfer;

// The cycles one tile's send port or receive port is busy. Busy spans never overlap and are
// kept sorted by start, so their ends are sorted too.
class Port {
public:
  // The first cycle >= `from` at which `length` cycles from `partner` fit. On a receive port
  // `switch_cost` idle cycles must separate words from different partners; a send port
  // passes 0. Without backfill only the last span counts: nothing goes before it.
  std::uint64_t first_fit(std::uint64_t from, std::uint64_t length, std::uint32_t partner, std::uint64_t switch_cost,
                          bool backfill) const {
    if (spans_.empty()) return from;
    auto gap_to = [&](const Span& span) { return span.partner == partner ? 0 : switch_cost; };
    if (!backfill) return std::max(from, spans_.back().end + gap_to(spans_.back()));
    // Spans ending at least switch_cost before `from` cannot be in the way.
    auto it = std::lower_bound(spans_.begin(), spans_.end(), from,
                               [&](const Span& span, std::uint64_t cycle) { return span.end + switch_cost <= cycle; });
    std::uint64_t start = from;
    for (; it != spans_.end() && it->start < start + length + switch_cost; ++it) {
      const std::uint64_t gap = gap_to(*it);
      if (start < it->end + gap && it->start < start + length + gap) start = it->end + gap;
    }
    return start;
  }

  void book(std::uint64_t start, std::uint64_t length, std::uint32_t partner) {
    const Span span{start, start + length, partner};
    auto at = std::upper_bound(spans_.begin(), spans_.end(), start,
                               [](std::uint64_t cycle, const Span& other) { return cycle < other.start; });
    spans_.insert(at, span);
  }

private:
  struct Span {
    std::uint64_t start, end;
    std::uint32_t partner;  ///< the sending tile, on a receive port
  };
  std::vector<Span> spans_;
};

class ExampleScheduler final : public tessera::ExchangeScheduler {
public:
  // Each option is declared once, bound to its member; the host checks values before configure.
  static const tessera::OptionTable<ExampleScheduler>& option_table() {
    static const tessera::OptionTable<ExampleScheduler> table{
        tessera::option("backfill", &ExampleScheduler::backfill_, true,
                        "place a transfer into an idle gap left earlier on its ports (off: only after everything "
                        "already booked there)"),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    const auto started = std::chrono::steady_clock::now();

    std::vector<std::uint32_t> order(phase.transfers.size());
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return phase.transfers[a].words > phase.transfers[b].words;
    });

    std::vector<Port> send_ports(phase.tiles), receive_ports(phase.tiles);
    std::vector<std::uint32_t> latencies;
    Schedule schedule;
    schedule.segments.reserve(phase.transfers.size());
    for (std::uint32_t index : order) {
      const Transfer& transfer = phase.transfers[index];
      if (transfer.words == 0) continue;  // nothing to send; a zero-word segment is invalid
      latencies.clear();
      for (std::uint32_t destination : transfer.destinations)
        latencies.push_back(target.latency(transfer.source, destination));
      // Each port pushes the start to its own first fit; repeat until every port agrees.
      // The start only grows, past one busy span at a time, so this ends.
      std::uint64_t start = 0;
      for (bool moved = true; moved;) {
        moved = false;
        // The receivers below are checked at the sender's fit, so the sender alone never
        // needs another round.
        start = send_ports[transfer.source].first_fit(start, transfer.words, transfer.source, 0, backfill_);
        for (std::size_t k = 0; k < transfer.destinations.size(); ++k) {
          const std::uint64_t arrival = start + latencies[k];
          const std::uint64_t fit = receive_ports[transfer.destinations[k]].first_fit(
              arrival, transfer.words, transfer.source, target.switch_cost, backfill_);
          if (fit != arrival) {
            start = fit - latencies[k];
            moved = true;
          }
        }
      }
      send_ports[transfer.source].book(start, transfer.words, transfer.source);
      for (std::size_t k = 0; k < transfer.destinations.size(); ++k)
        receive_ports[transfer.destinations[k]].book(start + latencies[k], transfer.words, transfer.source);
      schedule.segments.push_back({index, start, transfer.words});
    }

    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    tessera::logger("tessera.scheduler")
        ->debug("example-scheduler scheduled exchange phase transfers={} backfill={} elapsed_ms={} budget_ms={}",
                phase.transfers.size(), backfill_, elapsed_ms, budget_ms);
    return schedule;
  }

private:
  bool backfill_ = false;  // set by configure from option_table()
};

}  // namespace

extern "C" const TesseraPluginManifest* example_scheduler_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "example-scheduler", "0.1.0",
      "longest-first list scheduling with earliest-fit backfill (an out-of-tree example)",
      ExampleScheduler::option_table(), "", "", &tessera::create_plugin_object<ExampleScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(example_scheduler_manifest)
