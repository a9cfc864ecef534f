// A scheduler with one fault per kind of phase, for the tests of `tessera check-plugin`:
// it exits on zero-word transfers, crashes on a broadcast, hangs on huge transfers, drifts by
// one cycle per call (not deterministic) and oversleeps its budget on large phases. On every
// other phase it returns a valid, fully serial schedule.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {
class ErraticScheduler final : public tessera::ExchangeScheduler {
  tessera::Schedule schedule_impl(const tessera::ExchangePhase& phase, const tessera::Target& target,
                                  std::uint64_t budget_ms) override {
    std::uint32_t longest_latency = 0;
    for (const auto& transfer : phase.transfers) {
      if (transfer.words == 0) std::exit(3);
      if (transfer.destinations.size() >= 15) raise(SIGSEGV);
      if (transfer.words >= (1u << 24)) std::this_thread::sleep_for(std::chrono::hours(1));
      for (std::uint32_t destination : transfer.destinations)
        longest_latency = std::max(longest_latency, target.latency(transfer.source, destination));
    }
    if (phase.transfers.size() > 20000) std::this_thread::sleep_for(std::chrono::milliseconds(2 * budget_ms + 300));
    // One transfer at a time, each after the previous one's last arrival plus a switch.
    tessera::Schedule schedule;
    std::uint64_t cycle = calls_++;
    for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
      schedule.segments.push_back({index, cycle, phase.transfers[index].words});
      cycle += phase.transfers[index].words + longest_latency + target.switch_cost;
    }
    return schedule;
  }
  std::uint64_t calls_ = 0;
};
}  // namespace

extern "C" const TesseraPluginManifest* erratic_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "erratic-scheduler", "0.1.0",
                                                      "crashes, hangs, exits, drifts and oversleeps (test only)", "",
                                                      "", &tessera::create_plugin_object<ErraticScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(erratic_manifest)
