// The `analytic` cost model, loaded through the real plugin host.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "shipped_target.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/battery.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::unique_ptr<CostModel> make_model(double exchange_efficiency = 1.0) {
  return make_cost_model("analytic", options({{"exchange_efficiency", exchange_efficiency}}));
}

std::uint32_t add_buffer(Program& program, std::uint32_t tile, std::uint32_t bytes, std::uint32_t first_use = 0,
                         std::uint32_t last_use = 0) {
  Buffer buffer;
  buffer.name = "b" + std::to_string(program.buffers.size());
  buffer.tile = tile;
  buffer.bytes = bytes;
  buffer.first_use = first_use;
  buffer.last_use = last_use;
  program.buffers.push_back(buffer);
  return static_cast<std::uint32_t>(program.buffers.size() - 1);
}

CodeletCall matmul(std::uint32_t tile, std::uint32_t m, std::uint32_t k, std::uint32_t n) {
  return CodeletCall{tile, Codelet::matmul, {{0, 0}, {0, 0}, {0, 0}}, {m, k, n, 0}};
}

CodeletCall relu(std::uint32_t tile, std::uint32_t count) {
  return CodeletCall{tile, Codelet::relu, {{0, 0}}, {count}};
}

std::uint64_t compute_of(const std::vector<std::vector<CodeletCall>>& steps) {
  Program program;
  add_buffer(program, 0, 4);
  for (const auto& calls : steps) {
    Superstep step;
    step.label = "s" + std::to_string(program.supersteps.size());
    step.compute = calls;
    program.supersteps.push_back(step);
  }
  return make_model()->estimate(program, shipped_target("t1472")).compute_cycles;
}

std::uint64_t mean_latency(const ExchangePhase& phase, const Target& target) {
  double sum = 0, pairs = 0;
  for (const Transfer& t : phase.transfers)
    for (std::uint32_t d : t.destinations) {
      sum += target.latency(t.source, d);
      ++pairs;
    }
  return static_cast<std::uint64_t>(std::llround(sum / pairs));
}

}  // namespace

TEST_CASE("analytic passes the check-plugin cost-model battery", "[analytic][battery]") {
  check_battery(cost_model_battery([] { return make_model(); }, unit_test_battery_options()));
}

TEST_CASE("analytic loads through the plugin host as a cost model", "[analytic]") {
  const PluginInfo* info = shipped_plugins().find("analytic");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::cost_model);
  REQUIRE(info->options.size() == 1);
  CHECK(info->options[0].name == "exchange_efficiency");
  CHECK(info->options[0].type == OptionType::number);
}

TEST_CASE("analytic estimates an empty program as free", "[analytic]") {
  const CostEstimate estimate = make_model()->estimate(Program{}, shipped_target("t1472"));
  CHECK(estimate.total() == 0);
  CHECK(estimate.peak_tile_bytes == 0);
}

TEST_CASE("analytic charges matmuls as AMP passes and the slowest tile per superstep", "[analytic]") {
  // 256^3: 32 x 16 passes of 25 + a 32-cycle weight load + 6 workers x (22 + 8 x ceil(256 / 6)
  // rows), plus the call's 170.
  CHECK(compute_of({{matmul(0, 256, 256, 256)}}) == 512 * (25 + 32 + 6 * (22 + 8 * 43)) + 170);
  const std::uint64_t one = compute_of({{matmul(0, 64, 64, 64)}});
  CHECK(one == 32 * (25 + 32 + 6 * (22 + 8 * 11)) + 170);
  // Swapped, b's 256 columns are the field and a's 16 rows the outputs, left as c^T; b [n, k]
  // needs no transpose. The transpose call after it costs a cycle an element.
  const CodeletCall swapped{0, Codelet::matmul_transposed, {{0, 0}, {0, 0}, {0, 0}}, {16, 256, 256, 1}};
  CHECK(compute_of({{swapped}}) == 32 * (25 + 32 + 6 * (22 + 8 * 43)) + 170);
  const CodeletCall transpose{0, Codelet::transpose, {{0, 0}, {0, 0}}, {256, 16}};
  CHECK(compute_of({{swapped, transpose}}) == 32 * (25 + 32 + 6 * (22 + 8 * 43)) + 170 + 256 * 16 + 170);
  // A tiny product: the faster of one AMP pass (25 + a 32-cycle weight load + 6 x the 46-cycle
  // fill) and the workers (6 x (51 + 14 + k / 2)); the simulator charges 472 for it.
  CHECK(compute_of({{matmul(0, 1, 8, 1)}}) == std::min(25 + 32 + 6 * 46, 6 * (51 + 14 + 4)) + 170);
  // A long, thin one runs on the workers: k = 4096 would take 512 AMP passes.
  CHECK(compute_of({{matmul(0, 1, 4096, 1)}}) == 6 * (51 + 14 + 2048) + 170);
  // Other tiles work in parallel; the same tile adds up; supersteps add up.
  CHECK(compute_of({{matmul(0, 64, 64, 64), matmul(1, 64, 64, 64), matmul(1471, 8, 8, 8)}}) == one);
  CHECK(compute_of({{matmul(0, 64, 64, 64), matmul(0, 64, 64, 64)}}) == 2 * one);
  CHECK(compute_of({{matmul(0, 64, 64, 64)}, {matmul(5, 64, 64, 64)}}) == 2 * one);
  CHECK(compute_of({{matmul(0, 64, 64, 64), relu(1, 100000)}}) == compute_of({{relu(1, 100000)}}));
}

