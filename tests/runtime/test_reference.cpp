// Tests of the float64 reference executor, the numerical test and the host tensors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "sim_fixture.hpp"
#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/host_exchange.hpp"
#include "tessera/runtime/reference.hpp"

using namespace tessera;
using namespace tessera::runtime;
using Catch::Matchers::Contains;

namespace {

/// x[2,2] * w[2,3] + b[3] -> relu, written as matmul/add/relu, plus the same as one dense op.
Graph tiny_graph() {
  using testing::make_tensor;
  Graph g;
  g.name = "tiny";
  g.source_file = "tiny.yaml";
  g.tensors = {make_tensor("x", {2, 2}, TensorKind::input),        make_tensor("w", {2, 3}, TensorKind::weight),
               make_tensor("b", {3}, TensorKind::weight),          make_tensor("h", {2, 3}, TensorKind::intermediate),
               make_tensor("a", {2, 3}, TensorKind::intermediate), make_tensor("y", {2, 3}, TensorKind::intermediate),
               make_tensor("d", {2, 3}, TensorKind::intermediate)};
  Op matmul{OpKind::matmul, {0, 1}, 3, false, {4, 3}};
  Op add{OpKind::add, {3, 2}, 4, false, {5, 3}};
  Op relu{OpKind::relu, {4}, 5, false, {6, 3}};
  Op dense{OpKind::dense, {0, 1, 2}, 6, true, {7, 3}};
  g.ops = {matmul, add, relu, dense};
  g.outputs = {5, 6};
  return g;
}

HostTensors tiny_values() { return {{"x", {1, 2, 3, 4}}, {"w", {1, 0, -1, 0, 1, 1}}, {"b", {0.5f, -3, 0}}}; }

}  // namespace

TEST_CASE("reference executor computes matmul, broadcast add, relu and dense in float64", "[runtime][reference]") {
  const ReferenceValues values = execute_reference(tiny_graph(), tiny_values());
  CHECK(values.at("h") == std::vector<double>{1, 2, 1, 3, 4, 1});
  CHECK(values.at("a") == std::vector<double>{1.5, -1, 1, 3.5, 1, 1});
  CHECK(values.at("y") == std::vector<double>{1.5, 0, 1, 3.5, 1, 1});
  CHECK(values.at("d") == values.at("y"));
  CHECK(values.count("x") == 0);  // only what ops produce
}

TEST_CASE("reference executor keeps only the graph's outputs when asked, with the same values",
          "[runtime][reference]") {
  const ReferenceValues all = execute_reference(tiny_graph(), tiny_values());
  const ReferenceValues outputs = execute_reference(tiny_graph(), tiny_values(), /*outputs_only=*/true);
  const Graph graph = tiny_graph();
  REQUIRE(outputs.size() == graph.outputs.size());
  for (std::uint32_t output : graph.outputs) {
    const std::string& name = graph.tensors[output].name;
    CHECK(outputs.at(name) == all.at(name));
  }
}

TEST_CASE("reference executor computes the elementwise functions, row operands and row reductions in double",
          "[runtime][reference]") {
  using testing::make_tensor;
  Graph g;
  g.name = "functions";
  g.source_file = "functions.yaml";
  g.tensors = {make_tensor("x", {2, 2}, TensorKind::input), make_tensor("r", {2}, TensorKind::weight)};
  const std::vector<OpKind> kinds = {OpKind::sigmoid,    OpKind::tanh,       OpKind::erf, OpKind::sqrt,
                                     OpKind::pow,        OpKind::sub,        OpKind::mul, OpKind::div,
                                     OpKind::reduce_sum, OpKind::reduce_mean};
  for (OpKind kind : kinds) {
    Op op;
    op.kind = kind;
    op.inputs = is_binary(kind) ? std::vector<std::uint32_t>{0, 1} : std::vector<std::uint32_t>{0};
    op.exponent = 3;
    op.output = static_cast<std::uint32_t>(g.tensors.size());
    g.tensors.push_back(make_tensor(
        op_kind_name(kind), is_row_reduction(kind) ? std::vector<std::int64_t>{2, 1} : std::vector<std::int64_t>{2, 2},
        TensorKind::intermediate));
    g.ops.push_back(op);
    g.outputs.push_back(op.output);
  }
  const std::vector<double> x = {0.25, 4, -1, 2}, r = {2, -0.5};
  const ReferenceValues values = execute_reference(g, {{"x", {0.25f, 4, -1, 2}}, {"r", {2, -0.5f}}});
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(values.at("sigmoid")[i] == 1.0 / (1.0 + std::exp(-x[i])));
    CHECK(values.at("tanh")[i] == std::tanh(x[i]));
    CHECK(values.at("erf")[i] == std::erf(x[i]));
    CHECK(values.at("pow")[i] == x[i] * x[i] * x[i]);
    CHECK(values.at("sub")[i] == x[i] - r[i % 2]);  // the row broadcast over both rows
    CHECK(values.at("mul")[i] == x[i] * r[i % 2]);
    CHECK(values.at("div")[i] == x[i] / r[i % 2]);
  }
  CHECK(values.at("sqrt")[0] == 0.5);
  CHECK(std::isnan(values.at("sqrt")[2]));  // sqrt(-1), as ONNX gives it
  CHECK(values.at("reduce_sum") == std::vector<double>{4.25, 1});
  CHECK(values.at("reduce_mean") == std::vector<double>{2.125, 0.5});
}

