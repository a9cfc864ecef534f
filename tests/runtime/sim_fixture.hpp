// A hand-built 4-tile package for runtime tests: a matmul split over two tiles, a
// partial-sum exchange and reduce, bias+ReLU, and a multicast of the result to two tiles.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/graph.hpp"
#include "tessera/package.hpp"
#include "tessera/target.hpp"

namespace tessera::testing {

/// 4 tiles in 2 columns: latency 6 within a column, 7 across; switch cost 1; multicast.
inline Target four_tile_target() {
  Target t;
  t.name = "test-4";
  t.tiles = 4;
  t.tiles_per_column = 2;
  t.memory_bytes = 4096;
  t.memory_element_bytes = 1024;
  t.interleaved_start = 2048;
  t.alignment = 8;
  t.worker_threads = 6;
  t.fp32_macs_per_cycle = 16;
  t.exchange_base_latency = 6;
  t.exchange_latency_per_column = 1.0;
  t.switch_cost = 1;
  t.multicast = true;
  t.sync_cycles = 90;
  t.exchange_phase_overhead = 100;
  return t;
}

inline Tensor make_tensor(const std::string& name, std::vector<std::int64_t> shape, TensorKind kind,
                          double scale = 1.0) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.kind = kind;
  t.init_scale = scale;
  return t;
}

/// y = relu(x[2,8] * w[8,4] + b[4]), as a model file would give it.
inline Graph small_mlp_graph() {
  Graph g;
  g.name = "small-mlp";
  g.source_file = "small-mlp.yaml";
  g.seed = 11;
  g.tensors = {make_tensor("x", {2, 8}, TensorKind::input, 1.0),   make_tensor("w", {8, 4}, TensorKind::weight, 0.5),
               make_tensor("b", {4}, TensorKind::weight, 0.1),     make_tensor("h", {2, 4}, TensorKind::intermediate),
               make_tensor("a", {2, 4}, TensorKind::intermediate), make_tensor("y", {2, 4}, TensorKind::intermediate)};
  Op matmul;
  matmul.kind = OpKind::matmul;
  matmul.inputs = {0, 1};
  matmul.output = 3;
  Op add;
  add.kind = OpKind::add;
  add.inputs = {3, 2};
  add.output = 4;
  Op relu;
  relu.kind = OpKind::relu;
  relu.inputs = {4};
  relu.output = 5;
  g.ops = {matmul, add, relu};
  g.outputs = {5};
  return g;
}

inline TileCodeletCall call(Codelet codelet, std::vector<std::uint32_t> addresses, std::vector<std::uint32_t> params) {
  return TileCodeletCall{codelet, std::move(addresses), std::move(params)};
}

// Byte addresses of the layout below.
namespace layout {
// tile 0: x[:, 0:4], w[0:4, :], partial sums (part 0 computed here, part 1 received), h/y, b
inline constexpr std::uint32_t x0 = 0, w0 = 32, partials = 96, partial1 = 128, y = 160, b = 192;
// tile 1: x[:, 4:8], w[4:8, :], its partial sum
inline constexpr std::uint32_t x1 = 0, w1 = 32, p1 = 96;
// tile 2: y row 0 (received); tile 3: all of y (received), row 1 at byte 16
inline constexpr std::uint32_t y_row0 = 0, y_all = 0, y_row1 = 16;
}  // namespace layout

/// Superstep 0: both tiles multiply their halves; tile 1 sends its 8-word partial to
/// tile 0 (cycle 0, arriving at 6). Superstep 1: tile 0 reduces and applies bias+ReLU,
/// then sends y (8 words from cycle 0); tile 2 listens to the first 4 words (arrivals
/// 7..10), tile 3 to all 8 (arrivals 7..14: the first 4 are multicast); tile 1 sends 2
/// words nobody receives.
inline Package small_mlp_package() {
  using namespace layout;
  Package p;
  p.compiler_version = "test";
  p.target = four_tile_target();
  p.target_hash = p.target.hash();
  p.superstep_labels = {"matmul", "reduce-bias-relu"};
  p.graph = small_mlp_graph();
  p.tiles.resize(4);
  for (std::uint32_t i = 0; i < 4; ++i) {
    p.tiles[i].tile = i;
    p.tiles[i].supersteps.resize(2);
  }
  TileImage& t0 = p.tiles[0];
  t0.buffers = {{x0, 32}, {w0, 64}, {partials, 64}, {y, 32}, {b, 16}};
  t0.supersteps[0].compute = {call(Codelet::matmul, {x0, w0, partials}, {2, 4, 4, 0})};
  t0.supersteps[0].receives = {{6, 1, partial1, 8}};
  t0.supersteps[1].compute = {call(Codelet::reduce_add, {partials, y}, {2, 8}),
                              call(Codelet::bias_add, {y, b}, {2, 4, 1})};
  t0.supersteps[1].sends = {{0, y, 8}};

  TileImage& t1 = p.tiles[1];
  t1.buffers = {{x1, 32}, {w1, 64}, {p1, 32}};
  t1.supersteps[0].compute = {call(Codelet::matmul, {x1, w1, p1}, {2, 4, 4, 0})};
  t1.supersteps[0].sends = {{0, p1, 8}};
  t1.supersteps[1].sends = {{0, x1, 2}};

  TileImage& t2 = p.tiles[2];
  t2.buffers = {{y_row0, 16}};
  t2.supersteps[1].receives = {{7, 0, y_row0, 4}};

  TileImage& t3 = p.tiles[3];
  t3.buffers = {{y_all, 32}};
  t3.supersteps[1].receives = {{7, 0, y_all, 8}};

  PackageStream x_stream{"x", StreamKind::input, 2, 8, {}};
  x_stream.slices = {{0, x0, 0, 2, 0, 4}, {1, x1, 0, 2, 4, 4}};
  PackageStream w_stream{"w", StreamKind::weight, 8, 4, {}};
  w_stream.slices = {{0, w0, 0, 4, 0, 4}, {1, w1, 4, 4, 0, 4}};
  PackageStream b_stream{"b", StreamKind::weight, 1, 4, {}};
  b_stream.slices = {{0, b, 0, 1, 0, 4}};
  // A replica on tile 0 first; the received copies on tiles 2 and 3 are read last.
  PackageStream y_stream{"y", StreamKind::output, 2, 4, {}};
  y_stream.slices = {{0, y, 0, 2, 0, 4}, {2, y_row0, 0, 1, 0, 4}, {3, y_row1, 1, 1, 0, 4}};
  p.streams = {x_stream, w_stream, b_stream, y_stream};
  return p;
}

}  // namespace tessera::testing
