// A cost model with the faults `tessera check-plugin` must catch: bigger matmuls estimated
// cheaper, an empty exchange phase estimated as a wrapped-around NaN, no memory counted. Its
// build exports every symbol (no hidden visibility), which the checker must also report.
#include <cstdint>
#include <limits>

#include "tessera/cost_model.hpp"
#include "tessera/exchange.hpp"
#include "tessera/program.hpp"

namespace {
class CarelessCostModel final : public tessera::CostModel {
  tessera::CostEstimate estimate_impl(const tessera::Program& program, const tessera::Target&) override {
    tessera::CostEstimate estimate;
    for (const auto& step : program.supersteps)
      for (const auto& call : step.compute) {
        const double macs =
            call.codelet == tessera::Codelet::matmul ? double(call.params[0]) * call.params[1] * call.params[2] : 1.0;
        estimate.compute_cycles += static_cast<std::uint64_t>(1e6 / macs);
      }
    return estimate;
  }
  std::uint64_t estimate_exchange_impl(const tessera::ExchangePhase& phase, const tessera::Target&) override {
    if (phase.transfers.empty()) return std::numeric_limits<std::uint64_t>::max();
    return tessera::endpoint_lower_bound(phase);
  }
};
}  // namespace

extern "C" const TesseraPluginManifest* careless_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(TESSERA_PLUGIN_COST_MODEL, "careless-cost-model", "0.1.0",
                                                      "not monotone, not finite, exports everything (test only)", "",
                                                      "", &tessera::create_plugin_object<CarelessCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(careless_manifest)
