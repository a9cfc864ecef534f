// The `optimal` scheduler, loaded through the real plugin host and checked by the validator.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "exchange_testing.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

using namespace tessera;
using tessera::testing::random_phase;
using tessera::testing::RandomPhaseShape;
using tessera::testing::shipped_target;
using tessera::testing::skewed_phase;

namespace {

PluginHost& host() {
  static PluginHost loaded;
  static const bool once = (loaded.load_directory(TESSERA_PLUGIN_DIR), true);
  (void)once;
  return loaded;
}

std::unique_ptr<ExchangeScheduler> make_scheduler(const std::string& name, Options given = {}) {
  const PluginInfo* info = host().find(name);
  REQUIRE(info != nullptr);
  return host().create_scheduler(*info, host().resolve_options(*info, given, "test"));
}

std::unique_ptr<ExchangeScheduler> make_optimal(const std::string& repair = "") {
  Options given;
  if (!repair.empty()) given.values["repair"] = repair;
  return make_scheduler("optimal", given);
}

Target without_multicast(Target target) {
  target.multicast = false;
  target.name += "-unicast";
  return target;
}

// Schedules through the public entry point (which validates), then re-checks the result
// here: valid, every segment carries words, and at most two segments per transfer.
ScheduleReport schedule_and_check(ExchangeScheduler& scheduler, const ExchangePhase& phase,
                                  const Target& target, Schedule* out = nullptr) {
  ScheduleReport report;
  Schedule schedule = scheduler.schedule(phase, target, 2000, &report);
  const ScheduleReport again = validate_schedule(phase, schedule, target);
  INFO(again.first_conflict);
  REQUIRE(again.valid);
  REQUIRE(again.horizon == report.horizon);
  std::size_t transfers_with_words = 0;
  for (const Transfer& transfer : phase.transfers) transfers_with_words += transfer.words > 0;
  CHECK(schedule.segments.size() <= 2 * transfers_with_words);
  CHECK(report.horizon >= report.lower_bound);
  if (out) *out = std::move(schedule);
  return report;
}

// ---- phase shapes like real traffic ----

Transfer unicast(std::uint32_t source, std::uint32_t destination, std::uint32_t words) {
  return Transfer{source, {destination}, words, 0, {}};
}

// Every tile of `tiles` sends a block to every other tile.
ExchangePhase all_to_all_phase(std::uint32_t tiles, std::uint32_t min_words,
                               std::uint32_t max_words, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(min_words, max_words);
  ExchangePhase phase;
  phase.tiles = tiles;
  for (std::uint32_t source = 0; source < tiles; ++source)
    for (std::uint32_t destination = 0; destination < tiles; ++destination)
      if (destination != source) phase.transfers.push_back(unicast(source, destination, words(random)));
  return phase;
}

// Reduce-scatter: tiles in groups of `group`; each member sends every other member its
// slice (of uneven size), in several transfers when `parts` > 1.
ExchangePhase reduce_scatter_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t parts,
                                   std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(1, 40);
  ExchangePhase phase;
  phase.tiles = tiles;
  for (std::uint32_t base = 0; base + group <= tiles; base += group)
    for (std::uint32_t source = base; source < base + group; ++source)
      for (std::uint32_t destination = base; destination < base + group; ++destination)
        if (destination != source)
          for (std::uint32_t part = 0; part < parts; ++part)
            phase.transfers.push_back(unicast(source, destination, words(random)));
  return phase;
}

// Sums of `permutations` random derangements, each with its own weight split into `parts`
// transfers: every tile sends and receives exactly the bound.
ExchangePhase permutation_sum_phase(std::uint32_t tiles, std::uint32_t permutations,
                                    std::uint32_t parts, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(1, 30);
  ExchangePhase phase;
  phase.tiles = tiles;
  std::vector<std::uint32_t> image(tiles);
  for (std::uint32_t p = 0; p < permutations; ++p) {
    std::iota(image.begin(), image.end(), 0u);
    std::shuffle(image.begin(), image.end(), random);
    // Rotate fixed points away: swapping with a neighbour keeps it a permutation.
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      if (image[tile] == tile) std::swap(image[tile], image[(tile + 1) % tiles]);
    std::vector<std::uint32_t> weights(parts);
    for (std::uint32_t& w : weights) w = words(random);
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      for (std::uint32_t w : weights) phase.transfers.push_back(unicast(tile, image[tile], w));
  }
  return phase;
}

// Each tile sends `fanout` distinct random tiles a block: the shape of the production
// compiler's 586,368-transfer phase when fanout is about 400.
ExchangePhase scatter_phase(std::uint32_t tiles, std::uint32_t fanout, std::uint32_t min_words,
                            std::uint32_t max_words, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(min_words, max_words);
  ExchangePhase phase;
  phase.tiles = tiles;
  phase.transfers.reserve(std::size_t{tiles} * fanout);
  std::vector<std::uint32_t> others(tiles);
  for (std::uint32_t source = 0; source < tiles; ++source) {
    std::iota(others.begin(), others.end(), 0u);
    std::swap(others[source], others.back());
    for (std::uint32_t k = 0; k < fanout; ++k) {  // partial Fisher-Yates over the others
      std::uniform_int_distribution<std::uint32_t> pick(k, tiles - 2);
      std::swap(others[k], others[pick(random)]);
      phase.transfers.push_back(unicast(source, others[k], words(random)));
    }
  }
  return phase;
}

