// example-scheduler's own test, with the installed test kit (tessera::testing): check-plugin's
// scheduler battery and every phase of the zoo, on the plugin file this project built.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include <boost/dll/shared_library.hpp>

#include "tessera/plugin.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/testing/battery.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/schedule.hpp"
#include "tessera/testing/targets.hpp"

namespace {

// Loaded once and never unloaded, as the host does: objects it made must not outlive its code.
const TesseraPluginManifest& manifest() {
  static const boost::dll::shared_library library(EXAMPLE_SCHEDULER_FILE);
  static const TesseraPluginManifest* loaded = library.get_alias<TesseraPluginEntry>(tessera::kPluginEntrySymbol)();
  return *loaded;
}

std::unique_ptr<tessera::ExchangeScheduler> make_example_scheduler(bool backfill) {
  std::unique_ptr<tessera::PluginObject> object(manifest().create());
  if (!dynamic_cast<tessera::ExchangeScheduler*>(object.get()))
    throw std::runtime_error("the plugin did not create an exchange scheduler");
  tessera::Options options;
  options.values["backfill"] = backfill;
  if (const tessera::Status status = object->configure(options); !status.ok) throw std::runtime_error(status.message);
  return std::unique_ptr<tessera::ExchangeScheduler>(static_cast<tessera::ExchangeScheduler*>(object.release()));
}

}  // namespace

int main() {
  int failures = 0;
  for (const bool backfill : {true, false}) {
    tessera::testing::BatteryOptions options;
    options.check_time_budget = false;  // wall-clock: a busy machine would fail it
    const tessera::testing::BatteryResult battery =
        tessera::testing::scheduler_battery([backfill] { return make_example_scheduler(backfill); }, options);
    std::printf("backfill=%d: battery of %zu checks, %zu failed\n%s", backfill, battery.checks.size(), battery.failed(),
                battery.failures().c_str());
    failures += static_cast<int>(battery.failed());

    // Non-preemptive: the zoo's every phase in one segment per transfer.
    const tessera::Target target = tessera::testing::latency_target("latency-64", 64, 16);
    for (const tessera::testing::NamedPhase& named : tessera::testing::phase_zoo(target)) {
      try {
        tessera::testing::schedule_and_check(*make_example_scheduler(backfill), named.phase, target,
                                             {.budget_ms = 500, .max_segments_per_transfer = 1});
      } catch (const std::exception& e) {
        std::printf("backfill=%d: phase '%s': %s\n", backfill, named.name.c_str(), e.what());
        ++failures;
      }
    }
  }
  std::printf("%s\n", failures == 0 ? "all passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
