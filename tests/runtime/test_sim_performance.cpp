// A hidden timing check ([.perf]): the simulator on a synthetic mlp-b2-n3-sized package.
// Run with `test_runtime "[perf]"`; it is not part of the default suite.
#include <catch2/catch.hpp>

#include <chrono>

#include "tessera/package.hpp"
#include "tessera/runtime/host_exchange.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/runtime/sim_device.hpp"

using namespace tessera;
using namespace tessera::runtime;

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// The real model on the real target, with a plan of the right size: each tile holds a
/// band of rows of every weight and multiplies it (100M MACs in all), then a round-robin
/// exchange of `rounds` transfers per tile and phase moves `words` words each. The
/// arithmetic is not a correct MLP; the work and the traffic are.
Package synthetic_package(std::uint32_t rounds, std::uint32_t words) {
  Package p;
  p.compiler_version = "perf";
  p.target = load_target(TESSERA_SOURCE_DIR "/configs/targets/t1472.yaml");
  p.target_hash = p.target.hash();
  p.graph = load_model(TESSERA_SOURCE_DIR "/configs/models/mlp-b2-n3.yaml");
  const Target& t = p.target;
  const std::uint32_t tiles = t.tiles, width = 4096, layers = 3;
  p.tiles.resize(tiles);
  for (std::uint32_t i = 0; i < tiles; ++i) p.tiles[i].tile = i;

  std::vector<PackageStream> weights(layers);
  PackageStream x{"x", StreamKind::input, 2, width, {}};
  for (std::uint32_t l = 0; l < layers; ++l)
    weights[l] = {"w" + std::to_string(l), StreamKind::weight, width, width, {}};
  // Per tile: x band [2 x rows], then per layer w band [rows x 4096], then a partial
  // [2 x 4096] and an exchange buffer.
  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    const std::uint32_t row_begin = tile * width / tiles, rows = (tile + 1) * width / tiles - row_begin;
    TileImage& image = p.tiles[tile];
    std::uint32_t at = 0;
    const std::uint32_t x_address = at;
    at += 2 * rows * 4;
    x.slices.push_back({tile, x_address, 0, 2, row_begin, rows});
    std::vector<std::uint32_t> w_address(layers);
    for (std::uint32_t l = 0; l < layers; ++l) {
      w_address[l] = at;
      weights[l].slices.push_back({tile, at, row_begin, rows, 0, width});
      at += rows * width * 4;
    }
    const std::uint32_t partial = at;
    at += 2 * width * 4;
    const std::uint32_t exchange_in = at;
    at += rounds * words * 4;
    image.buffers = {{0, at}};
    image.supersteps.resize(layers);
    for (std::uint32_t l = 0; l < layers; ++l) {
      TileSuperstep& step = image.supersteps[l];
      step.compute = {{Codelet::matmul, {x_address, w_address[l], partial}, {2, rows, width, 0}},
                      {Codelet::relu, {partial}, {2 * width}}};
      // Round r: send to tile + r, receive from tile - r; rounds spaced so the longest
      // latency plus the switch cost fit between them.
      const std::uint64_t spacing = words + 40;
      for (std::uint32_t r = 1; r <= rounds; ++r) {
        const std::uint32_t from = (tile + tiles - r) % tiles;
        step.sends.push_back({r * spacing, partial + (r % 8) * 4, words});
        step.receives.push_back({r * spacing + t.latency(from, tile), from, exchange_in + (r - 1) * words * 4, words});
      }
    }
  }
  p.superstep_labels = {"layer0", "layer1", "layer2"};
  p.streams = {x, weights[0], weights[1], weights[2]};
  for (std::uint32_t l = 0; l < layers; ++l)
    p.streams.push_back({"b" + std::to_string(l), StreamKind::weight, 1, width, {{0, 0, 0, 1, 0, width}}});
  p.streams.push_back({"y2", StreamKind::output, 2, width, {{0, 0, 0, 2, 0, width}}});
  return p;
}

}  // namespace

TEST_CASE("sim device runs an mlp-b2-n3-sized package in seconds", "[.][perf]") {
  auto start = std::chrono::steady_clock::now();
  const Package package = synthetic_package(70, 100);  // 103k transfers, 10M words per phase
  const double build = seconds_since(start);

  start = std::chrono::steady_clock::now();
  HostTensors values = initial_host_tensors(package.graph, TensorKind::weight);
  values.merge(initial_host_tensors(package.graph, TensorKind::input));
  const double host_values = seconds_since(start);

  SimDevice device;
  device.attach();
  start = std::chrono::steady_clock::now();
  device.load(package);
  const double load = seconds_since(start);
  start = std::chrono::steady_clock::now();
  device.initialize(values);
  const double initialize = seconds_since(start);
  start = std::chrono::steady_clock::now();
  (void)device.run(values);
  const double run = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const ReferenceValues reference = execute_reference(package.graph, values);
  const double reference_seconds = seconds_since(start);

  const ExecutionProfile& profile = device.profile();
  std::uint64_t words = 0;
  for (const auto& step : profile.supersteps) words += step.words_received;
  WARN("build " << build << " s, host values " << host_values << " s, load " << load << " s, initialize " << initialize
                << " s, run " << run << " s, reference " << reference_seconds << " s; cycles " << profile.cycles.total()
                << " (compute " << profile.cycles.compute << ", exchange " << profile.cycles.exchange
                << "), words exchanged " << words << ", memory " << device.allocated_bytes() / (1 << 20) << " MiB");
  CHECK(words == 3ull * 1472 * 70 * 100);
  // The times are shown, not checked (a busy machine stretches them): bench-simulator has the figures.
}
