// The shipped plugins (TESSERA_PLUGIN_DIR), loaded once per test program, and their objects.
#pragma once
#include <catch2/catch.hpp>

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>

#include "tessera/cost_model.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/testing/battery.hpp"

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

/// A shipped cost model, configured with `given` (defaults filled in).
inline std::unique_ptr<CostModel> make_cost_model(const std::string& name, const Options& given = {}) {
  const PluginInfo* info = shipped_plugins().find(name);
  REQUIRE(info != nullptr);
  return shipped_plugins().create_cost_model(*info, shipped_plugins().resolve_options(*info, given, "test"));
}

/// Each check of a battery (tessera::testing) as a Catch2 CHECK that names it and says why.
inline void check_battery(const BatteryResult& result) {
  REQUIRE_FALSE(result.checks.empty());
  for (const CheckResult& check : result.checks) {
    INFO(check.name << ": " << check.outcome.detail);
    CHECK(check.outcome.passed);
  }
}

/// The options the shipped plugins' own tests run their battery with: check-plugin's, less
/// the wall-clock check, which a busy machine would fail.
inline BatteryOptions unit_test_battery_options() {
  BatteryOptions options;
  options.check_time_budget = false;
  return options;
}

}  // namespace tessera::testing
