// A plugin as built against API 2.0, before typed options: a manifest that ends before
// `option_limits`, minor 0, options as a plain table and checked by hand in configure().
// The host must still load it, and report its refusal at the option's place.
#include <string>

#include "tessera/cost_model.hpp"

namespace {

class OldApiModel final : public tessera::CostModel {
public:
  tessera::Status configure(const tessera::Options& options) override {
    const std::int64_t penalty = options.get_int("penalty");
    if (penalty < 0)
      return tessera::Status::failure("option 'penalty' is " + std::to_string(penalty) + "; give 0 or more cycles");
    return tessera::Status::success();
  }

protected:
  tessera::CostEstimate estimate_impl(const tessera::Program&, const tessera::Target&) override { return {}; }
  std::uint64_t estimate_exchange_impl(const tessera::ExchangePhase&, const tessera::Target&) override { return 0; }
};

const TesseraOptionSpec kOptions[] = {
    {"penalty", "int", "3", "cycles added per call"},
    {"mode", "string", "plain", "any text"},
};

}  // namespace

extern "C" const TesseraPluginManifest* old_api_manifest() noexcept {
  static const TesseraPluginManifest manifest = [] {
    auto m = tessera::make_manifest(TESSERA_PLUGIN_COST_MODEL, "old-api-model", "0.1.0", "built for API 2.0", kOptions,
                                    "", "", &tessera::create_plugin_object<OldApiModel>);
    m.api_minor = 0;
    m.struct_size = TESSERA_MANIFEST_SIZE_2_0;
    // Past a 2.0 manifest's end: a host that read it would crash here, not pass the test.
    m.option_limits = reinterpret_cast<const TesseraOptionLimits*>(std::uintptr_t{1});
    return m;
  }();
  return &manifest;
}
TESSERA_PLUGIN(old_api_manifest)