TEST_CASE("analytic spreads elementwise work over the worker threads", "[analytic]") {
  // relu: half a tile cycle per element (a vector of two a worker instruction), 170 a call.
  CHECK(compute_of({{relu(0, 6000)}}) == 170 + 3000);
  // Doubling the work roughly doubles the time; an add costs more than a relu.
  const std::uint64_t small = compute_of({{relu(0, 60000)}});
  CHECK(compute_of({{relu(0, 120000)}}) == 2 * small - 170);
  const CodeletCall add{0, Codelet::add, {{0, 0}, {0, 0}, {0, 0}}, {60000}};
  CHECK(compute_of({{add}}) > small);
  const CodeletCall reduce{0, Codelet::reduce_add, {{0, 0}, {0, 0}}, {5, 15000}};
  const CodeletCall copy{0, Codelet::copy, {{0, 0}, {0, 0}}, {60000}};
  CHECK(compute_of({{copy}}) < compute_of({{reduce}}));
  const CodeletCall bias{0, Codelet::bias_add, {{0, 0}, {0, 0}}, {100, 600, 0}};
  const CodeletCall bias_relu{0, Codelet::bias_add, {{0, 0}, {0, 0}}, {100, 600, 1}};
  CHECK(compute_of({{bias}}) < compute_of({{bias_relu}}));
}

TEST_CASE("analytic estimates a lowered phase as endpoint bound, mean latency and overhead", "[analytic]") {
  const Target target = shipped_target("t1472");
  ExchangePhase phase;
  phase.tiles = 1472;
  CHECK(make_model()->estimate_exchange(phase, target) == 0);
  phase.transfers = {Transfer{0, {1, 700}, 50, 0, {}}, Transfer{2, {1}, 30, 0, {}}, Transfer{1400, {3}, 10, 0, {}}};
  const std::uint64_t bound = endpoint_lower_bound(phase);
  REQUIRE(bound == 80);  // tile 1 receives 50 + 30
  const std::uint64_t expected = bound + mean_latency(phase, target) + target.exchange_phase_overhead;
  CHECK(make_model()->estimate_exchange(phase, target) == expected);
  // At half the fabric's peak the words take twice as long.
  CHECK(make_model(0.5)->estimate_exchange(phase, target) == expected + bound);

  // In a program, a superstep's lowered transfers are what counts.
  Program program;
  Superstep step;
  step.label = "lowered";
  step.exchange = phase;
  program.supersteps = {step, step};
  const CostEstimate estimate = make_model()->estimate(program, target);
  CHECK(estimate.exchange_cycles == 2 * expected);
  CHECK(estimate.sync_cycles == 2 * target.sync_cycles);
}

TEST_CASE("analytic estimates copies like the phase they lower to", "[analytic]") {
  // Tile 0 broadcasts one range to tiles 1..3; tile 4 sends two ranges to tile 1; one copy
  // stays on tile 2 and never crosses the fabric.
  Program program;
  const std::uint32_t source = add_buffer(program, 0, 4096);
  const std::uint32_t other = add_buffer(program, 4, 4096);
  std::vector<std::uint32_t> into;
  for (std::uint32_t tile : {1u, 2u, 3u}) into.push_back(add_buffer(program, tile, 4096));
  const std::uint32_t local = add_buffer(program, 2, 4096);
  Superstep step;
  step.label = "copies";
  for (std::uint32_t destination : into) step.copies.push_back(Copy{{source, 16}, {destination, 0}, 200});
  step.copies.push_back(Copy{{other, 0}, {into[0], 200}, 100});
  step.copies.push_back(Copy{{other, 100}, {into[0], 300}, 100});
  step.copies.push_back(Copy{{into[1], 0}, {local, 0}, 500});
  program.supersteps.push_back(step);

  for (bool multicast : {true, false}) {
    Target target = shipped_target("t1472");
    target.multicast = multicast;
    ExchangePhase lowered;
    lowered.tiles = target.tiles;
    if (multicast) {
      lowered.transfers.push_back(Transfer{0, {1, 2, 3}, 200, 0, {}});
    } else {
      for (std::uint32_t tile : {1u, 2u, 3u}) lowered.transfers.push_back(Transfer{0, {tile}, 200, 0, {}});
    }
    lowered.transfers.push_back(Transfer{4, {1}, 100, 0, {}});
    lowered.transfers.push_back(Transfer{4, {1}, 100, 0, {}});
    INFO("multicast " << multicast);
    auto model = make_model();
    // Tile 0 sends 200 words once with multicast, 600 without; tile 1 receives 400.
    CHECK(endpoint_lower_bound(lowered) == (multicast ? 400 : 600));
    CHECK(model->estimate(program, target).exchange_cycles == model->estimate_exchange(lowered, target));
  }
}

