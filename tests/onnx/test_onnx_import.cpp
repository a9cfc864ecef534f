// The ONNX frontend: import into the IR with real weights, folding, refusals, tensor files.
#include <catch2/catch.hpp>
#include <onnx/onnx_pb.h>

#include <sys/stat.h>

#include <fstream>
#include <functional>

#include "temp_dir.hpp"
#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/onnx/import.hpp"
#include "tessera/onnx/tensor_file.hpp"

using namespace tessera;
using namespace tessera::onnx_import;
using tessera::testing::TempDir;

namespace {

/// A small ModelProto under construction: opset 13, float inputs and outputs.
struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* graph;
  ModelBuilder() {
    model.set_ir_version(8);
    auto* opset = model.add_opset_import();
    opset->set_domain("");
    opset->set_version(13);
    graph = model.mutable_graph();
    graph->set_name("test");
  }
  void opset(std::int64_t version) { model.mutable_opset_import(0)->set_version(version); }
  void value(onnx::ValueInfoProto* info, const std::string& name, const std::vector<std::int64_t>& dims,
             const std::string& symbolic = "") {
    info->set_name(name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = tensor->mutable_shape();
    for (std::int64_t d : dims) shape->add_dim()->set_dim_value(d);
    if (!symbolic.empty()) shape->mutable_dim(0)->set_dim_param(symbolic);
  }
  void input(const std::string& name, const std::vector<std::int64_t>& dims, const std::string& symbolic = "") {
    value(graph->add_input(), name, dims, symbolic);
  }
  void output(const std::string& name, const std::vector<std::int64_t>& dims) {
    value(graph->add_output(), name, dims);
  }
  void initializer(const std::string& name, const std::vector<std::int64_t>& dims, const std::vector<float>& values) {
    auto* tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : dims) tensor->add_dims(d);
    for (float v : values) tensor->add_float_data(v);
  }
  void int_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                       const std::vector<std::int64_t>& values) {
    auto* tensor = graph->add_initializer();
    tensor->set_name(name);
    tensor->set_data_type(onnx::TensorProto::INT64);
    for (std::int64_t d : dims) tensor->add_dims(d);
    for (std::int64_t v : values) tensor->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                        const std::string& name = "") {
    auto* node = graph->add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (const auto& in : inputs) node->add_input(in);
    node->add_output(output);
    return node;
  }
  std::string save(const TempDir& dir, const std::string& file) const {
    const std::string path = (dir.path() / file).string();
    std::ofstream(path, std::ios::binary) << model.SerializeAsString();
    return path;
  }
};

void perm_attribute(onnx::NodeProto* node, const std::vector<std::int64_t>& perm) {
  auto* attribute = node->add_attribute();
  attribute->set_name("perm");
  attribute->set_type(onnx::AttributeProto::INTS);
  for (std::int64_t p : perm) attribute->add_ints(p);
}

void int_attribute(onnx::NodeProto* node, const std::string& name, std::int64_t value) {
  auto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(value);
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

const Tensor& tensor_named(const Graph& graph, const std::string& name) {
  const std::int64_t index = graph.find_tensor(name);
  REQUIRE(index >= 0);
  return graph.tensors[static_cast<std::size_t>(index)];
}

/// Values 0, 1, ..., count - 1.
std::vector<double> iota(std::size_t count) {
  std::vector<double> values(count);
  for (std::size_t i = 0; i < count; ++i) values[i] = static_cast<double>(i);
  return values;
}

/// A gather op applied to its inputs' values (row-major), element by element from its runs.
std::vector<double> gathered(const Graph& graph, const Op& op, const std::vector<std::vector<double>>& inputs) {
  std::vector<double> out(static_cast<std::size_t>(graph.tensors[op.output].elements()), -1.0);
  for_each_gathered(op.gather_runs, [&](std::uint64_t at, std::uint32_t input, std::int64_t index) {
    out.at(at) = inputs.at(input).at(static_cast<std::size_t>(index));
  });
  return out;
}

void string_attribute(onnx::NodeProto* node, const std::string& name, const std::string& value) {
  auto* attribute = node->add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::STRING);
  attribute->set_s(value);
}

}  // namespace

TEST_CASE("onnx import maps a Gemm with transB and a Relu onto matmul, add and relu with the initializers' values",
          "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 3});
  m.initializer("W", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  m.initializer("b", {4}, {0.5f, -0.5f, 1, -1});
  int_attribute(m.node("Gemm", {"x", "W", "b"}, "h", "fc"), "transB", 1);
  m.node("Relu", {"h"}, "y", "act");
  m.output("y", {2, 4});
  const std::string path = m.save(dir, "mlp.onnx");
  CHECK(is_onnx_model(path));

  const OnnxImport imported = import_onnx(path);
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 3);
  CHECK(graph.ops[0].kind == OpKind::matmul);
  CHECK(graph.ops[1].kind == OpKind::add);
  CHECK(graph.ops[2].kind == OpKind::relu);
  CHECK(graph.ops[0].place.line == 1);  // node index + 1
  CHECK(tensor_named(graph, "x").shape == std::vector<std::int64_t>{2, 3});
  // transB folded: the weight is W^T, [3, 4].
  const Tensor& weight = graph.tensors[graph.ops[0].inputs[1]];
  CHECK(weight.kind == TensorKind::weight);
  CHECK(weight.shape == std::vector<std::int64_t>{3, 4});
  CHECK(imported.weights.at(weight.name) == std::vector<float>{1, 4, 7, 10, 2, 5, 8, 11, 3, 6, 9, 12});
  CHECK(imported.weights.at("b") == std::vector<float>{0.5f, -0.5f, 1, -1});
  CHECK(tensor_named(graph, "b").shape == std::vector<std::int64_t>{4});
  REQUIRE(graph.outputs.size() == 1);
  CHECK(graph.tensors[graph.outputs[0]].name == "y");
  CHECK(graph.source_sha256 == sha256_hex(file_bytes(path)));
  CHECK(graph.source_sha256.size() == 64);
  CHECK(imported.inputs.at(0).dims == std::vector<std::int64_t>{2, 3});
}

TEST_CASE("onnx import folds a torch-style Shape, Gather, Unsqueeze, Concat, Reshape chain", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 3, 4});
  std::vector<float> w(20);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f;
  m.initializer("W", {4, 5}, w);
  m.int_initializer("last", {}, {2});
  m.int_initializer("minus_one", {1}, {-1});
  m.int_initializer("axes", {1}, {0});
  m.node("MatMul", {"x", "W"}, "h", "mm");
  m.node("Shape", {"h"}, "shape");
  int_attribute(m.node("Gather", {"shape", "last"}, "width"), "axis", 0);
  m.node("Unsqueeze", {"width", "axes"}, "width1");
  int_attribute(m.node("Concat", {"minus_one", "width1"}, "new_shape"), "axis", 0);
  m.node("Reshape", {"h", "new_shape"}, "y", "flatten");
  m.output("y", {6, 5});
  const OnnxImport imported = import_onnx(m.save(dir, "flatten.onnx"));
  REQUIRE(imported.graph.ops.size() == 1);
  CHECK(imported.folded_nodes == 4);
  // The rank-3 input is [rows, last dim] in the IR; the product keeps its rows.
  CHECK(tensor_named(imported.graph, "x").shape == std::vector<std::int64_t>{6, 4});
  CHECK(tensor_named(imported.graph, "y").shape == std::vector<std::int64_t>{6, 5});
  CHECK(imported.weights.at("W") == w);
  CHECK(imported.outputs.at(0).dims == std::vector<std::int64_t>{6, 5});
}

