// The `in-order` exchange scheduler: the naive baseline every port serves in phase order.
//
// Transfer i starts at the first cycle its source has finished its earlier transfers and
// every destination can take its first word (earlier transfers received, switch cost paid),
// latency included. One segment per transfer. It is what a compiler gets with no scheduler,
// so it is the yardstick the others are measured against.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::ExchangePhase;
using tessera::Schedule;
using tessera::Target;
using tessera::Transfer;

constexpr std::uint32_t kNoSource = std::numeric_limits<std::uint32_t>::max();

class InOrderScheduler final : public tessera::ExchangeScheduler {
protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t /*budget_ms*/) override {
    std::vector<std::uint64_t> send_free(phase.tiles, 0);     // first cycle it may send
    std::vector<std::uint64_t> receive_free(phase.tiles, 0);  // first cycle a word may arrive
    std::vector<std::uint32_t> last_source(phase.tiles, kNoSource);
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
        std::uint64_t ready = receive_free[destination];
        if (last_source[destination] != kNoSource && last_source[destination] != transfer.source)
          ready += target.switch_cost;
        if (ready > latency) start = std::max(start, ready - latency);
      }
      schedule.segments.push_back({index, start, transfer.words});
      send_free[transfer.source] = start + transfer.words;
      for (std::size_t k = 0; k < transfer.destinations.size(); ++k) {
        receive_free[transfer.destinations[k]] = start + latencies[k] + transfer.words;
        last_source[transfer.destinations[k]] = transfer.source;
      }
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
