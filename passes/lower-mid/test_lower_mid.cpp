// Tests of the lower-mid pass plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "pass_bench.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::PassBench;
using tessera::testing::TempDir;

namespace {

const Tensor& named(const Graph& graph, const std::string& name) {
  const std::int64_t index = graph.find_tensor(name);
  REQUIRE(index >= 0);
  return graph.tensors[index];
}

std::string small_model(const std::string& ops, const std::string& outputs) {
  return "model: fusion\nseed: 3\ntensors:\n"
         "  - {name: x, shape: [2, 8], kind: input}\n"
         "  - {name: w, shape: [8, 4], kind: weight}\n"
         "  - {name: b, shape: [4], kind: weight}\n"
         "ops:\n" +
         ops + "outputs: " + outputs + "\n";
}

}  // namespace

TEST_CASE("lower-mid fuses mlp-small into two dense ops with bias and relu", "[lower-mid]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  const Graph& graph = bench.state.graph;
  REQUIRE(graph.ops.size() == 2);
  const char* layers[2][4] = {{"x", "w0", "b0", "y0"}, {"y0", "w1", "b1", "y1"}};
  for (int i = 0; i < 2; ++i) {
    const Op& op = graph.ops[i];
    CHECK(op.kind == OpKind::dense);
    CHECK(op.relu);
    REQUIRE(op.inputs.size() == 3);
    for (int j = 0; j < 3; ++j) CHECK(graph.tensors[op.inputs[j]].name == layers[i][j]);
    CHECK(graph.tensors[op.output].name == layers[i][3]);
  }
  CHECK(named(graph, "y1").shape == std::vector<std::int64_t>{2, 32});
  // The fused-away intermediates are gone; the model itself is untouched.
  CHECK(graph.find_tensor("h0") < 0);
  CHECK(graph.find_tensor("a1") < 0);
  CHECK(bench.state.model.ops.size() == 6);
  CHECK(bench.state.facts.count(facts::canonical) == 1);
  const auto lines = bench.log_lines("lowered graph");
  REQUIRE(lines.size() == 1);
  CHECK(tessera::testing::log_field(lines[0], "operations_before") == 6);
  CHECK(tessera::testing::log_field(lines[0], "operations_after") == 2);
}

TEST_CASE("lower-mid reports a shape mismatch with the model file, place and both shapes", "[lower-mid]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  // A graph another pass left inconsistent: w1 no longer matches y0's columns.
  bench.state.graph = bench.state.model;
  Graph& graph = bench.state.graph;
  graph.tensors[graph.find_tensor("w1")].shape = {95, 32};
  const Status status = bench.run("lower-mid");
  REQUIRE_FALSE(status.ok);
  const Op& second_matmul = graph.ops[3];
  CHECK_THAT(status.message, Catch::Contains(fmt::format("mlp-small.yaml:{}:{}", second_matmul.place.line,
                                                         second_matmul.place.column)));
  CHECK_THAT(status.message, Catch::Contains("[2, 96]"));
  CHECK_THAT(status.message, Catch::Contains("[95, 32]"));
}

TEST_CASE("lower-mid reports an output whose recorded shape disagrees with its inputs", "[lower-mid]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.graph = bench.state.model;
  bench.state.graph.tensors[bench.state.graph.find_tensor("a0")].shape = {2, 95};
  const Status status = bench.run("lower-mid");
  REQUIRE_FALSE(status.ok);
  CHECK_THAT(status.message, Catch::Contains("mlp-small.yaml:"));
  CHECK_THAT(status.message, Catch::Contains("'a0' has shape [2, 95] but its inputs give [2, 96]"));
}

TEST_CASE("lower-mid removes dead ops before fusing", "[lower-mid]") {
  TempDir dir;
  // relu(h) -> dead reads h but reaches no output: once removed, h has one reader and fuses.
  const std::string model = dir.write("m.yaml", small_model("  - {op: matmul, inputs: [x, w], output: h}\n"
                                                            "  - {op: relu, inputs: [h], output: dead}\n"
                                                            "  - {op: add, inputs: [h, b], output: a}\n"
                                                            "  - {op: relu, inputs: [a], output: y}\n",
                                                            "[y]"));
  PassBench bench(model, config_path("targets/t16.yaml"));
  REQUIRE(bench.run("lower-mid").ok);
  const Graph& graph = bench.state.graph;
  REQUIRE(graph.ops.size() == 1);
  CHECK(graph.ops[0].kind == OpKind::dense);
  CHECK(graph.ops[0].inputs.size() == 3);
  CHECK(graph.ops[0].relu);
  CHECK(graph.tensors[graph.ops[0].output].name == "y");
  CHECK(graph.find_tensor("dead") < 0);
  CHECK(tessera::testing::log_field(bench.log_lines("lowered graph").at(0), "dead_ops_removed") == 1);
}