TEST_CASE("onnx import subtracts a constant as the add of its negation and expands a scalar to a row", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {3, 2});
  m.initializer("c", {}, {1.5f});
  m.node("Sub", {"x", "c"}, "y", "minus");
  m.output("y", {3, 2});
  const OnnxImport imported = import_onnx(m.save(dir, "sub.onnx"));
  REQUIRE(imported.graph.ops.size() == 1);
  CHECK(imported.graph.ops[0].kind == OpKind::add);
  const Tensor& operand = imported.graph.tensors[imported.graph.ops[0].inputs[1]];
  CHECK(operand.shape == std::vector<std::int64_t>{2});
  CHECK(imported.weights.at(operand.name) == std::vector<float>{-1.5f, -1.5f});
}

TEST_CASE("onnx import keeps the GELU pattern x*0.5*(1+Erf(x/sqrt(2))) as its ops, with the constants as rows",
          "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 4});
  m.initializer("sqrt2", {}, {1.4142135f});
  m.initializer("one", {}, {1.0f});
  m.initializer("half", {}, {0.5f});
  m.node("Div", {"x", "sqrt2"}, "scaled");
  m.node("Erf", {"scaled"}, "erf");
  m.node("Add", {"erf", "one"}, "shifted");
  m.node("Mul", {"x", "shifted"}, "product");
  m.node("Mul", {"product", "half"}, "y");
  m.output("y", {2, 4});
  const OnnxImport imported = import_onnx(m.save(dir, "gelu.onnx"));
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 5);
  CHECK(graph.ops[0].kind == OpKind::div);
  CHECK(graph.ops[1].kind == OpKind::erf);
  CHECK(graph.ops[2].kind == OpKind::add);
  CHECK(graph.ops[3].kind == OpKind::mul);
  CHECK(graph.ops[4].kind == OpKind::mul);
  // x * (1 + erf): two computed operands of the same dims; the scalars become float32 rows.
  CHECK(graph.tensors[graph.ops[3].inputs[1]].kind == TensorKind::intermediate);
  const Tensor& half = graph.tensors[graph.ops[4].inputs[1]];
  CHECK(half.shape == std::vector<std::int64_t>{4});
  CHECK(half.dtype == DType::float32);
  CHECK(imported.weights.at(half.name) == std::vector<float>(4, 0.5f));
}

TEST_CASE(
    "onnx import takes Pow's constant exponent, negates for a constant minus a tensor, powers by a computed exponent",
    "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {3, 2});
  m.initializer("two", {1}, {2.0f});
  m.initializer("c", {2}, {1.0f, 2.0f});
  m.node("Pow", {"x", "two"}, "squared");
  m.node("Sub", {"c", "squared"}, "y");
  m.output("y", {3, 2});
  const OnnxImport imported = import_onnx(m.save(dir, "pow.onnx"));
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 3);
  CHECK(graph.ops[0].kind == OpKind::pow);
  CHECK(graph.ops[0].exponent == 2.0);
  CHECK(graph.ops[1].kind == OpKind::mul);  // -1 * x, exact
  CHECK(imported.weights.at(graph.tensors[graph.ops[1].inputs[1]].name) == std::vector<float>{-1.0f, -1.0f});
  CHECK(graph.ops[2].kind == OpKind::add);
  CHECK(imported.weights.at(graph.tensors[graph.ops[2].inputs[1]].name) == std::vector<float>{1.0f, 2.0f});

  ModelBuilder computed;
  computed.input("x", {3, 2});
  computed.input("e", {3, 2});
  computed.node("Pow", {"x", "e"}, "y", "power");
  computed.output("y", {3, 2});
  const OnnxImport powered = import_onnx(computed.save(dir, "pow-computed.onnx"));
  REQUIRE(powered.graph.ops.size() == 1);
  CHECK(powered.graph.ops[0].kind == OpKind::power);  // elementwise, x ^ e
  CHECK(powered.graph.tensors[powered.graph.ops[0].inputs[1]].name == "e");
}

TEST_CASE("onnx import broadcasts a computed column [..., 1] over each row, and other broadcasts by a gather",
          "[onnx]") {
  TempDir dir;
  // x - mean(x) with keepdims, over a rank-3 input: the IR's [6, 5] minus a column [6, 1].
  ModelBuilder m;
  m.input("x", {2, 3, 5});
  auto* mean = m.node("ReduceMean", {"x"}, "mean");
  auto* axes = mean->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(-1);
  m.node("Sub", {"x", "mean"}, "y", "centre");
  m.output("y", {2, 3, 5});
  const OnnxImport imported = import_onnx(m.save(dir, "column.onnx"));
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 2);
  CHECK(graph.ops[1].kind == OpKind::sub);
  CHECK(graph.tensors[graph.ops[1].inputs[0]].shape == std::vector<std::int64_t>{6, 5});
  CHECK(graph.tensors[graph.ops[1].inputs[1]].shape == std::vector<std::int64_t>{6, 1});

  // A column of other rows ([2, 1, 5] over [2, 3, 5]) is no column of x's rows: a gather copies it
  // to x's dims first.
  ModelBuilder other;
  other.input("x", {2, 3, 5});
  other.input("z", {2, 1, 5});
  auto* sum = other.node("ReduceSum", {"z"}, "s");
  int_attribute(sum, "keepdims", 1);
  other.node("Div", {"x", "s"}, "y", "scale");
  other.output("y", {2, 3, 5});
  const OnnxImport broadcast = import_onnx(other.save(dir, "other.onnx"));
  const Op& divide = broadcast.graph.ops.back();
  REQUIRE(divide.kind == OpKind::div);
  const Op& spread = broadcast.graph.ops[broadcast.graph.ops.size() - 2];
  CHECK(spread.kind == OpKind::gather);
  CHECK(spread.output == divide.inputs[1]);
  CHECK(broadcast.graph.tensors[divide.inputs[1]].shape == std::vector<std::int64_t>{6, 5});
  CHECK(spread.gather_runs.size() >= 1);
}

TEST_CASE("onnx import transposes a computed matrix on the device and moves the first axis by a gather", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {1, 4, 6});
  m.initializer("w", {6, 5}, std::vector<float>(30, 0.5f));
  m.node("MatMul", {"x", "w"}, "h");
  auto* transpose = m.node("Transpose", {"h"}, "t");
  auto* perm = transpose->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (std::int64_t p : {0, 2, 1}) perm->add_ints(p);
  m.output("t", {1, 5, 4});
  const OnnxImport imported = import_onnx(m.save(dir, "transpose.onnx"));
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 2);
  CHECK(graph.ops[1].kind == OpKind::transpose);
  CHECK(graph.tensors[graph.ops[1].inputs[0]].shape == std::vector<std::int64_t>{4, 5});
  CHECK(graph.tensors[graph.ops[1].output].shape == std::vector<std::int64_t>{5, 4});

  // Moving the first axis (above 1) is none of the re-layouts: a gather, whose runs move every element.
  ModelBuilder batch;
  batch.input("x", {2, 3, 4, 5});
  perm_attribute(batch.node("Transpose", {"x"}, "y", "swap"), {1, 0, 2, 3});
  batch.output("y", {3, 2, 4, 5});
  const Graph swapped = import_onnx(batch.save(dir, "batch.onnx")).graph;
  REQUIRE(swapped.ops.size() == 1);
  CHECK(swapped.ops[0].kind == OpKind::gather);
  CHECK(swapped.tensors[swapped.ops[0].output].shape == std::vector<std::int64_t>{24, 5});
  const std::vector<double> moved = gathered(swapped, swapped.ops[0], {iota(120)});
  for (int c = 0; c < 3; ++c)
    for (int n = 0; n < 2; ++n)
      for (int e = 0; e < 20; ++e) CHECK(moved[static_cast<std::size_t>((c * 2 + n) * 20 + e)] == (n * 3 + c) * 20 + e);
}