struct NamedPhase {
  std::string name;
  ExchangePhase phase;
};

// The shapes every ideal-target test runs, at test size (well under a second each).
std::vector<NamedPhase> unicast_shapes() {
  RandomPhaseShape uniform;
  uniform.transfers = 20000;
  return {
      {"uniform random", random_phase(uniform, 1)},
      {"all-to-all 160 tiles", all_to_all_phase(160, 1, 64, 2)},
      {"reduce-scatter groups of 16", reduce_scatter_phase(1472, 16, 1, 3)},
      {"reduce-scatter groups of 48, 3 parts", reduce_scatter_phase(1440, 48, 3, 4)},
      {"hot receivers", skewed_phase(1472, 30000, 16, 5)},
      {"sum of 24 permutations", permutation_sum_phase(1472, 24, 1, 6)},
      {"sum of 8 permutations, 4 parts", permutation_sum_phase(1472, 8, 4, 7)},
      {"scatter fanout 24", scatter_phase(1472, 24, 1, 48, 8)},
  };
}

}  // namespace

TEST_CASE("optimal loads through the plugin host as an exchange scheduler", "[optimal]") {
  const PluginInfo* info = host().find("optimal");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::exchange_scheduler);
  REQUIRE(info->options.size() == 1);
  CHECK(info->options[0].name == "repair");
  CHECK(std::get<std::string>(info->options[0].default_value) == "dense");
}

TEST_CASE("optimal reaches the endpoint bound exactly on the ideal target without multicast",
          "[optimal]") {
  const Target ideal = without_multicast(shipped_target("t1472-ideal"));
  auto optimal = make_optimal();
  for (const NamedPhase& shape : unicast_shapes()) {
    Schedule schedule;
    const ScheduleReport report = schedule_and_check(*optimal, shape.phase, ideal, &schedule);
    INFO(shape.name << ": horizon " << report.horizon << " bound " << report.endpoint_lower_bound
                    << " segments " << schedule.segments.size() << " transfers "
                    << shape.phase.transfers.size());
    CHECK(report.horizon == report.endpoint_lower_bound);
  }
}

TEST_CASE("optimal prints its figures on the shipped targets", "[optimal][.perf]") {
  struct Row {
    std::string shape, target, scheduler;
    ScheduleReport report;
    std::size_t transfers, segments;
    double ms;
  };
  std::vector<Row> rows;
  auto run = [&](const std::string& shape, const ExchangePhase& phase, const Target& target,
                 const std::string& name, ExchangeScheduler& scheduler) {
    const auto started = std::chrono::steady_clock::now();
    ScheduleReport report;
    Schedule schedule = scheduler.schedule(phase, target, 2000, &report);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    rows.push_back({shape, target.name, name, report, phase.transfers.size(), schedule.segments.size(), ms});
    const Row& row = rows.back();
    fmt::print("{:<40} {:<20} {:<10} transfers={:>7} bound={:>6} lower_bound={:>6} horizon={:>6} "
               "ratio={:.4f} segments/transfer={:.3f} ms={:.0f}\n",
               row.shape, row.target, row.scheduler, row.transfers, row.report.endpoint_lower_bound,
               row.report.lower_bound, row.report.horizon,
               double(row.report.horizon) / double(std::max<std::uint64_t>(1, row.report.lower_bound)),
               double(row.segments) / double(std::max<std::size_t>(1, row.transfers)), row.ms);
  };
  auto optimal = make_optimal();
  auto left_shift = make_optimal("left-shift");
  auto greedy = make_scheduler("greedy");
  const Target ideal = shipped_target("t1472-ideal");
  const Target realistic = shipped_target("t1472");
  std::vector<NamedPhase> shapes = unicast_shapes();
  RandomPhaseShape multicast;
  multicast.transfers = 20000;
  multicast.multicast_fraction = 0.25;
  multicast.max_fanout = 6;
  shapes.push_back({"random 25% multicast", random_phase(multicast, 11)});
  for (const NamedPhase& shape : shapes)
    for (const Target* target : {&ideal, &realistic}) {
      run(shape.name, shape.phase, *target, "optimal", *optimal);
      if (target == &realistic) run(shape.name, shape.phase, *target, "left-shift", *left_shift);
      run(shape.name, shape.phase, *target, "greedy", *greedy);
    }
  const ExchangePhase big = scatter_phase(1472, 398, 18, 48, 586);
  run("scatter 586k", big, ideal, "optimal", *optimal);
  run("scatter 586k", big, realistic, "optimal", *optimal);
  run("scatter 586k", big, realistic, "left-shift", *left_shift);
  run("scatter 586k", big, realistic, "greedy", *greedy);
}