TEST_CASE("reference executor computes the unary functions, max, min, prelu and row folds as ONNX defines them",
          "[runtime][reference]") {
  using testing::make_tensor;
  Graph g;
  g.name = "functions";
  g.source_file = "functions.yaml";
  g.tensors = {make_tensor("x", {2, 3}, TensorKind::input), make_tensor("r", {3}, TensorKind::weight)};
  auto add = [&](OpKind kind, std::uint32_t function, double alpha, const std::string& name) {
    Op op;
    op.kind = kind;
    op.function = function;
    op.alpha = alpha;
    op.inputs = is_binary(kind) ? std::vector<std::uint32_t>{0, 1} : std::vector<std::uint32_t>{0};
    op.output = static_cast<std::uint32_t>(g.tensors.size());
    g.tensors.push_back(
        make_tensor(name, is_row_reduction(kind) ? std::vector<std::int64_t>{2, 1} : std::vector<std::int64_t>{2, 3},
                    TensorKind::intermediate));
    g.ops.push_back(op);
    g.outputs.push_back(op.output);
  };
  auto unary = [&](UnaryFunction f, double alpha = 0.0) {
    add(OpKind::unary, static_cast<std::uint32_t>(f), alpha, unary_function_name(f));
  };
  for (UnaryFunction f : {UnaryFunction::exp, UnaryFunction::neg, UnaryFunction::abs, UnaryFunction::floor,
                          UnaryFunction::ceil, UnaryFunction::round, UnaryFunction::sign, UnaryFunction::softsign})
    unary(f);
  unary(UnaryFunction::elu, 2.0);
  unary(UnaryFunction::thresholded_relu, 0.5);
  add(OpKind::max, 0, 0.0, "max");
  add(OpKind::min, 0, 0.0, "min");
  add(OpKind::prelu, 0, 0.0, "prelu");
  for (ReduceFunction f : {ReduceFunction::max, ReduceFunction::min, ReduceFunction::prod, ReduceFunction::l1,
                           ReduceFunction::l2, ReduceFunction::log_sum_exp, ReduceFunction::sum_square})
    add(OpKind::reduce, static_cast<std::uint32_t>(f), 0.0, std::string("reduce_") + reduce_function_name(f));
  REQUIRE(check_graph(g).empty());
  const std::vector<double> x = {2.5, -0.5, 1.5, -2.5, 0, 3}, r = {1, 0.25, 2};
  const ReferenceValues values = execute_reference(g, {{"x", {2.5f, -0.5f, 1.5f, -2.5f, 0, 3}}, {"r", {1, 0.25f, 2}}});
  CHECK(values.at("neg") == std::vector<double>{-2.5, 0.5, -1.5, 2.5, 0, -3});
  CHECK(values.at("abs") == std::vector<double>{2.5, 0.5, 1.5, 2.5, 0, 3});
  CHECK(values.at("floor") == std::vector<double>{2, -1, 1, -3, 0, 3});
  CHECK(values.at("ceil") == std::vector<double>{3, -0.0, 2, -2, 0, 3});
  CHECK(values.at("round") == std::vector<double>{2, -0.0, 2, -2, 0, 3});  // halves to even
  CHECK(values.at("sign") == std::vector<double>{1, -1, 1, -1, 0, 1});
  CHECK(values.at("softsign")[0] == 2.5 / 3.5);
  CHECK(values.at("exp")[1] == std::exp(-0.5));
  CHECK(values.at("elu")[1] == 2.0 * (std::exp(-0.5) - 1.0));
  CHECK(values.at("elu")[0] == 2.5);
  CHECK(values.at("thresholded_relu") == std::vector<double>{2.5, 0, 1.5, 0, 0, 3});
  CHECK(values.at("max") == std::vector<double>{2.5, 0.25, 2, 1, 0.25, 3});  // r broadcast over both rows
  CHECK(values.at("min") == std::vector<double>{1, -0.5, 1.5, -2.5, 0, 2});
  CHECK(values.at("prelu") == std::vector<double>{2.5, -0.125, 1.5, -2.5, 0, 3});
  CHECK(values.at("reduce_max") == std::vector<double>{2.5, 3});
  CHECK(values.at("reduce_min") == std::vector<double>{-0.5, -2.5});
  CHECK(values.at("reduce_prod") == std::vector<double>{2.5 * -0.5 * 1.5, 0});
  CHECK(values.at("reduce_l1") == std::vector<double>{4.5, 5.5});
  CHECK(values.at("reduce_sum_square") == std::vector<double>{6.25 + 0.25 + 2.25, 6.25 + 9});
  CHECK(values.at("reduce_l2")[1] == std::sqrt(15.25));
  CHECK(values.at("reduce_log_sum_exp")[0] == std::log(std::exp(2.5) + std::exp(-0.5) + std::exp(1.5)));
}