TEST_CASE("onnx import maps attention's re-layouts as torch exports them onto slices, heads and transpose_b",
          "[onnx]") {
  // nn.MultiheadAttention's packed projection chunked by Slice, a BERT-style Reshape to heads and
  // Transpose [0, 2, 1, 3], K as one Transpose [0, 2, 3, 1], the merge back and a size-1 move.
  TempDir dir;
  ModelBuilder m;
  m.opset(17);
  m.input("x", {1, 6, 8});
  m.initializer("w", {8, 16}, std::vector<float>(128, 0.25f));
  m.int_initializer("zero", {1}, {0});
  m.int_initializer("eight", {1}, {8});
  m.int_initializer("sixteen", {1}, {16});
  m.int_initializer("last", {1}, {-1});
  m.int_initializer("heads", {4}, {1, 6, 2, 4});
  m.int_initializer("merged", {3}, {1, 6, 8});
  m.node("MatMul", {"x", "w"}, "h");
  m.node("Slice", {"h", "zero", "eight", "last"}, "q");
  m.node("Slice", {"h", "eight", "sixteen", "last"}, "k");
  m.node("Reshape", {"q", "heads"}, "q4");
  m.node("Reshape", {"k", "heads"}, "k4");
  perm_attribute(m.node("Transpose", {"q4"}, "qh"), {0, 2, 1, 3});
  perm_attribute(m.node("Transpose", {"k4"}, "kt"), {0, 2, 3, 1});
  m.node("MatMul", {"qh", "kt"}, "s");
  m.node("Softmax", {"s"}, "p");
  m.node("MatMul", {"p", "qh"}, "c");
  perm_attribute(m.node("Transpose", {"c"}, "c4"), {0, 2, 1, 3});
  m.node("Reshape", {"c4", "merged"}, "y3");
  perm_attribute(m.node("Transpose", {"y3"}, "y"), {1, 0, 2});  // moves the axis of size 1 only: a view
  m.output("y", {6, 1, 8});
  const Graph graph = import_onnx(m.save(dir, "attention.onnx")).graph;
  std::vector<OpKind> kinds;
  for (const Op& op : graph.ops) kinds.push_back(op.kind);
  // K's transpose is read by the product as transpose_b, so it is gone.
  CHECK(kinds == std::vector<OpKind>{OpKind::matmul, OpKind::slice_columns, OpKind::slice_columns, OpKind::split_heads,
                                     OpKind::split_heads, OpKind::matmul, OpKind::softmax, OpKind::matmul,
                                     OpKind::merge_heads});
  REQUIRE(kinds.size() == 9);
  CHECK(graph.ops[2].column_begin == 8);
  CHECK(graph.ops[2].column_count == 8);
  CHECK(graph.ops[3].heads == 2);
  CHECK(graph.ops[3].batch == 1);
  CHECK(graph.ops[5].transpose_b);
  CHECK(graph.ops[5].batch == 2);
  CHECK(graph.ops[5].inputs[1] == graph.ops[4].output);
  CHECK(graph.tensors[graph.ops[3].output].shape == std::vector<std::int64_t>{12, 4});
  CHECK(graph.tensors[graph.ops[8].output].shape == std::vector<std::int64_t>{6, 8});
  CHECK(graph.tensors[graph.ops[8].output].name == "y");

  // A Reshape into heads read by anything but the Transpose into heads: a gather lays it out as read.
  ModelBuilder wrong;
  wrong.opset(17);
  wrong.input("x", {1, 6, 8});
  wrong.initializer("w", {8, 8}, std::vector<float>(64, 0.25f));
  wrong.int_initializer("heads", {4}, {1, 6, 2, 4});
  wrong.node("MatMul", {"x", "w"}, "h");
  wrong.node("Reshape", {"h", "heads"}, "h4");
  wrong.node("Relu", {"h4"}, "y", "act");
  wrong.output("y", {1, 6, 2, 4});
  const std::string path = wrong.save(dir, "wrong.onnx");
  const Graph relaid = import_onnx(path).graph;
  REQUIRE(relaid.ops.size() == 3);
  CHECK(relaid.ops[1].kind == OpKind::gather);
  CHECK(relaid.tensors[relaid.ops[1].output].shape == std::vector<std::int64_t>{12, 4});
  CHECK(relaid.ops[2].inputs[0] == relaid.ops[1].output);
}

TEST_CASE("onnx import maps a product of two rank-4 activations onto a batched matmul", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("q", {1, 2, 3, 4});
  m.input("k", {1, 2, 4, 5});
  m.node("MatMul", {"q", "k"}, "s");
  m.output("s", {1, 2, 3, 5});
  const OnnxImport imported = import_onnx(m.save(dir, "batched.onnx"));
  const Graph& graph = imported.graph;
  REQUIRE(graph.ops.size() == 1);
  CHECK(graph.ops[0].batch == 2);
  CHECK(graph.tensors[graph.ops[0].inputs[0]].shape == std::vector<std::int64_t>{6, 4});
  CHECK(graph.tensors[graph.ops[0].inputs[1]].shape == std::vector<std::int64_t>{8, 5});
  CHECK(graph.tensors[graph.ops[0].output].shape == std::vector<std::int64_t>{6, 5});

  // Broadcasting one operand over the other's batch is refused, with both dims.
  ModelBuilder broadcast;
  broadcast.input("q", {2, 3, 4});
  broadcast.input("k", {1, 4, 5});
  broadcast.node("MatMul", {"q", "k"}, "s", "scores");
  broadcast.output("s", {2, 3, 5});
  const std::string path = broadcast.save(dir, "broadcast.onnx");
  CHECK_THROWS_WITH(import_onnx(path), Catch::StartsWith(path + ": node 'scores' (MatMul): not supported: a batched "
                                                                "product of [2, 3, 4] x [1, 4, 5]"));
}

TEST_CASE("onnx import folds any axes by rows, transposing a run of axes that others follow, and chains LogSoftmax",
          "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 3, 4});
  auto* max = m.node("ReduceMax", {"x"}, "r", "max_over_1");
  auto* axes = max->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(1);
  int_attribute(max, "keepdims", 0);
  m.node("LogSoftmax", {"x"}, "y", "log_probs");
  m.node("Elu", {"y"}, "z", "elu");
  m.output("r", {2, 4});
  m.output("z", {2, 3, 4});
  const OnnxImport imported = import_onnx(m.save(dir, "reduce.onnx"));
  std::vector<std::string> kinds;
  for (const Op& op : imported.graph.ops) kinds.push_back(op_kind_name(op.kind));
  // [2, 3, 4] over axis 1: [2*3, 4] transposed per image to [2*4, 3], each row folded.
  CHECK(kinds == std::vector<std::string>{"transpose", "reduce", "reduce", "sub", "unary", "reduce_sum", "unary", "sub",
                                          "unary"});
  CHECK(imported.graph.ops[0].batch == 2);
  CHECK(imported.graph.ops[1].function == static_cast<std::uint32_t>(ReduceFunction::max));
  CHECK(imported.graph.tensors[imported.graph.ops[1].output].shape == std::vector<std::int64_t>{8, 1});
  CHECK(imported.graph.ops.back().function == static_cast<std::uint32_t>(UnaryFunction::elu));
  CHECK(imported.graph.ops.back().alpha == 1.0);
}

