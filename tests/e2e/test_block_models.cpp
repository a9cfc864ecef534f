// End-to-end: the transformer block's ops (layer_norm, softmax, products of activations, residual adds) and float16
// weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/device.hpp"
#include "tessera/runtime/host_exchange.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/runtime/run.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

Package compile_small(TempDir& dir, const std::string& model) {
  const std::string package_file = (dir.path() / (model + ".tpkg")).string();
  auto compiled = run_command({tessera_binary(), "compile", source_path("configs/models/" + model + ".yaml"), "-p",
                               pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "{finalists: 2}",
                                             "{finalists: 2, row_groups: 1}"),
                               "-o", package_file});
  INFO(compiled.err.substr(compiled.err.size() > 4000 ? compiled.err.size() - 4000 : 0));
  REQUIRE(compiled.exit_code == 0);
  return read_package(package_file);
}

/// Compiles the model file `model` with the small pipeline; its log (stderr, -v) goes to `log`.
Package compile_file(TempDir& dir, const std::string& model, std::string* log = nullptr) {
  const std::string package_file = (dir.path() / "model.tpkg").string();
  auto compiled = run_command({tessera_binary(), "compile", model, "-p", source_path("configs/pipelines/small.yaml"),
                               "-o", package_file, "-v"});
  INFO(compiled.err.substr(compiled.err.size() > 4000 ? compiled.err.size() - 4000 : 0));
  REQUIRE(compiled.exit_code == 0);
  if (log) *log = compiled.err;
  return read_package(package_file);
}

runtime::RunResult run_on_simulator(TempDir& dir, const Package& package) {
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "lock").string();
  return runtime::run_package(package, options);
}

}  // namespace

TEST_CASE("transformer-small runs on t16 and matches the float64 reference", "[e2e][transformer]") {
  TempDir dir;
  const Package package = compile_small(dir, "transformer-small");
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 16 * 32);
  // float32 throughout: far inside the float32 tolerance.
  CHECK(result.numerics.max_abs_error < 1e-4);
  CHECK(result.numerics.max_abs_reference > 0.5);
}

TEST_CASE("float16 weights pass within the float16 tolerance and a corrupted half fails", "[e2e][float16]") {
  TempDir dir;
  const Package package = compile_small(dir, "mlp-small-f16");
  // Weight streams carry halves: half the bytes of float32.
  bool half_stream = false;
  for (const PackageStream& stream : package.streams)
    if (stream.tensor == "w1") half_stream = stream.dtype == DType::float16;
  CHECK(half_stream);

  runtime::RunOptions options;
  options.lock_path = (dir.path() / "lock").string();
  const runtime::RunResult clean = runtime::run_package(package, options);
  REQUIRE(clean.passed());
  // Two float16 matmuls: rtol gains 8 * 2^-11 * sqrt(2).
  CHECK(runtime::float16_relative_tolerance(package.graph) == Approx(8 * std::ldexp(1.0, -11) * std::sqrt(2.0)));
  CHECK(clean.numerics.max_abs_error > 1e-6);  // activations really are rounded to half

  // Double one large weight of the last layer on the device (its lowest exponent bit), on
  // the row of the largest hidden activation, while the reference keeps the stored value.
  runtime::HostTensors values = runtime::initial_host_tensors(package.graph, TensorKind::weight);
  values.merge(runtime::initial_host_tensors(package.graph, TensorKind::input));
  const runtime::ReferenceValues reference = runtime::execute_reference(package.graph, values);
  const std::vector<double>& hidden = reference.at("y0");
  const auto row = static_cast<std::size_t>(std::max_element(hidden.begin(), hidden.begin() + 64) - hidden.begin());
  std::vector<float> corrupted = values.at("w1");
  auto first = corrupted.begin() + static_cast<std::ptrdiff_t>(row * 64);
  auto largest = std::max_element(first, first + 64, [](float a, float b) { return std::fabs(a) < std::fabs(b); });
  *largest = half_to_float(static_cast<std::uint16_t>(float_to_half(*largest) ^ 0x0400u));
  runtime::HostTensors device_values = values;
  device_values["w1"] = corrupted;

  auto device = runtime::open_device("sim");
  device->attach();
  device->load(package);
  device->initialize(device_values);
  const runtime::HostTensors outputs = device->run(device_values);
  const runtime::NumericalReport report = runtime::compare_with_reference(package.graph, outputs, reference);
  CHECK_FALSE(report.passed);
  CHECK(report.max_abs_error > report.tolerance);
}