TEST_CASE("graphs refuse a unary or reduce op without one of its functions, and an alpha where none is taken",
          "[runtime][reference]") {
  using testing::make_tensor;
  Graph g;
  g.name = "functions";
  g.source_file = "functions.yaml";
  g.tensors = {make_tensor("x", {2, 3}, TensorKind::input), make_tensor("y", {2, 3}, TensorKind::intermediate)};
  Op op;
  op.kind = OpKind::unary;
  op.inputs = {0};
  op.output = 1;
  g.ops = {op};
  g.outputs = {1};
  op.function = static_cast<std::uint32_t>(UnaryFunction::sigmoid);  // has its own op kind
  g.ops[0] = op;
  CHECK_THAT(check_graph(g), Contains("unary needs a function from exp to mish or from tan on"));
  op.function = kUnaryFunctionCount;
  g.ops[0] = op;
  CHECK_THAT(check_graph(g), Contains("unary needs a function from exp to mish or from tan on"));
  op.function = static_cast<std::uint32_t>(UnaryFunction::logical_not);  // an op kind of its own
  g.ops[0] = op;
  CHECK_THAT(check_graph(g), Contains("unary needs a function from exp to mish or from tan on"));
  op.function = static_cast<std::uint32_t>(UnaryFunction::atanh);
  g.ops[0] = op;
  CHECK(check_graph(g).empty());
  op.function = static_cast<std::uint32_t>(UnaryFunction::exp);
  op.alpha = 2.0;
  g.ops[0] = op;
  CHECK_THAT(check_graph(g), Contains("does not take an alpha"));
  op.alpha = 0.0;
  g.ops[0] = op;
  CHECK(check_graph(g).empty());
  op.kind = OpKind::relu;
  g.ops[0] = op;
  CHECK_THAT(check_graph(g), Contains("relu does not take a function"));
}

TEST_CASE("reference executor works in double, not float", "[runtime][reference]") {
  // h[0,0] = 1 * 1 + 2^-30 * 1: float32 rounds the sum to 1, double keeps 1 + 2^-30.
  Graph g = tiny_graph();
  HostTensors values = tiny_values();
  values["x"] = {1.0f, static_cast<float>(std::ldexp(1.0, -30)), 0, 0};
  values["w"] = {1, 0, 0, 1, 0, 0};
  const ReferenceValues result = execute_reference(g, values);
  CHECK(1.0f + static_cast<float>(std::ldexp(1.0, -30)) == 1.0f);
  CHECK(result.at("h")[0] == 1.0 + std::ldexp(1.0, -30));
  CHECK(result.at("h")[1] == 0.0);
}

TEST_CASE("reference executor reports missing values and bad shapes at the op's place", "[runtime][reference]") {
  HostTensors values = tiny_values();
  values.erase("w");
  CHECK_THROWS_WITH(execute_reference(tiny_graph(), values),
                    Contains("tiny.yaml:4:3") && Contains("no values given for weight 'w'"));

  Graph g = tiny_graph();
  g.tensors[1].shape = {3, 2};  // w no longer fits x
  values = tiny_values();
  CHECK_THROWS_WITH(execute_reference(g, values), Contains("inner dimensions differ"));

  g = tiny_graph();
  g.tensors[2].shape = {2};  // bias of the wrong length
  values["b"] = {1, 2};
  CHECK_THROWS_WITH(execute_reference(g, values), Contains("tiny.yaml:5:3") && Contains("cannot add"));
}

