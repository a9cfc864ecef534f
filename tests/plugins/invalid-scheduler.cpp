// A scheduler that starts every transfer at cycle 0: the core's validator must reject it.
#include "tessera/scheduler.hpp"

namespace {
class AllAtOnce final : public tessera::ExchangeScheduler {
  tessera::Schedule schedule_impl(const tessera::ExchangePhase& phase, const tessera::Target&, std::uint64_t) override {
    tessera::Schedule schedule;
    for (std::uint32_t t = 0; t < phase.transfers.size(); ++t)
      schedule.segments.push_back({t, 0, phase.transfers[t].words});
    return schedule;
  }
};
}  // namespace

extern "C" const TesseraPluginManifest* all_at_once_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "all-at-once", "0.1.0",
                             "every transfer at cycle 0 (invalid)", "", "", &tessera::create_plugin_object<AllAtOnce>);
  return &manifest;
}
TESSERA_PLUGIN(all_at_once_manifest)