TEST_CASE("products gather one-column pieces transposed, whole columns a copy, and stay exact", "[e2e][transformer]") {
  TempDir dir;
  // Depth-heavy projections of 6 rows to 16 columns come out one column per tile on t16 (one
  // row group pinned: row groups would make them 2-D blocks; fewer rows than depth groups:
  // the reduce-scatter splits columns), so both products gather their second operand column
  // by column (q k^T then runs as a plain matmul, s v as matmul_transposed).
  const std::string model = dir.write("narrow.yaml",
                                      "model: narrow-products\nseed: 9\ntensors:\n"
                                      "  - {name: x, shape: [6, 128], kind: input}\n"
                                      "  - {name: wq, shape: [128, 16], kind: weight, scale: 0.25}\n"
                                      "  - {name: wk, shape: [128, 16], kind: weight, scale: 0.25}\n"
                                      "  - {name: wv, shape: [128, 16], kind: weight, scale: 0.25}\n"
                                      "ops:\n"
                                      "  - {op: matmul, inputs: [x, wq], output: q}\n"
                                      "  - {op: matmul, inputs: [x, wk], output: k}\n"
                                      "  - {op: matmul, inputs: [x, wv], output: v}\n"
                                      "  - {op: matmul, inputs: [q, k], output: s, transpose_b: true}\n"
                                      "  - {op: matmul, inputs: [s, v], output: c}\n"
                                      "outputs: [c]\n");
  const std::string package_file = (dir.path() / "narrow.tpkg").string();
  auto compiled = run_command({tessera_binary(), "compile", model, "-p",
                               pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "{finalists: 2}",
                                             "{finalists: 2, row_groups: 1}"),
                               "-o", package_file, "-v"});
  INFO(compiled.err.substr(compiled.err.size() > 4000 ? compiled.err.size() - 4000 : 0));
  REQUIRE(compiled.exit_code == 0);
  const std::string log = compiled.out + compiled.err;
  for (const char* op : {"op=3 kind=matmul", "op=4 kind=matmul"}) {
    const std::size_t line = log.find(std::string("selected block plan ") + op);
    REQUIRE(line != std::string::npos);
    const std::size_t field = log.find("transposed_gathers=", line);
    REQUIRE(field != std::string::npos);
    INFO(op);
    CHECK(std::stoul(log.substr(field + 19)) > 0);
  }
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "lock").string();
  const runtime::RunResult result = runtime::run_package(read_package(package_file), options);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 6 * 16);
  CHECK(result.numerics.max_abs_error < 1e-3);
}

TEST_CASE("a float16 bias survives a split reduction (reduce_add + bias_add_half)", "[e2e][float16]") {
  // A pinned depth split makes every layer reduce partial sums; the fused reduce_bias reads
  // float32 biases only, so half biases must take the unfused epilogue.
  TempDir dir;
  const std::string package_file = (dir.path() / "split.tpkg").string();
  const std::string pipeline = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "{finalists: 2}",
                                             "{finalists: 2, depth_groups: 4}");
  const auto compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small-f16.yaml"),
                                     "-p", pipeline, "-o", package_file});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  const Package package = read_package(package_file);
  bool unfused = false;
  for (const TileImage& tile : package.tiles)
    for (const TileSuperstep& step : tile.supersteps)
      for (const TileCodeletCall& call : step.compute) unfused |= call.codelet == Codelet::bias_add_half;
  CHECK(unfused);
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "lock").string();
  CHECK(runtime::run_package(package, options).passed());
}