TEST_CASE("numerical test passes within atol + rtol * max|reference| and fails beyond", "[runtime][reference]") {
  const Graph g = tiny_graph();
  const ReferenceValues reference = execute_reference(g, tiny_values());
  HostTensors outputs = {{"y", {1.5f, 0, 1, 3.5f, 1, 1}}, {"d", {1.5f, 0, 1, 3.5f, 1, 1}}};
  NumericalReport report = compare_with_reference(g, outputs, reference, 1e-4, 1e-4);
  CHECK(report.passed);
  CHECK(report.max_abs_error == 0);
  CHECK(report.max_abs_reference == 3.5);
  CHECK(report.tolerance == Approx(1e-4 + 3.5e-4));
  CHECK(report.elements == 12);

  outputs["d"][4] = 1.0f + 4e-4f;  // inside 4.5e-4
  report = compare_with_reference(g, outputs, reference, 1e-4, 1e-4);
  CHECK(report.passed);
  CHECK(report.max_abs_error == Approx(4e-4).epsilon(1e-3));

  outputs["d"][4] = 1.0f + 5e-4f;  // beyond it
  report = compare_with_reference(g, outputs, reference, 1e-4, 1e-4);
  CHECK_FALSE(report.passed);
  CHECK(report.worst_tensor == "d");
  CHECK(report.worst_index == 4);

  outputs["d"][4] = std::numeric_limits<float>::quiet_NaN();
  report = compare_with_reference(g, outputs, reference, 1e-4, 1e-4);
  CHECK_FALSE(report.passed);
  CHECK(std::isnan(report.max_abs_error));

  outputs.erase("d");
  CHECK_THROWS_WITH(compare_with_reference(g, outputs, reference), Contains("no output 'd'"));
}

TEST_CASE("host tensors hold the model's initial values in row-major order", "[runtime][host]") {
  const Graph g = testing::small_mlp_graph();
  const HostTensors weights = initial_host_tensors(g, TensorKind::weight);
  REQUIRE(weights.size() == 2);
  REQUIRE(weights.at("w").size() == 32);
  REQUIRE(weights.at("b").size() == 4);
  for (std::uint64_t i = 0; i < 32; ++i) CHECK(weights.at("w")[i] == initial_value(g, g.tensors[1], i));
  for (float v : weights.at("w")) CHECK(std::fabs(v) <= 0.5f);  // init_scale
  const HostTensors inputs = initial_host_tensors(g, TensorKind::input);
  CHECK(inputs.size() == 1);
  CHECK(inputs.at("x").size() == 16);
}

TEST_CASE("host slices pack a block row-major and unpack it back", "[runtime][host]") {
  // A 3x4 tensor 0..11; the block rows 1..2, cols 1..2.
  std::vector<float> tensor(12);
  for (int i = 0; i < 12; ++i) tensor[i] = static_cast<float>(i);
  const PackageSlice slice{0, 0, 1, 2, 1, 2};
  std::vector<float> packed(4);
  pack_slice(tensor, 4, slice, packed);
  CHECK(packed == std::vector<float>{5, 6, 9, 10});
  std::vector<float> back(12, -1.0f);
  unpack_slice(packed, 4, slice, back);
  CHECK(back == std::vector<float>{-1, -1, -1, -1, -1, 5, 6, -1, -1, 9, 10, -1});
}

