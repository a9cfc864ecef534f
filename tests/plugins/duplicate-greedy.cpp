// A second plugin calling itself "greedy": loading it beside the real one must be an error.
#include <algorithm>

#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {
// One transfer at a time, each after the previous one has fully arrived: slow but valid.
class Sequential final : public tessera::ExchangeScheduler {
  tessera::Schedule schedule_impl(const tessera::ExchangePhase& phase, const tessera::Target& target,
                                  std::uint64_t) override {
    tessera::Schedule schedule;
    std::uint64_t cycle = 0;
    for (std::uint32_t t = 0; t < phase.transfers.size(); ++t) {
      const auto& transfer = phase.transfers[t];
      std::uint32_t latency = 0;
      for (auto d : transfer.destinations) latency = std::max(latency, target.latency(transfer.source, d));
      schedule.segments.push_back({t, cycle, transfer.words});
      cycle += transfer.words + latency + target.switch_cost;
    }
    return schedule;
  }
};
}  // namespace

extern "C" const TesseraPluginManifest* duplicate_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "greedy", "0.0.1", "an impostor named greedy", "", "",
                             &tessera::create_plugin_object<Sequential>);
  return &manifest;
}
TESSERA_PLUGIN(duplicate_manifest)