TEST_CASE("onnx import refuses an unsupported operator naming the file, the node, its op type and what is supported",
          "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 3, 3});
  m.node("Det", {"x"}, "y", "gate");
  m.output("y", {2});
  const std::string path = m.save(dir, "det.onnx");
  try {
    (void)import_onnx(path);
    FAIL("the import did not refuse Det");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK_THAT(message, Catch::StartsWith(path + ": node 'gate' (Det): not supported:"));
    CHECK_THAT(message, Catch::Contains("supported operators: MatMul, Gemm, Add"));
    CHECK(message.find('\n') == std::string::npos);
  }
}

TEST_CASE("onnx import refuses a dynamic dim, a non-float input and a file that is no model", "[onnx]") {
  TempDir dir;
  ModelBuilder dynamic;
  dynamic.input("x", {1, 3}, "batch");
  dynamic.node("Relu", {"x"}, "y");
  dynamic.output("y", {1, 3});
  CHECK_THROWS_WITH(import_onnx(dynamic.save(dir, "dynamic.onnx")),
                    Catch::Contains("graph input 'x': not supported: a dynamic or empty dim 'batch'"));

  ModelBuilder text;
  text.input("x", {2});
  text.graph->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  text.node("Identity", {"x"}, "y");
  text.output("y", {2});
  text.graph->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  CHECK_THROWS_WITH(import_onnx(text.save(dir, "text.onnx")), Catch::Contains("not supported: element type string"));

  // Found by fuzz_onnx: the checker lets through an output no node computes.
  ModelBuilder dangling;
  dangling.input("x", {2, 3});
  dangling.node("Relu", {"x"}, "y");
  dangling.output("y", {2, 3});
  dangling.output("z", {2, 3});
  CHECK_THROWS_WITH(import_onnx(dangling.save(dir, "dangling.onnx")),
                    Catch::Contains("graph output 'z': no node, initializer or graph input produces it"));

  const std::string junk = dir.write("junk.onnx", "model: not onnx\n");
  CHECK_THROWS_WITH(import_onnx(junk), Catch::Contains("junk.onnx: not an ONNX model"));
  CHECK_FALSE(is_onnx_model(dir.write("model.yaml", "model: m\n")));
}

TEST_CASE("tensor files round-trip through .pb and .npy with their dims", "[onnx]") {
  TempDir dir;
  const TensorFile tensor{"y", {2, 1, 3}, {1.5f, -2, 3, 0.25f, 1e-8f, -7}};
  for (const char* file : {"y.pb", "y.npy"}) {
    const std::string path = (dir.path() / file).string();
    write_tensor_file(path, tensor);
    const TensorFile back = read_tensor_file(path);
    CHECK(back.dims == tensor.dims);
    CHECK(back.values == tensor.values);
  }
  CHECK(read_tensor_file((dir.path() / "y.pb").string()).name == "y");
  CHECK_THROWS_WITH(read_tensor_file(dir.write("bad.npy", "not numpy")), Catch::Contains("bad.npy: not a .npy file"));
  CHECK_THROWS_WITH(read_tensor_file(dir.write("x.txt", "1 2 3")),
                    Catch::Contains("give an ONNX TensorProto (.pb) or a NumPy array (.npy)"));
}

TEST_CASE("a tensor file whose dims claim more values than it holds is refused before anything is allocated",
          "[onnx]") {
  TempDir dir;
  onnx::TensorProto proto;  // the shape of the input fuzz_tensor_file found: 2^31 floats claimed, none given
  proto.set_name("x");
  proto.set_data_type(onnx::TensorProto::FLOAT);
  proto.add_dims(std::int64_t{1} << 30);
  proto.add_dims(2);
  const std::string path = dir.write("x.pb", proto.SerializeAsString());
  CHECK_THROWS_WITH(read_tensor_file(path),
                    Catch::Contains("x.pb: holds 0 values but its dims [1073741824, 2] need 2147483648"));
  proto.set_raw_data(std::string(6, '\0'));
  CHECK_THROWS_WITH(read_tensor_file(dir.write("y.pb", proto.SerializeAsString())),
                    Catch::Contains("raw_data of 6 bytes is not a whole number of 4-byte values"));
}

TEST_CASE("onnx import refuses to fold a constant far larger than its inputs", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2});
  m.int_initializer("dims", {1}, {std::int64_t{1} << 30});
  m.node("ConstantOfShape", {"dims"}, "huge", "fill");
  m.node("Add", {"x", "x"}, "y");
  m.output("y", {2});
  CHECK_THROWS_WITH(
      import_onnx(m.save(dir, "huge.onnx")),
      Catch::Contains("node 'fill' (ConstantOfShape): not supported: folding a constant of dims [1073741824]"));
}

// Found by the second hardening pass: axes hidden from shape inference behind an Identity let a
// Squeeze of a dim that is not 1 give dims with no values, which an Add then read (SIGSEGV), and a
// repeated Unsqueeze axis ended in vector::_M_range_check.
TEST_CASE("onnx import checks folded constants' values and axis lists before it indexes them", "[onnx]") {
  TempDir dir;
  auto model_with = [&](const std::string& op, const std::vector<std::int64_t>& dims,
                        const std::vector<std::int64_t>& axes, std::size_t values) {
    ModelBuilder m;
    m.input("x", {3});
    m.initializer("c", dims, std::vector<float>(values, 1.0f));
    m.int_initializer("axes", {static_cast<std::int64_t>(axes.size())}, axes);
    m.node("Identity", {"axes"}, "hidden_axes");
    m.node(op, {"c", "hidden_axes"}, "folded", "fold");
    m.node("Add", {"x", "folded"}, "y", "add");
    m.output("y", {3});
    return m.save(dir, op + ".onnx");
  };
  CHECK_THROWS_WITH(
      import_onnx(model_with("Squeeze", {0, 3}, {0}, 0)),
      Catch::Contains("node 'fold' (Squeeze)") && Catch::Contains("Squeeze of axis 0, whose dim is 0, not 1"));
  CHECK_THROWS_WITH(import_onnx(model_with("Unsqueeze", {3}, {0, 0}, 3)),
                    Catch::Contains("node 'fold' (Unsqueeze)") && Catch::Contains("axes [0, 0] name axis 0 twice"));
  CHECK_THROWS_WITH(import_onnx(model_with("Unsqueeze", {3}, {1, -2}, 3)),
                    Catch::Contains("axes [1, -2] name axis 1 twice"));
  CHECK_THROWS_WITH(import_onnx(model_with("Unsqueeze", {3}, {5}, 3)), Catch::Contains("fold"));
  // The well-formed fold still imports: Squeeze of a [1, 3] constant is a row.
  CHECK(import_onnx(model_with("Squeeze", {1, 3}, {0}, 3)).graph.ops.size() == 1);

  // An initializer whose data disagrees with its dims never reaches a fold.
  ModelBuilder short_data;
  short_data.input("x", {3});
  short_data.initializer("c", {3}, {1.0f, 2.0f});
  short_data.node("Add", {"x", "c"}, "y");
  short_data.output("y", {3});
  CHECK_THROWS(import_onnx(short_data.save(dir, "short.onnx")));

  // A FIFO is refused before it is read, rather than blocking the import forever.
  const std::string fifo = (dir.path() / "model.onnx").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(import_onnx(fifo), Catch::Contains(fifo + ": cannot read the ONNX model: it is a named pipe"));
}