TEST_CASE("a column of one value a row applies to every row: a layer norm spelled out passes", "[e2e][column]") {
  TempDir dir;
  // ONNX spells a layer norm as ReduceMean, Sub, Pow, ReduceMean, Sqrt, Div: the means are
  // columns [rows, 1] the next op broadcasts over each row. Here they are gathered into the
  // pieces of h (sub, div), come from the host beside them (add, mul of the weight c), and
  // meet a graph input the host writes in row groups (sub of x and c).
  const std::string model = dir.write("column.yaml",
                                      "model: column\nseed: 4\ntensors:\n"
                                      "  - {name: x, shape: [6, 40], kind: input}\n"
                                      "  - {name: w, shape: [40, 24], kind: weight, scale: 0.2}\n"
                                      "  - {name: c, shape: [6, 1], kind: weight}\n"
                                      "ops:\n"
                                      "  - {op: sub, inputs: [x, c], output: xc}\n"
                                      "  - {op: matmul, inputs: [xc, w], output: h}\n"
                                      "  - {op: reduce_mean, inputs: [h], output: m}\n"
                                      "  - {op: sub, inputs: [h, m], output: d}\n"
                                      "  - {op: mul, inputs: [d, d], output: s}\n"
                                      "  - {op: reduce_mean, inputs: [s], output: v}\n"
                                      "  - {op: sqrt, inputs: [v], output: sd}\n"
                                      "  - {op: div, inputs: [d, sd], output: y}\n"
                                      "  - {op: add, inputs: [y, c], output: z}\n"
                                      "  - {op: mul, inputs: [z, c], output: o}\n"
                                      "outputs: [o]\n");
  const Package package = compile_file(dir, model);
  std::size_t columns = 0;
  for (const TileImage& image : package.tiles)
    for (const TileSuperstep& step : image.supersteps)
      for (const TileCodeletCall& call : step.compute) columns += call.codelet == Codelet::binary_column;
  CHECK(columns > 0);
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 6 * 24);
  CHECK(result.numerics.max_abs_error < 1e-4);
  // Each row of y is normalised: c scales and shifts it, so the outputs are not all small.
  CHECK(result.numerics.max_abs_reference > 0.5);
}

TEST_CASE("a transpose re-lays a computed tensor and a graph input out through the exchange", "[e2e][transpose]") {
  TempDir dir;
  const std::string model = dir.write("transpose.yaml",
                                      "model: transposes\nseed: 6\ntensors:\n"
                                      "  - {name: x, shape: [6, 40], kind: input}\n"
                                      "  - {name: w, shape: [40, 24], kind: weight, scale: 0.2}\n"
                                      "  - {name: v, shape: [6, 8], kind: weight, scale: 0.4}\n"
                                      "ops:\n"
                                      "  - {op: matmul, inputs: [x, w], output: h}\n"
                                      "  - {op: transpose, inputs: [h], output: t}\n"
                                      "  - {op: matmul, inputs: [t, v], output: y}\n"
                                      "  - {op: transpose, inputs: [x], output: xt}\n"
                                      "  - {op: relu, inputs: [xt], output: r}\n"
                                      "outputs: [y, r]\n");
  std::string log;
  const Package package = compile_file(dir, model, &log);
  // h's transpose moves words between tiles (copies); x's arrives from the host transposed.
  CHECK_THAT(log, Catch::Contains("selected block plan op=1 kind=transpose") &&
                      Catch::Contains("selected block plan op=3 kind=transpose"));
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 24 * 8 + 40 * 6);
  CHECK(result.numerics.max_abs_error < 1e-4);
}

TEST_CASE("attention's re-layouts: column slices, heads split and merged, batched transposes", "[e2e][heads]") {
  TempDir dir;
  // Two batch items of 6 tokens, 3 heads of 16: q and k sliced from one packed projection,
  // split into heads, k transposed per head, and the per-head products merged back.
  const std::string model = dir.write("heads.yaml",
                                      "model: heads\nseed: 9\ntensors:\n"
                                      "  - {name: x, shape: [12, 48], kind: input}\n"
                                      "  - {name: w, shape: [48, 96], kind: weight, scale: 0.2}\n"
                                      "ops:\n"
                                      "  - {op: matmul, inputs: [x, w], output: h}\n"
                                      "  - {op: slice_columns, inputs: [h], output: q, columns: 48}\n"
                                      "  - {op: slice_columns, inputs: [h], output: k, column_begin: 48, columns: 48}\n"
                                      "  - {op: split_heads, inputs: [q], output: qs, batch: 2, heads: 3}\n"
                                      "  - {op: split_heads, inputs: [k], output: ks, batch: 2, heads: 3}\n"
                                      "  - {op: transpose, inputs: [ks], output: kt, batch: 6}\n"
                                      "  - {op: matmul, inputs: [qs, kt], output: s, batch: 6}\n"
                                      "  - {op: softmax, inputs: [s], output: p}\n"
                                      "  - {op: matmul, inputs: [p, qs], output: c, batch: 6}\n"
                                      "  - {op: merge_heads, inputs: [c], output: m, batch: 2, heads: 3}\n"
                                      "  - {op: split_heads, inputs: [x], output: xs, batch: 2, heads: 3}\n"
                                      "  - {op: relu, inputs: [xs], output: r}\n"
                                      "outputs: [m, r]\n");
  std::string log;
  const Package package = compile_file(dir, model, &log);
  for (const char* kind : {"slice_columns", "split_heads", "transpose", "merge_heads"})
    CHECK_THAT(log, Catch::Contains(std::string("kind=") + kind));
  REQUIRE(package.graph.ops.size() == 12);
  CHECK(package.graph.tensors[package.graph.ops[5].output].shape == std::vector<std::int64_t>{6 * 16, 6});
  CHECK(package.graph.tensors[package.graph.ops[9].output].shape == std::vector<std::int64_t>{12, 48});
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 12 * 48 * 2);
  CHECK(result.numerics.max_abs_error < 1e-4);
  CHECK(result.numerics.max_abs_reference > 0.1);
}

