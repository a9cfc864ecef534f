// Model YAML: the shipped models load; mistakes are reported at their place.
#include <catch2/catch.hpp>
#include <cmath>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::source_path;
using tessera::testing::TempDir;

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

static std::string model_with_ops(const std::string& ops, const std::string& output = "y") {
  return "model: m\nseed: 1\ntensors:\n"
         "  - {name: x, shape: [2, 8], kind: input}\n"
         "  - {name: w, shape: [8, 4], kind: weight}\n"
         "  - {name: b, shape: [4], kind: weight}\n"
         "ops:\n" +
         ops + "outputs: [" + output + "]\n";
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
  auto no_ops =
      dir.write("noops.yaml", "model: m\ntensors:\n  - {name: x, shape: [2], kind: input}\nops: []\noutputs: [x]\n");
  CHECK_THROWS_WITH(load_model(no_ops), Catch::Contains("'ops' must be a non-empty list"));
  auto huge = dir.write("huge.yaml",
                        "model: m\ntensors:\n  - {name: x, shape: [16000000, 16000000], kind: input}\n"
                        "ops: [{op: relu, inputs: [x], output: y}]\noutputs: [y]\n");
  CHECK_THROWS_WITH(load_model(huge), Catch::Contains("elements; the limit is"));
}

TEST_CASE("model loads the transformer block and float16 MLP", "[model]") {
  Graph block = load_model(source_path("configs/models/transformer-block.yaml"));
  const Op& scores = block.ops[4];
  CHECK(scores.kind == OpKind::matmul);
  CHECK(scores.transpose_b);
  CHECK(block.tensors[scores.output].shape == std::vector<std::int64_t>{64, 64});
  CHECK(block.ops[5].kind == OpKind::softmax);
  CHECK(block.ops[5].scale == Approx(0.0625));
  CHECK(block.ops[0].kind == OpKind::layer_norm);
  Graph half = load_model(source_path("configs/models/mlp-b8-w2048-n4-f16.yaml"));
  CHECK(half.tensors[half.find_tensor("w3")].dtype == DType::float16);
  CHECK(half.tensors[half.find_tensor("y3")].dtype == DType::float32);  // results stay float32
}