TEST_CASE("onnx import with an expected sha256 refuses other bytes before parsing them", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2});
  m.node("Relu", {"x"}, "y");
  m.output("y", {2});
  const std::string path = m.save(dir, "relu.onnx");
  const std::string sha256 = import_onnx(path).graph.source_sha256;
  CHECK(import_onnx(path, sha256).graph.source_sha256 == sha256);
  // Junk with the right name: were it parsed, the error would say it is no model.
  const std::string swapped = dir.write("relu.onnx", "not a model at all");
  CHECK_THROWS_WITH(import_onnx(swapped, sha256), Catch::Contains("the model changed since the package was compiled") &&
                                                      Catch::Contains("it is not parsed") &&
                                                      !Catch::Contains("not an ONNX model"));
}

TEST_CASE("onnx import joins computed branches by a Concat gather of a run per input", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {3, 4});
  m.initializer("wa", {4, 2}, std::vector<float>(8, 0.5f));
  m.initializer("wb", {4, 5}, std::vector<float>(20, 0.25f));
  m.node("MatMul", {"x", "wa"}, "a");
  m.node("MatMul", {"x", "wb"}, "b");
  int_attribute(m.node("Concat", {"a", "b"}, "y"), "axis", -1);
  m.output("y", {3, 7});
  const Graph graph = import_onnx(m.save(dir, "concat.onnx")).graph;
  REQUIRE(graph.ops.size() == 3);
  const Op& concat = graph.ops[2];
  CHECK(concat.kind == OpKind::gather);
  CHECK(concat.inputs == std::vector<std::uint32_t>{graph.ops[0].output, graph.ops[1].output});
  // Each input's rows, at a constant distance: one run repeated per row for each.
  REQUIRE(concat.gather_runs.size() == 2);
  CHECK(concat.gather_runs[0].repeat == 3);
  CHECK(concat.gather_runs[1].repeat == 3);
  std::vector<double> a = iota(6), b = iota(15);
  for (double& v : b) v += 100;
  const std::vector<double> y = gathered(graph, concat, {a, b});
  CHECK(y == std::vector<double>{0,   1,   100, 101, 102, 103, 104, 2,   3,   105, 106,
                                 107, 108, 109, 4,   5,   110, 111, 112, 113, 114});
}

TEST_CASE("onnx import splits a computed tensor into each of a node's outputs", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 6});
  m.initializer("w", {6, 6}, std::vector<float>(36, 0.5f));
  m.int_initializer("sizes", {3}, {1, 2, 3});
  m.node("MatMul", {"x", "w"}, "h");
  auto* split = m.node("Split", {"h", "sizes"}, "first", "three");
  split->add_output("second");
  split->add_output("third");
  int_attribute(split, "axis", 1);
  m.node("Relu", {"second"}, "y");
  m.output("first", {2, 1});
  m.output("y", {2, 2});
  m.output("third", {2, 3});
  const Graph graph = import_onnx(m.save(dir, "split.onnx")).graph;
  REQUIRE(graph.ops.size() == 5);
  for (std::size_t i = 1; i <= 3; ++i) CHECK(graph.ops[i].kind == OpKind::gather);
  CHECK(tensor_named(graph, "first").shape == std::vector<std::int64_t>{2, 1});
  CHECK(tensor_named(graph, "third").shape == std::vector<std::int64_t>{2, 3});
  CHECK(gathered(graph, graph.ops[3], {iota(12)}) == std::vector<double>{3, 4, 5, 9, 10, 11});
}

TEST_CASE("onnx import pads by reflection, by the edge and by a constant that a weight holds", "[onnx]") {
  TempDir dir;
  for (const char* mode : {"reflect", "edge", "constant"}) {
    ModelBuilder m;
    m.input("x", {2, 3});
    m.int_initializer("pads", {4}, {0, 2, 1, 1});  // columns: two before, one after; one row after
    m.initializer("value", {}, {7.5f});
    string_attribute(m.node("Pad", {"x", "pads", "value"}, "y"), "mode", mode);
    m.output("y", {3, 6});
    const Graph graph = import_onnx(m.save(dir, std::string(mode) + ".onnx")).graph;
    REQUIRE(graph.ops.size() == 1);
    const Op& pad = graph.ops[0];
    CHECK(pad.kind == OpKind::gather);
    // The inputs in the op's order: x, and for constant padding a weight of the fill value.
    std::vector<std::vector<double>> inputs;
    for (std::uint32_t input : pad.inputs) {
      const Tensor& tensor = graph.tensors[input];
      if (tensor.name == "x") {
        inputs.push_back({0, 1, 2, 3, 4, 5});
        continue;
      }
      CHECK(std::string(mode) == "constant");
      CHECK(tensor.kind == TensorKind::weight);
      // The longest stretch of padding: the last column of row 1, then all of row 2 (7 elements).
      CHECK(tensor.shape == std::vector<std::int64_t>{7});
      inputs.push_back(std::vector<double>(7, 7.5));
    }
    CHECK(pad.inputs.size() == (std::string(mode) == "constant" ? 2u : 1u));
    const std::vector<double> y = gathered(graph, pad, inputs);
    if (std::string(mode) == "reflect")
      CHECK(y == std::vector<double>{2, 1, 0, 1, 2, 1, 5, 4, 3, 4, 5, 4, 2, 1, 0, 1, 2, 1});
    else if (std::string(mode) == "edge")
      CHECK(y == std::vector<double>{0, 0, 0, 1, 2, 2, 3, 3, 3, 4, 5, 5, 3, 3, 3, 4, 5, 5});
    else CHECK(y == std::vector<double>{7.5, 7.5, 0, 1, 2, 7.5, 7.5, 7.5, 3, 4, 5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5, 7.5});
  }
}

TEST_CASE("onnx import re-lays out a computed tensor that a Reshape views in another layout", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 6});
  m.initializer("w", {6, 6}, std::vector<float>(36, 0.5f));
  m.int_initializer("shape", {2}, {4, 3});
  m.initializer("v", {3, 2}, std::vector<float>(6, 1.0f));
  m.node("MatMul", {"x", "w"}, "h");
  m.node("Reshape", {"h", "shape"}, "r");
  m.node("MatMul", {"r", "v"}, "y");
  m.output("y", {4, 2});
  const Graph graph = import_onnx(m.save(dir, "reshape.onnx")).graph;
  REQUIRE(graph.ops.size() == 3);
  const Op& relayout = graph.ops[1];
  CHECK(relayout.kind == OpKind::gather);
  CHECK(graph.tensors[relayout.output].shape == std::vector<std::int64_t>{4, 3});
  REQUIRE(relayout.gather_runs.size() == 1);
  CHECK(relayout.gather_runs[0].length == 12);
}