TEST_CASE("a batch of products of activations, each a row block, runs as one matmul op", "[e2e][batch]") {
  TempDir dir;
  // Two heads' attention stacked by rows (q, k, v [2 x 4, 8]): s = q k^T and c = p v per head,
  // and a batch with a weight (each product its own 16 rows of w2).
  const std::string model = dir.write("batched.yaml",
                                      "model: batched\nseed: 8\ntensors:\n"
                                      "  - {name: x, shape: [8, 16], kind: input}\n"
                                      "  - {name: wq, shape: [16, 8], kind: weight, scale: 0.3}\n"
                                      "  - {name: wk, shape: [16, 8], kind: weight, scale: 0.3}\n"
                                      "  - {name: wv, shape: [16, 8], kind: weight, scale: 0.3}\n"
                                      "  - {name: w2, shape: [32, 8], kind: weight, scale: 0.3}\n"
                                      "ops:\n"
                                      "  - {op: matmul, inputs: [x, wq], output: q}\n"
                                      "  - {op: matmul, inputs: [x, wk], output: k}\n"
                                      "  - {op: matmul, inputs: [x, wv], output: v}\n"
                                      "  - {op: matmul, inputs: [q, k], output: s, transpose_b: true, batch: 2}\n"
                                      "  - {op: softmax, inputs: [s], output: p}\n"
                                      "  - {op: matmul, inputs: [p, v], output: c, batch: 2}\n"
                                      "  - {op: matmul, inputs: [x, w2], output: xw, batch: 2}\n"
                                      "outputs: [c, xw]\n");
  const Package package = compile_file(dir, model);
  REQUIRE(package.graph.ops.size() == 7);
  CHECK(package.graph.ops[3].batch == 2);
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 8 * 8 + 8 * 8);
  CHECK(result.numerics.max_abs_error < 1e-4);

  // A batch that does not divide the rows is refused at the op, naming both operands.
  const std::string bad = dir.write("bad.yaml",
                                    "model: bad\ntensors:\n"
                                    "  - {name: x, shape: [6, 4], kind: input}\n"
                                    "  - {name: w, shape: [8, 3], kind: weight}\n"
                                    "ops:\n"
                                    "  - {op: matmul, inputs: [x, w], output: y, batch: 4}\n"
                                    "outputs: [y]\n");
  auto refused = run_command({tessera_binary(), "compile", bad, "-p", source_path("configs/pipelines/small.yaml"), "-o",
                              (dir.path() / "bad.tpkg").string()});
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("a batch of 4 needs both operands' rows in as many equal blocks: 'x' [6, 4] "
                                          "and 'w' [8, 3]"));
}

TEST_CASE("cnn-small's convolutions and pooling run on t16 and match the float64 reference", "[e2e][cnn]") {
  TempDir dir;
  std::string log;
  const Package package = compile_file(dir, source_path("configs/models/cnn-small.yaml"), &log);
  // Every conv of the model runs as conv calls (the depthwise one too), the pools as pool calls.
  std::size_t conv_calls = 0, pool_calls = 0;
  for (const auto& tile : package.tiles)
    for (const auto& step : tile.supersteps)
      for (const auto& call : step.compute) {
        conv_calls += call.codelet == Codelet::conv;
        pool_calls += call.codelet == Codelet::pool;
      }
  CHECK(conv_calls >= 3);
  CHECK(pool_calls >= 2);
  CHECK(log.find("kind=conv") != std::string::npos);
  const runtime::RunResult result = run_on_simulator(dir, package);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 2 * 10);
  CHECK(result.numerics.max_abs_error < 1e-4);
  CHECK(result.numerics.max_abs_reference > 0.1);
}

