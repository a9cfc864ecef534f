// A cost model that fails on purpose, in the way its `fault` option names, so the tests can
// check that `isolate: process` contains cost models too.
#include <chrono>
#include <string>
#include <thread>

#include "tessera/cost_model.hpp"
#include "tessera/program.hpp"

namespace {

class FaultyCostModel final : public tessera::CostModel {
public:
  tessera::Status configure(const tessera::Options& options) override {
    fault_ = options.get_string("fault");
    if (fault_ != "segfault" && fault_ != "hang") return tessera::Status::failure("unknown fault '" + fault_ + "'");
    return tessera::Status::success();
  }

private:
  void fail() const {
    if (fault_ == "segfault") {
      volatile int* nowhere = nullptr;
      *nowhere = 1;
    }
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  tessera::CostEstimate estimate_impl(const tessera::Program&, const tessera::Target&) override {
    fail();
    return {};
  }
  std::uint64_t estimate_exchange_impl(const tessera::ExchangePhase&, const tessera::Target&) override {
    fail();
    return 0;
  }

  std::string fault_;
};

const TesseraOptionSpec kOptions[] = {{"fault", "string", "segfault", "segfault or hang"}};

}  // namespace

extern "C" const TesseraPluginManifest* faulty_cost_model_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(TESSERA_PLUGIN_COST_MODEL, "faulty-cost-model", "0.1.0",
                                                      "crashes or hangs on purpose to test isolation", kOptions, "", "",
                                                      &tessera::create_plugin_object<FaultyCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(faulty_cost_model_manifest)
