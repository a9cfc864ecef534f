// A plugin built for a future API major version: the host must refuse it.
#include "tessera/cost_model.hpp"

namespace {
class FutureModel final : public tessera::CostModel {
  tessera::CostEstimate estimate_impl(const tessera::Program&, const tessera::Target&) override { return {}; }
  std::uint64_t estimate_exchange_impl(const tessera::ExchangePhase&, const tessera::Target&) override { return 0; }
};
}  // namespace

extern "C" const TesseraPluginManifest* future_manifest() noexcept {
  static const TesseraPluginManifest manifest = [] {
    auto m = tessera::make_manifest(TESSERA_PLUGIN_COST_MODEL, "future-model", "9.0.0", "built for API 99", "", "",
                                    &tessera::create_plugin_object<FutureModel>);
    m.api_major = 99;
    return m;
  }();
  return &manifest;
}
TESSERA_PLUGIN(future_manifest)