TEST_CASE("onnx import refuses movement it cannot do, naming the node and what is supported", "[onnx]") {
  TempDir dir;
  ModelBuilder linear;
  linear.input("x", {1, 1, 2, 2});
  linear.initializer("scales", {4}, {1, 1, 2, 2});
  onnx::NodeProto* up = linear.node("Resize", {"x", "", "scales"}, "y", "up");
  string_attribute(up, "mode", "linear");
  linear.output("y", {1, 1, 4, 4});
  // Bilinear: four taps, each a gather times its weights, added.
  const Graph bilinear = import_onnx(linear.save(dir, "linear.onnx")).graph;
  CHECK(std::count_if(bilinear.ops.begin(), bilinear.ops.end(),
                      [](const Op& op) { return op.kind == OpKind::gather; }) == 4);
  CHECK(std::count_if(bilinear.ops.begin(), bilinear.ops.end(), [](const Op& op) { return op.kind == OpKind::add; }) ==
        3);
  string_attribute(up, "coordinate_transformation_mode", "tf_crop_and_resize");
  const std::string resize = linear.save(dir, "crop.onnx");
  CHECK_THROWS_WITH(import_onnx(resize), Catch::StartsWith(resize + ": node 'up' (Resize): not supported: Resize "
                                                                    "linear with coordinate_transformation_mode "
                                                                    "'tf_crop_and_resize'"));

  ModelBuilder computed;
  computed.input("x", {2, 3});
  computed.input("v", {});
  computed.int_initializer("pads", {4}, {0, 1, 0, 1});
  computed.node("Pad", {"x", "pads", "v"}, "y", "around");
  computed.output("y", {2, 5});
  const std::string pad = computed.save(dir, "computed_value.onnx");
  CHECK_THROWS_WITH(import_onnx(pad), Catch::StartsWith(pad + ": node 'around' (Pad): not supported: Pad with a "
                                                              "computed constant_value 'v'"));
}

TEST_CASE("onnx import moves each element of a chain of data movement once, by one gather", "[onnx]") {
  TempDir dir;
  ModelBuilder m;
  m.input("x", {2, 3});
  m.int_initializer("pads", {4}, {0, 1, 0, 0});  // a column before
  m.initializer("value", {}, {9.0f});
  m.node("Pad", {"x", "pads", "value"}, "padded");
  perm_attribute(m.node("Transpose", {"padded"}, "turned"), {1, 0});
  m.int_initializer("starts", {1}, {1});
  m.int_initializer("ends", {1}, {4});
  m.int_initializer("axes", {1}, {0});
  m.int_initializer("steps", {1}, {2});
  m.node("Slice", {"turned", "starts", "ends", "axes", "steps"}, "y");
  m.output("y", {2, 2});
  const Graph graph = import_onnx(m.save(dir, "chain.onnx")).graph;
  // Pad [2, 4], Transpose [4, 2], rows 1 and 3: x's columns 0 and 2, one gather reading x alone.
  REQUIRE(graph.ops.size() == 1);
  const Op& chain = graph.ops[0];
  CHECK(chain.kind == OpKind::gather);
  REQUIRE(chain.inputs.size() == 1);
  CHECK(graph.tensors[chain.inputs[0]].name == "x");
  CHECK(gathered(graph, chain, {{0, 1, 2, 3, 4, 5}}) == std::vector<double>{0, 3, 2, 5});
}

// --- Tensor types; shapes and values fixed at compile time --------------------------------

namespace {

void set_type(onnx::ValueInfoProto* value, int element_type) {
  value->mutable_type()->mutable_tensor_type()->set_elem_type(element_type);
}

}  // namespace

TEST_CASE("onnx import holds int64 and bool graph values as int32 and bool tensors with comparisons and logic",
          "[onnx][types]") {
  TempDir dir;
  ModelBuilder model;
  model.input("ids", {2, 3});
  set_type(model.graph->mutable_input(0), onnx::TensorProto::INT64);
  model.input("x", {2, 3});
  model.int_initializer("k", {}, {4});
  model.node("Greater", {"ids", "k"}, "big");
  model.node("Not", {"big"}, "small");
  model.node("Add", {"ids", "k"}, "shifted");
  model.node("Where", {"big", "x", "x"}, "kept");
  model.output("small", {2, 3});
  set_type(model.graph->mutable_output(0), onnx::TensorProto::BOOL);
  model.output("shifted", {2, 3});
  set_type(model.graph->mutable_output(1), onnx::TensorProto::INT64);
  model.output("kept", {2, 3});
  const OnnxImport imported = import_onnx(model.save(dir, "typed.onnx"));
  const Graph& g = imported.graph;
  auto tensor = [&](const std::string& name) -> const Tensor& {
    REQUIRE(g.find_tensor(name) >= 0);
    return g.tensors[static_cast<std::size_t>(g.find_tensor(name))];
  };
  CHECK(tensor("ids").dtype == DType::int32);
  CHECK(tensor("x").dtype == DType::float32);
  CHECK(tensor("big").dtype == DType::boolean);
  CHECK(tensor("small").dtype == DType::boolean);
  CHECK(tensor("shifted").dtype == DType::int32);
  CHECK(tensor("kept").dtype == DType::float32);
  std::vector<OpKind> kinds;
  for (const Op& op : g.ops) kinds.push_back(op.kind);
  CHECK(kinds == std::vector<OpKind>{OpKind::greater, OpKind::logical_not, OpKind::add, OpKind::where});
  // The scalar 4 meets int32 rows as an int32 row vector of words.
  REQUIRE(imported.weights.count("k.row"));
  CHECK(tensor("k.row").dtype == DType::int32);
  CHECK(word_int(imported.weights.at("k.row").at(2)) == 4);
  REQUIRE(imported.outputs.size() == 3);
  CHECK(imported.outputs[0].element_type == onnx::TensorProto::BOOL);
  CHECK(imported.outputs[1].element_type == onnx::TensorProto::INT64);
  CHECK(imported.inputs[0].element_type == onnx::TensorProto::INT64);
  CHECK(check_graph(g).empty());
}

TEST_CASE("onnx import refuses an op on a tensor type it does not take and a narrowing Cast", "[onnx][types]") {
  TempDir dir;
  ModelBuilder relu;  // Relu takes integers from opset 14; the device's relu does not
  relu.opset(14);
  relu.input("ids", {4});
  set_type(relu.graph->mutable_input(0), onnx::TensorProto::INT64);
  relu.node("Relu", {"ids"}, "y");
  relu.output("y", {4});
  set_type(relu.graph->mutable_output(0), onnx::TensorProto::INT64);
  CHECK_THROWS_WITH(import_onnx(relu.save(dir, "relu.onnx")),
                    Catch::Contains("not supported: relu takes float operands, but operand 0 'ids' is int32"));

  ModelBuilder narrow;
  narrow.input("x", {4});
  auto* cast = narrow.node("Cast", {"x"}, "y");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::UINT8);
  narrow.output("y", {4});
  set_type(narrow.graph->mutable_output(0), onnx::TensorProto::UINT8);
  CHECK_THROWS_WITH(import_onnx(narrow.save(dir, "narrow.onnx")),
                    Catch::Contains("not supported: Cast of a computed tensor to uint8"));
}

TEST_CASE("onnx import names a graph input an op needs as a constant and takes it frozen by --input-value",
          "[onnx][types]") {
  TempDir dir;
  ModelBuilder model;
  model.input("x", {2, 3});
  model.input("shape", {2});
  set_type(model.graph->mutable_input(1), onnx::TensorProto::INT64);
  model.node("Reshape", {"x", "shape"}, "r");
  model.node("Relu", {"r"}, "y");
  model.output("y", {3, 2});
  const std::string path = model.save(dir, "reshape.onnx");
  CHECK_THROWS_WITH(import_onnx(path), Catch::Contains("'shape' is the graph input 'shape', known only at run time; "
                                                       "freeze it with --input-value shape=VALUES"));
  ImportOptions options;
  add_input_value(options, "shape=3,2");
  const OnnxImport imported = import_onnx(path, "", options);
  CHECK(imported.frozen_inputs == 1);
  REQUIRE(imported.inputs.size() == 1);
  CHECK(imported.inputs[0].name == "x");
  CHECK(imported.graph.import_options == std::vector<std::string>{"--input-value shape=3,2"});
  // A run imports it again from what the package records.
  CHECK(import_onnx(path, "", import_options_of(imported.graph.import_options)).graph.ops.size() == 1);

  ImportOptions wrong_count;
  add_input_value(wrong_count, "shape=6");
  CHECK_THROWS_WITH(import_onnx(path, "", wrong_count), Catch::Contains("'shape' is [2] (2 values), 1 given"));
  ImportOptions unknown;
  add_input_value(unknown, "shap=3,2");
  CHECK_THROWS_WITH(import_onnx(path, "", unknown),
                    Catch::Contains("--input-value shap: the model has no graph input 'shap'; its inputs: shape, x"));
  ImportOptions bad;
  CHECK_THROWS_WITH(add_input_value(bad, "shape=3,two"), Catch::Contains("'two' is not a number"));
  CHECK_THROWS_WITH(add_input_shape(bad, "x=2x0"), Catch::Contains("'0' is not a positive dim"));
}