TEST_CASE("analytic peak memory follows buffer liveness and alignment", "[analytic]") {
  Program program;
  add_buffer(program, 0, 1000, 0, 1);
  add_buffer(program, 0, 2000, 2, 3);  // reuses the first one's space
  add_buffer(program, 0, 500, 1, 2);   // overlaps both; rounded up to 504 bytes
  program.supersteps.resize(4);
  const Target target = shipped_target("t1472");
  CHECK(make_model()->estimate(program, target).peak_tile_bytes == 2000 + 504);
  add_buffer(program, 1471, 3000, 3, 3);
  CHECK(make_model()->estimate(program, target).peak_tile_bytes == 3000);
  add_buffer(program, 0, 100, 0, 3);
  CHECK(make_model()->estimate(program, target).peak_tile_bytes == 3000);
  add_buffer(program, 0, 400, 2, 2);
  CHECK(make_model()->estimate(program, target).peak_tile_bytes == 2000 + 504 + 104 + 400);
}

TEST_CASE("analytic refuses bad options and malformed programs", "[analytic]") {
  CHECK_THROWS_WITH(make_model(0.0), Catch::Contains("option 'exchange_efficiency' of plugin 'analytic' must be in "
                                                     "[0.001, 1], got 0"));
  CHECK_THROWS_WITH(make_model(1e-20), Catch::Contains("must be in [0.001, 1], got 1e-20"));
  CHECK_THROWS_WITH(make_model(1.5), Catch::Contains("must be in [0.001, 1], got 1.5"));
  Program program;
  add_buffer(program, 1472, 64);
  CHECK_THROWS_WITH(make_model()->estimate(program, shipped_target("t1472")),
                    Catch::Contains("plugin 'analytic'") &&
                        Catch::Contains("buffer 0 ('b0') is on tile 1472 but target 't1472' has 1472 tiles"));
  Program bad_call;
  Superstep step;
  step.label = "broken";
  step.compute.push_back(CodeletCall{0, Codelet::matmul, {}, {4, 4}});
  bad_call.supersteps.push_back(step);
  CHECK_THROWS_WITH(make_model()->estimate(bad_call, shipped_target("t1472")),
                    Catch::Contains("matmul takes 4 params, got 2"));
}

TEST_CASE("analytic estimates 1472 tiles with 100k copies in milliseconds", "[analytic]") {
  const Target target = shipped_target("t1472");
  std::mt19937_64 random(5);
  Program program;
  for (std::uint32_t tile = 0; tile < target.tiles; ++tile)
    for (std::uint32_t i = 0; i < 8; ++i) add_buffer(program, tile, 2048, i % 4, i % 4 + 1);
  program.supersteps.resize(5);
  for (Superstep& step : program.supersteps) {
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile) step.compute.push_back(matmul(tile, 16, 16, 16));
    for (int i = 0; i < 20000; ++i) {
      const auto from = static_cast<std::uint32_t>(random() % program.buffers.size());
      const auto to = static_cast<std::uint32_t>(random() % program.buffers.size());
      step.copies.push_back(Copy{{from, static_cast<std::uint32_t>(random() % 64)}, {to, 0}, 32});
    }
  }
  auto model = make_model();
  const auto started = std::chrono::steady_clock::now();
  const CostEstimate estimate = model->estimate(program, target);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("estimate took " << seconds * 1000 << " ms");
  CHECK(estimate.exchange_cycles > 5 * target.exchange_phase_overhead);
  CHECK(estimate.compute_cycles == 5 * (2 * (25 + 32 + 6 * 46) + 170));
  CHECK(estimate.peak_tile_bytes == 4 * 2048);  // buffers i and i+4 share superstep ranges
}
