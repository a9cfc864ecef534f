// Benchmark: every exchange-scheduler plugin on phases shaped like real traffic, against the
// lower bound, on the ideal and the realistic 1,472-tile targets. Prints one table.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

struct NamedPhase {
  std::string name;
  ExchangePhase phase;
};

Transfer transfer(std::uint32_t source, std::vector<std::uint32_t> destinations, std::uint32_t words) {
  Transfer t;
  t.source = source;
  t.destinations = std::move(destinations);
  t.words = words;
  t.destination_addresses.assign(t.destinations.size(), 0);
  return t;
}

// Every tile sends `words` to each of `fanout` others chosen at random (an all-to-all shuffle).
NamedPhase shuffle(std::uint32_t tiles, std::uint32_t fanout, std::uint32_t max_words, std::mt19937_64& rng) {
  NamedPhase p{"shuffle-" + std::to_string(fanout), {tiles, {}}};
  std::vector<std::uint32_t> others(tiles - 1);
  std::uniform_int_distribution<std::uint32_t> words(1, max_words);
  for (std::uint32_t s = 0; s < tiles; ++s) {
    std::iota(others.begin(), others.end(), 0);
    for (auto& o : others) o += o >= s;
    std::shuffle(others.begin(), others.end(), rng);
    for (std::uint32_t i = 0; i < fanout; ++i) p.phase.transfers.push_back(transfer(s, {others[i]}, words(rng)));
  }
  return p;
}

// Groups of `group` neighbouring tiles; each tile sends a slice to every other in its group.
NamedPhase reduce_scatter(std::uint32_t tiles, std::uint32_t group, std::uint32_t words) {
  NamedPhase p{"reduce-scatter-" + std::to_string(group), {tiles, {}}};
  for (std::uint32_t base = 0; base + group <= tiles; base += group)
    for (std::uint32_t s = base; s < base + group; ++s)
      for (std::uint32_t d = base; d < base + group; ++d)
        if (d != s) p.phase.transfers.push_back(transfer(s, {d}, words + (s * 7 + d) % 5));
  return p;
}

// A sum of random permutations: every tile sends and receives exactly the bound.
NamedPhase permutations(std::uint32_t tiles, std::uint32_t count, std::uint32_t words, std::mt19937_64& rng) {
  NamedPhase p{"permutations-" + std::to_string(count), {tiles, {}}};
  std::vector<std::uint32_t> perm(tiles);
  for (std::uint32_t k = 0; k < count; ++k) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // a derangement is not needed: fix points skipped
    for (std::uint32_t s = 0; s < tiles; ++s)
      if (perm[s] != s) p.phase.transfers.push_back(transfer(s, {perm[s]}, words));
  }
  return p;
}

// Most tiles send to a few hot receivers.
NamedPhase hot_receivers(std::uint32_t tiles, std::uint32_t hot, std::uint32_t words, std::mt19937_64& rng) {
  NamedPhase p{"hot-receivers-" + std::to_string(hot), {tiles, {}}};
  std::uniform_int_distribution<std::uint32_t> pick(0, hot - 1), size(1, words);
  for (std::uint32_t s = 0; s < tiles; ++s) {
    const std::uint32_t receiver = pick(rng) * (tiles / hot);
    if (receiver != s) p.phase.transfers.push_back(transfer(s, {receiver}, size(rng)));
  }
  return p;
}

// Broadcasts: each source multicasts to a group of `fanout` tiles.
NamedPhase multicast(std::uint32_t tiles, std::uint32_t fanout, std::uint32_t words, std::mt19937_64& rng) {
  NamedPhase p{"multicast-" + std::to_string(fanout), {tiles, {}}};
  std::uniform_int_distribution<std::uint32_t> pick(0, tiles - 1);
  for (std::uint32_t s = 0; s < tiles; s += 2) {
    std::vector<std::uint32_t> destinations;
    while (destinations.size() < fanout) {
      std::uint32_t d = pick(rng);
      if (d != s && std::find(destinations.begin(), destinations.end(), d) == destinations.end())
        destinations.push_back(d);
    }
    p.phase.transfers.push_back(transfer(s, destinations, words));
  }
  return p;
}

}  // namespace

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

    std::mt19937_64 rng(2026);
    const std::uint32_t tiles = 1472;
    std::vector<NamedPhase> phases;
    phases.push_back(reduce_scatter(tiles, 46, 60));
    phases.push_back(permutations(tiles, quick ? 8 : 64, 200, rng));
    phases.push_back(hot_receivers(tiles, 16, 40, rng));
    phases.push_back(multicast(tiles, 16, 64, rng));
    phases.push_back(shuffle(tiles, quick ? 40 : 400, 64, rng));
    NamedPhase tiny{"tiny-8-tiles", {8, {}}};
    for (std::uint32_t s = 0; s < 8; ++s) tiny.phase.transfers.push_back(transfer(s, {(s * 3 + 1) % 8}, 3 + s % 4));
    for (std::uint32_t s = 0; s < 8; s += 2) tiny.phase.transfers.push_back(transfer(s, {(s + 5) % 8}, 2));
    phases.push_back(tiny);
    NamedPhase tiny_multicast{"tiny-multicast-8", {8, {}}};
    for (std::uint32_t s = 0; s < 8; s += 2)
      tiny_multicast.phase.transfers.push_back(transfer(s, {(s + 1) % 8, (s + 3) % 8, (s + 6) % 8}, 4 + s / 2));
    tiny_multicast.phase.transfers.push_back(transfer(1, {0, 2}, 5));
    tiny_multicast.phase.transfers.push_back(transfer(3, {2, 4}, 3));
    phases.push_back(tiny_multicast);

    std::printf("%-22s %-12s %8s %-14s %9s %9s %9s %7s %9s %10s\n", "phase", "target", "transfers", "scheduler",
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
              "%-22s %-12s %8zu %-14s %9llu %9llu %9llu %7.3f %9zu %10.1f\n", name.c_str(), target->name.c_str(),
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
