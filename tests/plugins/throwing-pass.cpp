// A pass whose code throws: the core must catch it and report the plugin by name.
#include <stdexcept>

#include "tessera/pass.hpp"

namespace {
class ThrowingPass final : public tessera::Pass {
  tessera::Status run_impl(tessera::CompilationState&, tessera::PassContext&) override {
    throw std::runtime_error("deliberate failure inside the plugin");
  }
};
}  // namespace

extern "C" const TesseraPluginManifest* throwing_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_PASS, "throwing-pass", "0.1.0", "throws from run()", "graph", "",
                             &tessera::create_plugin_object<ThrowingPass>);
  return &manifest;
}
TESSERA_PLUGIN(throwing_manifest)