TEST_CASE("onnx import fixes a dynamic dim with --input-shape and inlines the branch an If on a frozen input takes",
          "[onnx][types]") {
  TempDir dir;
  ModelBuilder model;
  model.input("x", {1, 3}, "batch");
  model.input("flag", {});
  set_type(model.graph->mutable_input(1), onnx::TensorProto::BOOL);
  auto* node = model.node("If", {"flag"}, "y");
  for (const auto& [branch, op] : {std::pair{"then_branch", "Relu"}, std::pair{"else_branch", "Sigmoid"}}) {
    auto* attribute = node->add_attribute();
    attribute->set_name(branch);
    attribute->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* body = attribute->mutable_g();
    body->set_name(branch);
    auto* inner = body->add_node();
    inner->set_op_type(op);
    inner->add_input("x");
    inner->add_output(std::string(branch) + ".out");
    auto* out = body->add_output();
    out->set_name(std::string(branch) + ".out");
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  model.output("y", {2, 3});
  model.graph->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param(
      "batch");
  const std::string path = model.save(dir, "switch.onnx");
  CHECK_THROWS_WITH(import_onnx(path), Catch::Contains("fix them with --input-shape x=DIMS"));
  ImportOptions options;
  add_input_shape(options, "x=2x3");
  CHECK_THROWS_WITH(import_onnx(path, "", options),
                    Catch::Contains("If on a condition that is not a constant: 'flag' is the graph input 'flag'"));
  for (const auto& [value, kind] : {std::pair{"1", OpKind::relu}, std::pair{"0", OpKind::sigmoid}}) {
    ImportOptions frozen = options;
    add_input_value(frozen, std::string("flag=") + value);
    const OnnxImport imported = import_onnx(path, "", frozen);
    REQUIRE(imported.graph.ops.size() == 1);
    CHECK(imported.graph.ops[0].kind == kind);
    CHECK(imported.graph.tensors[imported.graph.outputs[0]].shape == std::vector<std::int64_t>{2, 3});
  }
  ImportOptions wrong_rank;
  add_input_shape(wrong_rank, "x=6");
  CHECK_THROWS_WITH(import_onnx(path, "", wrong_rank), Catch::Contains("declares 'x' of rank 2; give 2 dims"));
}

TEST_CASE("tensor files carry integer and bool elements, and the host refuses integers outside int32",
          "[onnx][types]") {
  TempDir dir;
  const TensorFile ids{"ids", {2, 2}, {1, -2, 2147483647, -2147483648.0}, onnx::TensorProto::INT64};
  const TensorFile mask{"mask", {3}, {1, 0, 1}, onnx::TensorProto::BOOL};
  for (const std::string extension : {".pb", ".npy"}) {
    for (const TensorFile& tensor : {ids, mask}) {
      const std::string path = (dir.path() / (tensor.name + extension)).string();
      write_tensor_file(path, tensor);
      const TensorFile back = read_tensor_file(path);
      CHECK(back.dims == tensor.dims);
      CHECK(back.values == tensor.values);
      CHECK(back.element_type == tensor.element_type);
    }
  }
  const std::vector<float> words = device_words(ids, DType::int32, "--input ids=ids.pb");
  CHECK(word_int(words[2]) == 2147483647);
  CHECK(word_int(words[3]) == -2147483647 - 1);
  CHECK(host_values(words, DType::int32) == ids.values);
  const TensorFile huge{"ids", {2}, {5, 3000000000.0}, onnx::TensorProto::INT64};
  CHECK_THROWS_WITH(device_words(huge, DType::int32, "--input ids=big.pb"),
                    Catch::Contains("--input ids=big.pb: element 1 is 3000000000, outside int32"));
  CHECK_THROWS_WITH(device_words(mask, DType::float32, "--input x=mask.pb"),
                    Catch::Contains("the file holds bool values but the tensor is float32 on the device"));
}

TEST_CASE("onnx import accepts a newer IR version whose opsets and operators it knows, and names what it does not",
          "[onnx][types]") {
  TempDir dir;
  ModelBuilder newer;
  newer.model.set_ir_version(onnx::IR_VERSION + 1);
  newer.input("x", {2, 3});
  newer.node("Relu", {"x"}, "y");
  newer.output("y", {2, 3});
  CHECK(import_onnx(newer.save(dir, "newer.onnx")).graph.ops.size() == 1);

  ModelBuilder unknown_op = newer;
  unknown_op.graph = unknown_op.model.mutable_graph();
  unknown_op.graph->mutable_node(0)->set_op_type("Relux");
  unknown_op.graph->mutable_node(0)->set_name("act");
  CHECK_THROWS_WITH(import_onnx(unknown_op.save(dir, "unknown.onnx")),
                    Catch::Contains("IR version " + std::to_string(onnx::IR_VERSION + 1) +
                                    " is newer than the ONNX checker's (" + std::to_string(onnx::IR_VERSION) +
                                    "), and node 'act' (Relux) has no operator of that name at opset 13"));
  ModelBuilder unknown_opset = newer;
  unknown_opset.graph = unknown_opset.model.mutable_graph();
  unknown_opset.opset(99);
  CHECK_THROWS_WITH(import_onnx(unknown_opset.save(dir, "opset.onnx")),
                    Catch::Contains("and so is its opset 99 of domain 'ai.onnx'"));
}

namespace {

/// An LSTM (3 steps, batch 2, input 4, hidden 3) of x with constant W (values 0, 0.01, ...), R and B, writing
/// Y, Y_h and Y_c; `adjust` changes the node or the model before it is saved.
std::string lstm_model(const TempDir& dir, const std::string& file,
                       const std::function<void(ModelBuilder&, onnx::NodeProto*)>& adjust = {}) {
  ModelBuilder m;
  m.opset(14);
  m.input("x", {3, 2, 4});
  std::vector<float> w(12 * 4), r(12 * 3, 0.05f), b(24, 0.1f);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i);
  m.initializer("W", {1, 12, 4}, w);
  m.initializer("R", {1, 12, 3}, r);
  m.initializer("B", {1, 24}, b);
  onnx::NodeProto* lstm = m.node("LSTM", {"x", "W", "R", "B"}, "Y", "lstm");
  lstm->add_output("Y_h");
  lstm->add_output("Y_c");
  int_attribute(lstm, "hidden_size", 3);
  m.output("Y", {3, 1, 2, 3});
  m.output("Y_h", {1, 2, 3});
  m.output("Y_c", {1, 2, 3});
  if (adjust) adjust(m, lstm);
  return m.save(dir, file);
}

}  // namespace

