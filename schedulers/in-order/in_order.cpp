// The `in-order` exchange scheduler: the naive baseline every port serves in phase order.
//
// Transfer i starts at the first cycle its source has finished its earlier transfers and
// every destination can take its first word (earlier transfers received, switch cost paid),
// latency included. One segment per transfer. It is what a compiler gets with no scheduler,
// so it is the yardstick the others are measured against.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin.hpp"
#include "tessera/receiver_mux.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::ExchangePhase;
using tessera::ReceiverMux;
using tessera::Schedule;
using tessera::Target;
using tessera::Transfer;

class InOrderScheduler final : public tessera::ExchangeScheduler {
protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t /*budget_ms*/) override {
    std::vector<std::uint64_t> send_free(phase.tiles, 0);  // first cycle it may send
    std::vector<ReceiverMux> receivers(phase.tiles);
    std::vector<std::uint32_t> latencies;
    Schedule schedule;
    schedule.segments.reserve(phase.transfers.size());
    for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
      const Transfer& transfer = phase.transfers[index];
      if (transfer.words == 0) continue;
      std::uint64_t start = send_free[transfer.source];
      latencies.clear();
      for (std::uint32_t destination : transfer.destinations) {
        const std::uint32_t latency = target.latency(transfer.source, destination);
        latencies.push_back(latency);
        start = std::max(start, receivers[destination].earliest_send(transfer.source, latency, target.switch_cost));
      }
      schedule.segments.push_back({index, start, transfer.words});
      send_free[transfer.source] = start + transfer.words;
      for (std::size_t k = 0; k < transfer.destinations.size(); ++k)
        receivers[transfer.destinations[k]].take(transfer.source, start + latencies[k], transfer.words);
    }
    return schedule;
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* in_order_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "in-order", "0.1.0",
                                                      "naive baseline: every port serves its transfers in phase order",
                                                      "", "", &tessera::create_plugin_object<InOrderScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(in_order_manifest)