TEST_CASE("reference executor computes int32 and bool ops exactly and the numerical test wants them exact",
          "[runtime][reference][types]") {
  using testing::make_tensor;
  Graph g;
  g.name = "typed";
  g.source_file = "typed.onnx";
  g.tensors = {make_tensor("i", {2, 2}, TensorKind::input), make_tensor("j", {2, 2}, TensorKind::input),
               make_tensor("x", {2, 2}, TensorKind::input)};
  g.tensors[0].dtype = g.tensors[1].dtype = DType::int32;
  auto add = [&](OpKind kind, std::vector<std::uint32_t> inputs, const char* name, DType dtype) {
    g.tensors.push_back(make_tensor(name, {2, 2}, TensorKind::intermediate));
    g.tensors.back().dtype = dtype;
    g.ops.push_back(Op{kind, std::move(inputs), static_cast<std::uint32_t>(g.tensors.size() - 1)});
    return static_cast<std::uint32_t>(g.tensors.size() - 1);
  };
  const std::uint32_t quotient = add(OpKind::div, {0, 1}, "quotient", DType::int32);
  const std::uint32_t less = add(OpKind::less, {0, 1}, "less", DType::boolean);
  const std::uint32_t negated = add(OpKind::logical_not, {less}, "negated", DType::boolean);
  const std::uint32_t chosen = add(OpKind::where, {less, 2, 2}, "chosen", DType::float32);
  const std::uint32_t cast = add(OpKind::cast, {2}, "cast", DType::int32);
  g.outputs = {quotient, negated, chosen, cast};
  REQUIRE(check_graph(g).empty());
  const HostTensors values = {{"i", {int_word(7), int_word(-7), int_word(2147483647), int_word(3)}},
                              {"j", {int_word(2), int_word(2), int_word(-1), int_word(5)}},
                              {"x", {1.9f, -1.9f, 0.5f, -0.5f}}};
  const ReferenceValues reference = execute_reference(g, values);
  CHECK(reference.at("quotient") == std::vector<double>{3, -3, -2147483647, 0});  // toward zero
  CHECK(reference.at("less") == std::vector<double>{0, 1, 0, 1});
  CHECK(reference.at("negated") == std::vector<double>{1, 0, 1, 0});
  CHECK(reference.at("cast") == std::vector<double>{1, -1, 0, 0});

  // The device's words, decoded by type; one int32 element off by one fails however small.
  HostTensors device = {{"quotient", {int_word(3), int_word(-3), int_word(-2147483647), int_word(0)}},
                        {"negated", {int_word(1), int_word(0), int_word(1), int_word(0)}},
                        {"chosen", {1.9f, -1.9f, 0.5f, -0.5f}},
                        {"cast", {int_word(1), int_word(-1), int_word(0), int_word(0)}}};
  const NumericalReport exact = compare_with_reference(g, device, reference);
  CHECK(exact.passed);
  CHECK(exact.inexact_integers == 0);
  device["cast"][0] = int_word(2);
  const NumericalReport off = compare_with_reference(g, device, reference, 1e9, 1e9);
  CHECK_FALSE(off.passed);
  CHECK(off.inexact_integers == 1);
  CHECK_FALSE(
      compare_with_expected(g, device, {{"cast", {int_word(1), int_word(-1), int_word(0), int_word(0)}}}, 1e9, 1e9)
          .passed);

  // Integer division by zero is undefined in ONNX: the reference refuses it, naming the element.
  HostTensors by_zero = values;
  by_zero["j"][3] = int_word(0);
  CHECK_THROWS_WITH(execute_reference(g, by_zero), Contains("integer division by zero at element 3"));
}

TEST_CASE("reference executor looks embedding rows up as the device does: negatives from the end, others zeros",
          "[runtime][reference][embedding]") {
  using testing::make_tensor;
  Graph g;
  g.name = "embedding";
  g.source_file = "embedding.onnx";
  g.tensors = {make_tensor("table", {4, 2}, TensorKind::weight), make_tensor("ids", {2, 3}, TensorKind::input),
               make_tensor("rows", {6, 2}, TensorKind::intermediate)};
  g.tensors[1].dtype = DType::int32;
  g.ops.push_back(Op{OpKind::embedding, {0, 1}, 2});
  g.outputs = {2};
  REQUIRE(check_graph(g).empty());
  const HostTensors values = {
      {"table", {0.5f, 1.5f, 10, 11, 20, 21, 30, 31}},
      {"ids", {int_word(2), int_word(0), int_word(-1), int_word(-4), int_word(4), int_word(-5)}}};
  const ReferenceValues reference = execute_reference(g, values);
  CHECK(reference.at("rows") == std::vector<double>{20, 21, 0.5, 1.5, 30, 31, 0.5, 1.5, 0, 0, 0, 0});
  // The indices must be int32 and the table two-dimensional.
  Graph floats = g;
  floats.tensors[1].dtype = DType::float32;
  CHECK_THAT(check_graph(floats), Contains("embedding takes int32 indices"));
  Graph flat = g;
  flat.tensors[0].shape = {8};
  CHECK_THAT(check_graph(flat), Contains("embedding needs a table [rows, cols]"));
}