TEST_CASE("lower-mid does not fuse a value that has other readers or is an output", "[lower-mid]") {
  TempDir dir;
  SECTION("a second reader of the matmul result") {
    const std::string model = dir.write("m.yaml", small_model("  - {op: matmul, inputs: [x, w], output: h}\n"
                                                              "  - {op: relu, inputs: [h], output: y}\n"
                                                              "  - {op: add, inputs: [h, b], output: z}\n",
                                                              "[y, z]"));
    PassBench bench(model, config_path("targets/t16.yaml"));
    REQUIRE(bench.run("lower-mid").ok);
    const Graph& graph = bench.state.graph;
    REQUIRE(graph.ops.size() == 3);
    CHECK(graph.ops[0].kind == OpKind::dense);  // a matmul is a dense op without epilogue
    CHECK(graph.ops[0].inputs.size() == 2);
    CHECK_FALSE(graph.ops[0].relu);
    CHECK(graph.ops[1].kind == OpKind::relu);
    CHECK(graph.ops[2].kind == OpKind::add);
  }
  SECTION("the biased value is a graph output") {
    const std::string model = dir.write("m.yaml", small_model("  - {op: matmul, inputs: [x, w], output: h}\n"
                                                              "  - {op: add, inputs: [h, b], output: a}\n"
                                                              "  - {op: relu, inputs: [a], output: y}\n",
                                                              "[a, y]"));
    PassBench bench(model, config_path("targets/t16.yaml"));
    REQUIRE(bench.run("lower-mid").ok);
    const Graph& graph = bench.state.graph;
    REQUIRE(graph.ops.size() == 2);
    CHECK(graph.ops[0].kind == OpKind::dense);
    CHECK(graph.ops[0].inputs.size() == 3);  // matmul + bias fused: h had one reader
    CHECK_FALSE(graph.ops[0].relu);          // a is an output, so relu stays separate
    CHECK(graph.tensors[graph.ops[0].output].name == "a");
    CHECK(graph.ops[1].kind == OpKind::relu);
  }
  SECTION("an add of a full matrix is not a bias") {
    const std::string model = dir.write("m.yaml",
                                        "model: m\nseed: 1\ntensors:\n"
                                        "  - {name: x, shape: [2, 8], kind: input}\n"
                                        "  - {name: w, shape: [8, 4], kind: weight}\n"
                                        "  - {name: c, shape: [2, 4], kind: weight}\n"
                                        "ops:\n"
                                        "  - {op: matmul, inputs: [x, w], output: h}\n"
                                        "  - {op: add, inputs: [h, c], output: a}\n"
                                        "  - {op: relu, inputs: [a], output: y}\n"
                                        "outputs: [y]\n");
    PassBench bench(model, config_path("targets/t16.yaml"));
    REQUIRE(bench.run("lower-mid").ok);
    const Graph& graph = bench.state.graph;
    REQUIRE(graph.ops.size() == 3);
    CHECK(graph.ops[0].inputs.size() == 2);
    CHECK(graph.ops[1].kind == OpKind::add);
  }
}

TEST_CASE("lower-mid runs a large global pool in two stages, rows then the column, and the numbers hold",
          "[lower-mid][pool]") {
  TempDir dir;
  // 2 images of 6x7 pixels, 5 channels: an average and a max global pool.
  const std::string model =
      dir.write("pools.yaml",
                "model: pools\nseed: 5\ntensors:\n"
                "  - {name: x, shape: [84, 5], kind: input}\n"
                "ops:\n"
                "  - {op: avg_pool, inputs: [x], output: mean, batch: 2, field: [6, 7], kernel: [6, 7]}\n"
                "  - {op: max_pool, inputs: [x], output: top, batch: 2, field: [6, 7], kernel: [6, 7]}\n"
                "outputs: [mean, top]\n");
  for (const std::int64_t threshold : {std::int64_t{0}, std::int64_t{42}}) {
    INFO("two_stage_pool_pixels " << threshold);
    PassBench bench(model, config_path("targets/t16.yaml"));
    Options options;
    options.values["two_stage_pool_pixels"] = threshold;
    REQUIRE(bench.run_through("emit-tile-code", {{"lower-mid", options}}).ok);
    const Graph& graph = bench.state.graph;
    const bool split = threshold < 42;  // 42 pixels: split only when the field has more
    REQUIRE(graph.ops.size() == (split ? 4u : 2u));
    if (split) {
      for (std::size_t i : {0u, 2u}) {
        const Op &by_row = graph.ops[i], &by_column = graph.ops[i + 1];
        CHECK(by_row.kind == by_column.kind);
        CHECK(by_row.window.kernel_h == 1);
        CHECK(by_row.window.kernel_w == 7);
        CHECK(by_row.window.stride_w == 7);
        CHECK(graph.tensors[by_row.output].shape == std::vector<std::int64_t>{12, 5});
        CHECK(by_column.inputs == std::vector<std::uint32_t>{by_row.output});
        CHECK(by_column.window.kernel_h == 6);
        CHECK(by_column.window.width == 1);
      }
      CHECK(named(graph, "mean").shape == std::vector<std::int64_t>{2, 5});
    }
    CHECK(tessera::testing::log_field(bench.log_lines("lowered graph").at(0), "global_pools_split") == (split ? 2 : 0));
    const runtime::NumericalReport report = bench.simulate();
    INFO("max abs error " << report.max_abs_error << " tolerance " << report.tolerance);
    CHECK(report.passed);
  }
}