TEST_CASE("onnx import unrolls an LSTM: one input projection for every step, then a product by R^T per step",
          "[onnx][recurrent]") {
  TempDir dir;
  const OnnxImport imported = import_onnx(lstm_model(dir, "lstm.onnx"));
  const Graph& graph = imported.graph;
  std::vector<const Op*> products;
  for (const Op& op : graph.ops)
    if (op.kind == OpKind::matmul) products.push_back(&op);
  // The first step starts from zero states: no product by R^T.
  REQUIRE(products.size() == 3);
  const Tensor& projection = graph.tensors[products[0]->inputs[1]];
  CHECK(graph.tensors[products[0]->inputs[0]].shape == std::vector<std::int64_t>{6, 4});  // every step's rows
  CHECK(projection.shape == std::vector<std::int64_t>{4, 12});                            // W^T
  const std::vector<float>& wt = imported.weights.at(projection.name);
  CHECK(wt[1 * 12 + 5] == 0.01f * static_cast<float>(5 * 4 + 1));  // W[0][5][1]
  for (std::size_t i = 1; i < products.size(); ++i) {
    CHECK(graph.tensors[products[i]->inputs[0]].shape == std::vector<std::int64_t>{2, 3});   // the state
    CHECK(graph.tensors[products[i]->inputs[1]].shape == std::vector<std::int64_t>{3, 12});  // R^T
  }
  REQUIRE(imported.outputs.size() == 3);
  CHECK(imported.outputs[0].dims == std::vector<std::int64_t>{3, 1, 2, 3});
  CHECK(tensor_named(graph, "Y").elements() == 18);
  CHECK(tensor_named(graph, "Y_h").elements() == 6);
  CHECK(tensor_named(graph, "Y_c").elements() == 6);
}

TEST_CASE("onnx import refuses a recurrent layer it cannot unroll, naming the node, the input and the fix",
          "[onnx][recurrent]") {
  TempDir dir;
  // W as a graph input: the conformance runner (and a user) freezes it by --input-value.
  const std::string computed_w = lstm_model(dir, "computed-w.onnx", [](ModelBuilder& m, onnx::NodeProto*) {
    m.graph->mutable_initializer()->DeleteSubrange(0, 1);
    m.input("W", {1, 12, 4});
  });
  CHECK_THROWS_WITH(import_onnx(computed_w),
                    Catch::Contains("node 'lstm' (LSTM): not supported: LSTM with W 'W' computed at run time") &&
                        Catch::Contains("freeze it with --input-value W=VALUES"));
  const std::string shorter = lstm_model(dir, "lengths.onnx", [](ModelBuilder& m, onnx::NodeProto* lstm) {
    auto* lengths = m.graph->add_initializer();
    lengths->set_name("lengths");
    lengths->set_data_type(onnx::TensorProto::INT32);
    lengths->add_dims(2);
    lengths->add_int32_data(3);
    lengths->add_int32_data(2);
    lstm->add_input("lengths");
  });
  CHECK_THROWS_WITH(import_onnx(shorter), Catch::Contains("not supported: sequence_lens [3, 2] with a length other "
                                                          "than seq_length 3"));
  const std::string affine = lstm_model(dir, "affine.onnx", [](ModelBuilder&, onnx::NodeProto* lstm) {
    auto* activations = lstm->add_attribute();
    activations->set_name("activations");
    activations->set_type(onnx::AttributeProto::STRINGS);
    for (const char* name : {"Sigmoid", "Affine", "Tanh"}) activations->add_strings(name);
  });
  CHECK_THROWS_WITH(import_onnx(affine), Catch::Contains("not supported: the activation 'Affine' (supported: Elu, "
                                                         "HardSigmoid, LeakyRelu"));
  // hidden_size 4 with R of hidden size 3: malformed, refused before any value is read.
  const std::string mismatch = lstm_model(dir, "hidden.onnx", [](ModelBuilder& m, onnx::NodeProto* lstm) {
    lstm->mutable_attribute(0)->set_i(4);
    for (int i = 0; i < 3; ++i) {
      auto* shape = m.graph->mutable_output(i)->mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->mutable_dim(shape->dim_size() - 1)->set_dim_value(4);
    }
  });
  CHECK_THROWS_WITH(import_onnx(mismatch), Catch::Contains("node 'lstm' (LSTM): W is [1, 12, 4]; with 1 "
                                                           "direction(s), hidden_size 4 and input size 4 it must be "
                                                           "[1, 16, 4]"));
}

TEST_CASE("onnx import makes a Gather at computed indices a lookup of rows, and refuses other axes by name",
          "[onnx][embedding]") {
  TempDir dir;
  ModelBuilder model;
  model.input("ids", {2, 3});
  set_type(model.graph->mutable_input(0), onnx::TensorProto::INT64);
  std::vector<float> table(5 * 4);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i);
  model.initializer("table", {5, 4}, table);
  model.node("Gather", {"table", "ids"}, "rows");
  model.output("rows", {2, 3, 4});
  const OnnxImport imported = import_onnx(model.save(dir, "embedding.onnx"));
  const Graph& g = imported.graph;
  REQUIRE(g.ops.size() == 1);
  const Op& lookup = g.ops[0];
  CHECK(lookup.kind == OpKind::embedding);
  CHECK(g.tensors[lookup.inputs[0]].kind == TensorKind::weight);
  CHECK(g.tensors[lookup.inputs[0]].shape == std::vector<std::int64_t>{5, 4});
  CHECK(g.tensors[lookup.inputs[1]].dtype == DType::int32);
  CHECK(g.tensors[lookup.output].shape == std::vector<std::int64_t>{6, 4});  // [2, 3, 4] as [2 * 3, 4]
  CHECK(imported.weights.at("table").at(7) == 7.0f);
  REQUIRE(imported.outputs.size() == 1);
  CHECK(imported.outputs[0].dims == std::vector<std::int64_t>{2, 3, 4});
  CHECK(check_graph(g).empty());

  // A data input of any rank is a table of its rows: [5, 2, 2] looks up rows of 4.
  ModelBuilder cube;
  cube.input("data", {5, 2, 2});
  cube.input("ids", {3});
  set_type(cube.graph->mutable_input(1), onnx::TensorProto::INT64);
  cube.node("Gather", {"data", "ids"}, "picked");
  cube.output("picked", {3, 2, 2});
  const Graph cubes = import_onnx(cube.save(dir, "cube.onnx")).graph;
  REQUIRE_FALSE(cubes.ops.empty());
  CHECK(cubes.ops[0].kind == OpKind::embedding);
  CHECK(cubes.tensors[cubes.ops[0].inputs[0]].shape == std::vector<std::int64_t>{5, 4});

  // Along another axis: a one-hot pick (an equal, a where and a sum over the axis' positions).
  ModelBuilder columns;
  columns.input("ids", {2});
  set_type(columns.graph->mutable_input(0), onnx::TensorProto::INT64);
  columns.initializer("table", {5, 4}, table);
  int_attribute(columns.node("Gather", {"table", "ids"}, "cols"), "axis", 1);
  columns.output("cols", {5, 2});
  const Graph picked = import_onnx(columns.save(dir, "columns.onnx")).graph;
  const auto has = [&](OpKind kind) {
    return std::any_of(picked.ops.begin(), picked.ops.end(), [&](const Op& op) { return op.kind == kind; });
  };
  CHECK_FALSE(has(OpKind::embedding));
  CHECK(has(OpKind::equal));
  CHECK(has(OpKind::where));
  CHECK(check_graph(picked).empty());
}
