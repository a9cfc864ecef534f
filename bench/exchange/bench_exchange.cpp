// Benchmark: every exchange-scheduler plugin on phases shaped like real traffic, against the
// lower bound, on the ideal and the realistic 1,472-tile targets. Prints one table.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/phases.hpp"

namespace fs = std::filesystem;
using namespace tessera;

int main(int argc, char** argv) {
  configure_logging("warn");
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  try {
    PluginHost host;
    host.load_directory((build / "plugins").string());
    std::vector<std::string> schedulers;
    for (const char* name : {"in-order", "greedy", "optimal", "latency-aware", "milp"})
      if (host.find(name)) schedulers.push_back(name);
    const Target ideal = load_target((source / "configs/targets/t1472-ideal.yaml").string());
    const Target real = load_target((source / "configs/targets/t1472.yaml").string());

    // Phases shaped like real traffic, from the testing kit's zoo (tessera::testing).
    const std::uint32_t tiles = 1472;
    const std::uint64_t seed = 2026;
    testing::RandomPhaseShape broadcasts;  // every transfer a multicast to 2..16 tiles
    broadcasts.tiles = tiles;
    broadcasts.transfers = tiles / 2;
    broadcasts.multicast_fraction = 1.0;
    broadcasts.max_fanout = 16;
    const std::vector<testing::NamedPhase> phases = {
        {"reduce-scatter-46", testing::reduce_scatter_phase(tiles, 46, 1, seed)},
        {quick ? "permutations-8" : "permutations-64",
         testing::permutation_phase(tiles, quick ? 8 : 64, 200, 200, seed)},
        {"hot-receivers-16", testing::hot_receiver_phase(tiles, 16, tiles / 16, 0, seed)},
        {"multicast-16", testing::random_phase(broadcasts, seed)},
        {quick ? "scatter-40" : "scatter-400", testing::scatter_phase(tiles, quick ? 40 : 400, 1, 64, seed)},
        {"all-to-all-8", testing::all_to_all_phase(8)},
        {"overlapping-multicast-11", testing::overlapping_multicast_phase(11)},
    };

    std::printf("%-26s %-12s %8s %-14s %9s %9s %9s %7s %9s %10s\n", "phase", "target", "transfers", "scheduler",
                "bound", "lower", "horizon", "ratio", "segments", "elapsed_ms");
    for (const auto& [name, phase] : phases) {
      for (const Target* target : {&ideal, &real}) {
        for (const auto& scheduler_name : schedulers) {
          const PluginInfo& info = *host.find(scheduler_name);
          if (scheduler_name == "milp" && phase.transfers.size() > 64) continue;  // exact model: small phases only
          auto scheduler = host.create_scheduler(info, host.resolve_options(info, {}, "bench"));
          ScheduleReport report;
          const auto start = std::chrono::steady_clock::now();
          Schedule schedule = scheduler->schedule(phase, *target, 2000, &report);
          const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
          std::printf(
              "%-26s %-12s %8zu %-14s %9llu %9llu %9llu %7.3f %9zu %10.1f\n", name.c_str(), target->name.c_str(),
              phase.transfers.size(), scheduler_name.c_str(), (unsigned long long)report.endpoint_lower_bound,
              (unsigned long long)report.lower_bound, (unsigned long long)report.horizon,
              report.lower_bound ? double(report.horizon) / report.lower_bound : 1.0, schedule.segments.size(), ms);
          std::fflush(stdout);
        }
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