namespace {

/// An encoder of `layers` attention layers (16 tokens, width 32, 2 heads of 16): layer norm,
/// q/k/v projections, heads split, q k^T per head, softmax, times v, heads merged, output
/// projection, residual add.
std::string encoder_model(std::uint32_t layers) {
  std::string tensors = "  - {name: x, shape: [16, 32], kind: input}\n", ops;
  std::string h = "x";
  for (std::uint32_t l = 0; l < layers; ++l) {
    const std::string n = std::to_string(l);
    for (const char* w : {"wq", "wk", "wv", "wo"})
      tensors += fmt::format("  - {{name: {}{}, shape: [32, 32], kind: weight, scale: 0.2}}\n", w, n);
    tensors += fmt::format(
        "  - {{name: g{0}, shape: [32], kind: weight}}\n  - {{name: b{0}, shape: [32], kind: "
        "weight, scale: 0.1}}\n",
        n);
    ops += fmt::format(
        "  - {{op: layer_norm, inputs: [{1}, g{0}, b{0}], output: n{0}}}\n"
        "  - {{op: matmul, inputs: [n{0}, wq{0}], output: q{0}}}\n"
        "  - {{op: matmul, inputs: [n{0}, wk{0}], output: k{0}}}\n"
        "  - {{op: matmul, inputs: [n{0}, wv{0}], output: v{0}}}\n"
        "  - {{op: split_heads, inputs: [q{0}], output: qs{0}, batch: 1, heads: 2}}\n"
        "  - {{op: split_heads, inputs: [k{0}], output: ks{0}, batch: 1, heads: 2}}\n"
        "  - {{op: split_heads, inputs: [v{0}], output: vs{0}, batch: 1, heads: 2}}\n"
        "  - {{op: matmul, inputs: [qs{0}, ks{0}], output: s{0}, transpose_b: true, batch: 2}}\n"
        "  - {{op: softmax, inputs: [s{0}], output: p{0}, scale: 0.25}}\n"
        "  - {{op: matmul, inputs: [p{0}, vs{0}], output: c{0}, batch: 2}}\n"
        "  - {{op: merge_heads, inputs: [c{0}], output: m{0}, batch: 1, heads: 2}}\n"
        "  - {{op: matmul, inputs: [m{0}, wo{0}], output: o{0}}}\n"
        "  - {{op: add, inputs: [o{0}, {1}], output: h{0}}}\n",
        n, h);
    h = "h" + n;
  }
  return "model: encoder\nseed: 5\ntensors:\n" + tensors + "ops:\n" + ops + "outputs: [" + h + "]\n";
}

/// The most exchange-descriptor bytes any tile's image holds.
std::uint64_t most_descriptor_bytes(const Package& package) {
  std::uint64_t most = 0;
  for (const TileImage& image : package.tiles) most = std::max(most, tile_support_bytes(image).exchange_descriptors);
  return most;
}

}  // namespace

TEST_CASE("a deep encoder's attention spreads its exchange descriptors over the tiles", "[e2e][heads][scale]") {
  // Each layer's re-layouts and products of activations take the tiles after the previous
  // layer's, so the busiest tile of six layers holds less than four times the descriptors of
  // one layer's (measured: 816 against 296 bytes). When every layer started at tile 0 they
  // piled up there (3,588 against 528): what refused an 8-layer encoder on t1472.
  TempDir dir;
  auto compile = [&](std::uint32_t layers) {
    const std::string model = dir.write(fmt::format("encoder-{}.yaml", layers), encoder_model(layers));
    const std::string package_file = (dir.path() / fmt::format("encoder-{}.tpkg", layers)).string();
    auto compiled = run_command({tessera_binary(), "compile", model, "-p", source_path("configs/pipelines/small.yaml"),
                                 "-t", "t1472", "-o", package_file});
    INFO(compiled.err.substr(compiled.err.size() > 4000 ? compiled.err.size() - 4000 : 0));
    REQUIRE(compiled.exit_code == 0);
    return read_package(package_file);
  };
  const Package one = compile(1), six = compile(6);
  const std::uint64_t one_layer = most_descriptor_bytes(one), six_layers = most_descriptor_bytes(six);
  INFO("busiest tile's descriptor bytes: one layer " << one_layer << ", six layers " << six_layers);
  CHECK(one_layer > 0);
  CHECK(six_layers < 4 * one_layer);
  const runtime::RunResult result = run_on_simulator(dir, six);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 16 * 32);
}