TEST_CASE("model attribute, shape and dtype mistakes name their place", "[model]") {
  TempDir dir;
  auto file = dir.write("a.yaml", model_with_ops("  - {op: softmax, inputs: [x], output: y, eps: 0.1}\n"));
  CHECK_THROWS_WITH(load_model(file),
                    Catch::Contains(file + ":8:48") && Catch::Contains("'eps' applies to layer_norm ops only"));
  file = dir.write("b.yaml", model_with_ops("  - {op: relu, inputs: [x], output: y, transpose_b: true}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'transpose_b' applies to matmul ops only"));
  file = dir.write("c.yaml", model_with_ops("  - {op: layer_norm, inputs: [x, b, b], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains(file + ":8:5") && Catch::Contains("gamma 'b' [4] must be [8]"));
  file = dir.write("d.yaml", model_with_ops("  - {op: layer_norm, inputs: [x, x, x], output: y, eps: -1}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'eps' must be a finite positive number"));
  file = dir.write("e.yaml", model_with_ops("  - {op: softmax, inputs: [x], output: y, scale: 0}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'scale' must be a finite non-zero number"));
  file = dir.write("f.yaml", model_with_ops("  - {op: matmul, inputs: [x, w], output: y, transpose_b: true}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("inner dimensions differ") && Catch::Contains("transposed"));
  file = dir.write("g.yaml", model_with_ops("  - {op: matmul, inputs: [x, x], output: y, transpose_b: true}\n"));
  CHECK(load_model(file).tensors.back().shape == std::vector<std::int64_t>{2, 2});
  auto half_input = dir.write("h.yaml",
                              "model: m\ntensors:\n  - {name: x, shape: [2], dtype: float16, kind: input}\n"
                              "ops: [{op: relu, inputs: [x], output: y}]\noutputs: [y]\n");
  CHECK_THROWS_WITH(load_model(half_input),
                    Catch::Contains(half_input + ":3:34") && Catch::Contains("float16 inputs are not supported yet"));
  auto half_misuse = dir.write("i.yaml",
                               "model: m\ntensors:\n  - {name: x, shape: [2, 2], kind: input}\n"
                               "  - {name: w, shape: [2, 2], dtype: float16, kind: weight}\n"
                               "ops: [{op: matmul, inputs: [w, x], output: y}]\noutputs: [y]\n");
  CHECK_THROWS_WITH(load_model(half_misuse), Catch::Contains(half_misuse + ":5:29") &&
                                                 Catch::Contains("float16 tensor 'w' cannot be input 0 of matmul"));
  file = dir.write("j.yaml", model_with_ops("  - {op: sqrt, inputs: [x], output: y, exponent: 2}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'exponent' applies to pow ops only"));
  file = dir.write("k.yaml", model_with_ops("  - {op: pow, inputs: [x], output: y, exponent: 3}\n"
                                            "  - {op: reduce_mean, inputs: [y], output: z}\n",
                                            "z"));
  const Graph powered = load_model(file);
  CHECK(powered.ops[0].exponent == 3);
  CHECK(powered.tensors.back().shape == std::vector<std::int64_t>{2, 1});
  file = dir.write("l.yaml", model_with_ops("  - {op: mull, inputs: [x, x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file),
                    Catch::Contains("unknown op 'mull'; did you mean 'mul'?") &&
                        Catch::Contains("known: matmul, add, relu, dense, softmax, layer_norm, sub, mul, div"));
  // unary and reduce ops name their function; alpha belongs to unary's elu, celu and thresholded_relu.
  file = dir.write("m.yaml", model_with_ops("  - {op: unary, function: elu, alpha: 0.5, inputs: [x], output: y}\n"
                                            "  - {op: reduce, function: log_sum_exp, inputs: [y], output: z}\n",
                                            "z"));
  const Graph functions = load_model(file);
  CHECK(functions.ops[0].function == static_cast<std::uint32_t>(UnaryFunction::elu));
  CHECK(functions.ops[0].alpha == 0.5);
  CHECK(functions.ops[1].function == static_cast<std::uint32_t>(ReduceFunction::log_sum_exp));
  CHECK(functions.tensors.back().shape == std::vector<std::int64_t>{2, 1});
  file = dir.write("n.yaml", model_with_ops("  - {op: unary, function: expp, inputs: [x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("unknown unary function 'expp'; did you mean 'exp'?"));
  file = dir.write("o.yaml", model_with_ops("  - {op: unary, inputs: [x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("unary needs 'function', e.g. exp"));
  file = dir.write("p.yaml", model_with_ops("  - {op: unary, function: exp, alpha: 2, inputs: [x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("unary does not take an alpha of 2"));
  file = dir.write("q.yaml", model_with_ops("  - {op: relu, function: exp, inputs: [x], output: y}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'function' applies to unary, reduce ops only"));
}

TEST_CASE("float16 conversion rounds to nearest even and round-trips halves", "[model]") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(70000.0f) == 0x7c00);                      // overflow to infinity
  CHECK(float_to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);  // a tie goes to even
  CHECK(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  CHECK(float_to_half(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float_to_half(std::ldexp(1.0f, -26)) == 0x0000);
  for (std::uint32_t bits = 0; bits < 0x7c00; ++bits)  // every finite positive half
    REQUIRE(float_to_half(half_to_float(static_cast<std::uint16_t>(bits))) == bits);
  CHECK(std::fabs(round_to_half(0.1f) - 0.1f) <= 0.1f * std::ldexp(1.0f, -11));
}

TEST_CASE("model conv and pooling windows give the output field and refuse what does not fit", "[model]") {
  Graph g = load_model(source_path("configs/models/cnn-small.yaml"));
  const Op& conv = g.ops[0];
  CHECK(conv.kind == OpKind::conv);
  CHECK(conv.window.out_height() == 16);
  CHECK(g.tensors[conv.output].shape == std::vector<std::int64_t>{2 * 16 * 16, 16});
  const Op& pool = g.ops[1];
  CHECK(pool.kind == OpKind::max_pool);
  CHECK(g.tensors[pool.output].shape == std::vector<std::int64_t>{2 * 8 * 8, 16});  // (16 + 2 - 3) / 2 + 1
  CHECK(window_from_fields(window_fields(g.ops[2].window)) == g.ops[2].window);
  CHECK(g.ops[2].window.groups == 16);

  TempDir dir;
  auto conv_model = [](const std::string& op) {
    return "model: m\nseed: 1\ntensors:\n"
           "  - {name: x, shape: [32, 3], kind: input}\n"
           "  - {name: w, shape: [27, 4], kind: weight}\n"
           "ops:\n" +
           op + "outputs: [y]\n";
  };
  // A 3x3 kernel on a 4x8 field, no padding: 2x6 outputs.
  auto file =
      dir.write("ok.yaml", conv_model("  - {op: conv, inputs: [x, w], output: y, field: [4, 8], kernel: [3, 3]}\n"));
  CHECK(load_model(file).tensors.back().shape == std::vector<std::int64_t>{12, 4});
  file =
      dir.write("big.yaml", conv_model("  - {op: conv, inputs: [x, w], output: y, field: [4, 8], kernel: [5, 3]}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("big.yaml") && Catch::Contains("does not fit"));
  file =
      dir.write("rows.yaml", conv_model("  - {op: conv, inputs: [x, w], output: y, field: [4, 4], kernel: [3, 3]}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("needs feature maps [16, channels]"));
  file = dir.write("weights.yaml",
                   conv_model("  - {op: conv, inputs: [x, w], output: y, field: [4, 8], kernel: [1, 1]}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("must be [3, M]"));
  file = dir.write("key.yaml", conv_model("  - {op: conv, inputs: [x, w], output: y, kernel: [3, 3]}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("missing required key 'field'"));
  file =
      dir.write("groups.yaml",
                conv_model("  - {op: max_pool, inputs: [x], output: y, field: [4, 8], kernel: [2, 2], groups: 3}\n"));
  CHECK_THROWS_WITH(load_model(file), Catch::Contains("'groups' applies to conv ops only"));
}

TEST_CASE("model window sizes from a file cannot overflow the shape check", "[model]") {
  Graph g = load_model(source_path("configs/models/cnn-small.yaml"));
  Op& conv = g.ops[0];
  conv.batch = 0xffffffffu;  // as a forged package or state file may say
  conv.window.height = conv.window.width = 1u << 24;
  std::vector<std::int64_t> shape;
  CHECK_THAT(infer_shape(g, conv, shape), Catch::Contains("too many pixels"));
  CHECK_THAT(check_graph(g), Catch::Contains("too many pixels"));
}

TEST_CASE("--float16-weights stores the weights only half-reading ops read as float16", "[model]") {
  TempDir dir;
  const std::string file = dir.write("m.yaml",
                                     "model: m\ntensors:\n"
                                     "  - {name: x, shape: [2, 6], kind: input}\n"
                                     "  - {name: w, shape: [6, 5], kind: weight}\n"
                                     "  - {name: b, shape: [5], kind: weight}\n"
                                     "  - {name: wt, shape: [4, 5], kind: weight}\n"
                                     "  - {name: s, shape: [4], kind: weight}\n"
                                     "  - {name: shared, shape: [4, 4], kind: weight}\n"
                                     "  - {name: unread, shape: [3, 3], kind: weight}\n"
                                     "ops:\n"
                                     "  - {op: matmul, inputs: [x, w], output: h}\n"
                                     "  - {op: add, inputs: [h, b], output: a}\n"
                                     "  - {op: matmul, inputs: [a, wt], output: t, transpose_b: true}\n"
                                     "  - {op: mul, inputs: [t, s], output: u}\n"
                                     "  - {op: matmul, inputs: [u, shared], output: v}\n"
                                     "  - {op: matmul, inputs: [shared, shared], output: q}\n"
                                     "outputs: [v, q]\n");
  Graph g = load_model(file);
  const Float16Storage storage = store_weights_in_float16(g);
  auto dtype = [&](const char* name) { return g.tensors[g.find_tensor(name)].dtype; };
  // A matmul's right operand and a bias row: halves. transpose_b operands, a mul's row, a weight
  // also read by an op that reads no halves, and one nothing reads: float32.
  CHECK(dtype("w") == DType::float16);
  CHECK(dtype("b") == DType::float16);
  CHECK(dtype("wt") == DType::float32);
  CHECK(dtype("s") == DType::float32);
  CHECK(dtype("shared") == DType::float32);
  CHECK(dtype("unread") == DType::float32);
  CHECK(dtype("x") == DType::float32);
  CHECK(storage.weights == 2);
  CHECK(storage.bytes_saved == (30 - 15) * 4 + (5 - 3) * 4);
  CHECK(check_graph(g).empty());
  // Again: nothing left to store.
  CHECK(store_weights_in_float16(g).weights == 0);
}
