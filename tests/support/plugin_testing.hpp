// The shipped plugins (TESSERA_PLUGIN_DIR), loaded once per test program, and their objects.
#pragma once
#include <catch2/catch.hpp>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"

namespace tessera::testing {

inline PluginHost& shipped_plugins() {
  static PluginHost loaded;
  static const bool once = (loaded.load_directory(TESSERA_PLUGIN_DIR), true);
  (void)once;
  return loaded;
}

inline Options options(std::initializer_list<std::pair<const std::string, OptionValue>> values) {
  Options given;
  given.values = values;
  return given;
}

/// A shipped exchange scheduler, configured with `given` (defaults filled in).
inline std::unique_ptr<ExchangeScheduler> make_scheduler(const std::string& name, const Options& given = {}) {
  const PluginInfo* info = shipped_plugins().find(name);
  REQUIRE(info != nullptr);
  return shipped_plugins().create_scheduler(*info, shipped_plugins().resolve_options(*info, given, "test"));
}

}  // namespace tessera::testing
