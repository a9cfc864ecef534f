// Model YAML: the shipped models load; mistakes are reported at their place.
#include <catch2/catch.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::TempDir;
using tessera::testing::source_path;

TEST_CASE("model mlp-b2-n3 has three dense layers of 4096", "[model]") {
  Graph g = load_model(source_path("configs/models/mlp-b2-n3.yaml"));
  CHECK(g.name == "mlp-b2-n3");
  CHECK(g.ops.size() == 9);
  REQUIRE(g.outputs.size() == 1);
  CHECK(g.tensors[g.outputs[0]].shape == std::vector<std::int64_t>{2, 4096});
  CHECK(g.tensors[g.find_tensor("w2")].shape == std::vector<std::int64_t>{4096, 4096});
}

TEST_CASE("model initial values are deterministic and bounded", "[model]") {
  Graph g = load_model(source_path("configs/models/mlp-small.yaml"));
  const Tensor& w = g.tensors[g.find_tensor("w0")];
  float first = initial_value(g, w, 0);
  CHECK(first == initial_value(g, w, 0));
  CHECK(first != initial_value(g, w, 1));
  double sum = 0;
  for (std::uint64_t i = 0; i < 6144; ++i) {
    float v = initial_value(g, w, i);
    REQUIRE(std::abs(v) <= w.init_scale);
    sum += v;
  }
  CHECK(std::abs(sum / 6144) < 0.01);  // centred
  Graph other = g;
  other.seed += 1;
  CHECK(initial_value(other, w, 0) != first);
}

static std::string model_with_ops(const std::string& ops) {
  return "model: m\nseed: 1\ntensors:\n"
         "  - {name: x, shape: [2, 8], kind: input}\n"
         "  - {name: w, shape: [8, 4], kind: weight}\n"
         "  - {name: b, shape: [4], kind: weight}\n"
         "ops:\n" + ops + "outputs: [y]\n";
}

TEST_CASE("model shape mismatches name the op's line", "[model]") {
  TempDir dir;
  auto file = dir.write("m.yaml", model_with_ops("  - {op: matmul, inputs: [w, x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains(file + ":8:5") && Catch::Contains("inner dimensions differ"));
}

TEST_CASE("model unknown names suggest the nearest", "[model]") {
  TempDir dir;
  auto file = dir.write("m.yaml", model_with_ops("  - {op: matmull, inputs: [x, w], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("unknown op 'matmull'; did you mean 'matmul'?"));
  file = dir.write("n.yaml", model_with_ops("  - {op: matmul, inputs: [x, ww], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains(":8:30") && Catch::Contains("did you mean 'w'?"));
  file = dir.write("o.yaml", model_with_ops("  - {op: matmul, inputs: [x, w], output: x}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("defined twice"));
}

TEST_CASE("model rejects empty and huge models", "[model]") {
  TempDir dir;
  auto empty = dir.write("empty.yaml", "");
  CHECK_THROWS_WITH(load_model(empty), Catch::Contains("file is empty"));
  auto no_ops = dir.write("noops.yaml", "model: m\ntensors:\n  - {name: x, shape: [2], kind: input}\nops: []\noutputs: [x]\n");
  CHECK_THROWS_WITH(load_model(no_ops), Catch::Contains("'ops' must be a non-empty list"));
  auto huge = dir.write("huge.yaml", "model: m\ntensors:\n  - {name: x, shape: [16000000, 16000000], kind: input}\n"
                                      "ops: [{op: relu, inputs: [x], output: y}]\noutputs: [y]\n");
  CHECK_THROWS_WITH(load_model(huge), Catch::Contains("elements; the limit is"));
}
