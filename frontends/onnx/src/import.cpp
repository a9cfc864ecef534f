// ONNX import: read, check, infer shapes, fold constants, and map the nodes onto the Graph IR.
#include "tessera/onnx/import.hpp"

#include <fmt/format.h>
#include <onnx/checker.h>
#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <array>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "constants.hpp"
#include "movement.hpp"
#include "recurrent.hpp"
#include "tessera/codelets.hpp"
#include "tessera/onnx/tensor_file.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/log.hpp"

namespace fs = std::filesystem;

namespace tessera::onnx_import {

const std::vector<std::string>& supported_operators() {
  // clang-format off
  static const std::vector<std::string> names = {
      "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Pow", "Softmax",
      "LayerNormalization", "ReduceMean", "ReduceSum", "Identity", "Flatten", "Reshape", "Squeeze", "Unsqueeze",
      "Transpose", "Slice", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
      "BatchNormalization", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Exp", "Log", "Neg", "Abs",
      "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Softplus", "Softsign", "Elu", "Selu", "Celu",
      "ThresholdedRelu", "Mish", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsInf",
      "IsNaN", "PRelu", "Max", "Min", "Sum", "Mean", "ReduceMax", "ReduceMin", "ReduceProd",
      "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "LogSoftmax",
      "Mod", "InstanceNormalization", "Hardmax", "CumSum", "OneHot", "EyeLike", "Concat", "Split", "Pad", "Gather", "GatherElements", "Trilu", "ArgMax", "ArgMin", "Dropout",
      "Expand", "Tile", "Resize", "Upsample", "DepthToSpace", "SpaceToDepth",
      // Tensor types (docs/onnx.md): comparisons, logic, Where, casts, and If on a constant condition.
      "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor", "Not", "Where", "Cast",
      "CastLike", "If",
      // Recurrent layers, unrolled over their static sequence length (docs/onnx.md).
      "LSTM", "GRU", "RNN"};
  // clang-format on
  return names;
}

const std::vector<std::string>& folded_operators() {
  static const std::vector<std::string> names = {"Constant",
                                                 "Identity",
                                                 "Shape",
                                                 "Size",
                                                 "Gather",
                                                 "Unsqueeze",
                                                 "Squeeze",
                                                 "Concat",
                                                 "Slice",
                                                 "Cast",
                                                 "Reshape",
                                                 "Flatten",
                                                 "Transpose",
                                                 "Add",
                                                 "Sub",
                                                 "Mul",
                                                 "Div",
                                                 "Neg",
                                                 "ConstantOfShape",
                                                 "Equal",
                                                 "Greater",
                                                 "GreaterOrEqual",
                                                 "Less",
                                                 "LessOrEqual",
                                                 "And",
                                                 "Or",
                                                 "Xor",
                                                 "Not",
                                                 "Where",
                                                 "Range"};
  return names;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) != 1)
    throw Error("OpenSSL failed to compute a sha256");
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

bool is_onnx_model(const std::string& path) {
  if (fs::path(path).extension() == ".onnx") return true;
  // Only a regular file is peeked at: a FIFO would block here (the reader then refuses it by name).
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char first = 0;
  return in.get(first) && first == 0x08;
}

Graph load_any_model(const std::string& path, const ImportOptions& options) {
  if (!is_onnx_model(path)) {
    if (!options.texts.empty())
      throw Error(
          fmt::format("{}: {} applies to ONNX models; a YAML model's inputs have fixed shapes and seeded values", path,
                      options.texts.front()));
    return load_model(path);
  }
  OnnxImport imported = import_onnx(path, "", options);
  logger("tessera.build")
      ->info(
          "imported onnx model path={} opset={} sha256={} tensors={} operations={} weights={} folded_nodes={} "
          "frozen_inputs={}",
          path, imported.opset, imported.graph.source_sha256, imported.graph.tensors.size(), imported.graph.ops.size(),
          imported.weights.size(), imported.folded_nodes, imported.frozen_inputs);
  return std::move(imported.graph);
}

namespace {

using onnx::TensorProto;

/// A value computed on the device: an IR tensor (or a graph input not declared yet) seen
/// with these ONNX dims. The IR keeps rank-2 views: [product of the leading dims, last dim].
struct Computed {
  std::int64_t tensor = -1;  ///< IR tensor index; -1 while `input` is not declared
  std::string input;         ///< the graph input it is, possibly reshaped
  Dims dims;
  /// A feature map [N, C, spatial...] laid out [N * spatial, C] (a row per pixel, as conv
  /// and pooling read and write it) instead of row-major.
  bool channels_last = false;
};

/// The product of a feature map's spatial dims (those after N and C).
std::int64_t spatial_size(const Dims& dims) {
  std::int64_t size = 1;
  for (std::size_t i = 2; i < dims.size(); ++i) size *= dims[i];
  return size;
}

std::vector<std::int64_t> ir_shape(const Dims& dims) {
  if (dims.empty()) return {1};
  if (dims.size() == 1) return {dims[0]};
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  return {rows, dims.back()};
}

/// ONNX's messages span lines; a diagnostic is one.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

std::string dims_text(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

class Importer {
public:
  Importer(std::string path, onnx::ModelProto& model, const ImportOptions& options)
      : path_(std::move(path)), model_(model), options_(options) {}

  OnnxImport run() {
    const onnx::GraphProto& graph = model_.graph();
    for (const auto& opset : model_.opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") result_.opset = opset.version();
    graph_.name = graph.name().empty() ? fs::path(path_).stem().string() : graph.name();
    // Each initializer's data goes once read: a 340 MB model would otherwise be held twice more.
    for (TensorProto& initializer : *model_.mutable_graph()->mutable_initializer()) {
      constants_[initializer.name()] =
          read_tensor(initializer, fmt::format("{}: initializer '{}'", path_, initializer.name()));
      initializer.clear_raw_data();
      initializer.clear_float_data();
      initializer.clear_double_data();
      initializer.clear_int32_data();
      initializer.clear_int64_data();
    }
    check_option_names(graph);
    for (const onnx::ValueInfoProto& input : graph.input()) {
      if (constants_.count(input.name())) continue;  // an initializer listed as an input: a weight
      if (auto frozen = options_.input_values.find(input.name()); frozen != options_.input_values.end()) {
        constants_[input.name()] = frozen_input(input, frozen->second);
        const Constant& value = constants_.at(input.name());
        result_.frozen.push_back({{input.name(), value.dims, value.dtype}, value.values});
        continue;
      }
      int element_type = 0;
      DType dtype = DType::float32;
      Dims dims = value_dims(input, "input", element_type, dtype);
      result_.inputs.push_back({input.name(), dims, element_type});
      input_dtypes_[input.name()] = dtype;
      computed_[input.name()] = Computed{-1, input.name(), dims};
    }
    for (const onnx::NodeProto& node : graph.node())
      for (const std::string& input : node.input()) ++readers_[input];
    for (const onnx::ValueInfoProto& output : graph.output()) ++readers_[output.name()];
    // A constant (float64 here) goes once its last reader is imported: a 340 MB model's weights
    // would otherwise be held as doubles, twice their bytes, beside the float32 weights made of
    // them. Not with subgraphs (If, Loop), whose nodes read outer values no input names.
    std::map<std::string, std::uint32_t> unread = readers_;
    const bool subgraphs = std::any_of(graph.node().begin(), graph.node().end(), [](const onnx::NodeProto& node) {
      return std::any_of(node.attribute().begin(), node.attribute().end(),
                         [](const onnx::AttributeProto& a) { return a.has_g() || a.graphs_size() > 0; });
    });
    for (int i = 0; i < graph.node_size(); ++i) {
      import_node(graph.node(i), i);
      if (subgraphs) continue;
      for (const std::string& input : graph.node(i).input())
        if (auto left = unread.find(input); left != unread.end() && --left->second == 0) constants_.erase(input);
    }
    // Outputs first: an output that is a view of an input copies it out in the view's layout.
    for (const onnx::ValueInfoProto& output : graph.output()) import_output(output);
    // Inputs no op reads stay part of the interface, in their own layout.
    for (const OnnxValue& input : result_.inputs)
      if (!declared_.count(input.name)) declare_input(input.name, ir_shape(input.dims));
    prune_unread_ops();
    if (graph_.ops.empty()) throw Error(path_ + ": the model computes nothing on the device (no supported operator)");
    return std::move(result_);
  }

private:
  /// The device type of a graph input's or output's ONNX element type: float32 for the float
  /// types (the host converts double and float16), int32 for the integer types (the host
  /// range-checks values), bool; nullopt for the others.
  static std::optional<DType> device_dtype(int element_type) {
    switch (element_type) {
      case TensorProto::FLOAT:
      case TensorProto::DOUBLE:
      case TensorProto::FLOAT16:
        return DType::float32;
      case TensorProto::INT64:
      case TensorProto::INT32:
      case TensorProto::INT16:
      case TensorProto::INT8:
      case TensorProto::UINT64:
      case TensorProto::UINT32:
      case TensorProto::UINT16:
      case TensorProto::UINT8:
        return DType::int32;
      case TensorProto::BOOL:
        return DType::boolean;
      default:
        return std::nullopt;
    }
  }

  /// Dims and types of a graph input or output. A symbolic or missing dim is a dynamic shape: an
  /// input's is fixed by --input-shape, an output's is what the graph computes (-1 here).
  Dims value_dims(const onnx::ValueInfoProto& value, const char* role, int& element_type, DType& dtype) {
    const auto& type = value.type();
    if (!type.has_tensor_type())
      throw Error(
          fmt::format("{}: graph {} '{}': not supported: a value that is not a tensor (tensors of float, "
                      "double, float16, integer and bool elements are supported)",
                      path_, role, value.name()));
    element_type = type.tensor_type().elem_type();
    const std::optional<DType> device = device_dtype(element_type);
    if (!device)
      throw Error(
          fmt::format("{}: graph {} '{}': not supported: element type {} (float, double, float16, int8 to "
                      "int64, uint8 to uint64 and bool inputs and outputs are supported)",
                      path_, role, value.name(), dtype_text(element_type)));
    dtype = *device;
    const bool input = std::string(role) == "input";
    if (auto fixed = options_.input_shapes.find(value.name()); input && fixed != options_.input_shapes.end())
      return fixed_dims(value, fixed->second);
    if (!type.tensor_type().has_shape()) {
      if (!input) return {};  // the graph's computation gives it
      throw Error(
          fmt::format("{}: graph {} '{}': not supported: a tensor without a shape (give its dims with "
                      "--input-shape {}=DIMS)",
                      path_, role, value.name(), value.name()));
    }
    Dims dims;
    for (const auto& dim : type.tensor_type().shape().dim()) {
      if (!dim.has_dim_value() || dim.dim_value() <= 0) {
        if (!input && !dim.has_dim_value()) {
          dims.push_back(-1);
          continue;
        }
        if (input && dim.has_dim_value() && dim.dim_value() == 0)
          throw Error(
              fmt::format("{}: graph input '{}': not supported: an empty dim (no values to stream; if an op "
                          "takes it as a constant, freeze it with --input-value {}=VALUES)",
                          path_, value.name(), value.name()));
        throw Error(fmt::format(
            "{}: graph {} '{}': not supported: a dynamic or empty dim{} (static positive dims are supported; fix "
            "them with --input-shape {}=DIMS, or export with fixed sizes)",
            path_, role, value.name(), dim.has_dim_param() ? " '" + dim.dim_param() + "'" : "", value.name()));
      }
      dims.push_back(dim.dim_value());
    }
    if (std::find(dims.begin(), dims.end(), -1) == dims.end())
      element_count(dims, fmt::format("{}: graph {} '{}'", path_, role, value.name()));
    return dims;
  }

  /// The dims --input-shape gives an input: the declared rank, each static dim kept.
  Dims fixed_dims(const onnx::ValueInfoProto& value, const Dims& given) {
    const auto& type = value.type().tensor_type();
    const std::string option = fmt::format("--input-shape {}={}", value.name(), fmt::join(given, "x"));
    if (type.has_shape()) {
      if (type.shape().dim_size() != static_cast<int>(given.size()))
        throw Error(fmt::format("{}: {}: the model declares '{}' of rank {}; give {} dims", path_, option, value.name(),
                                type.shape().dim_size(), type.shape().dim_size()));
      for (int i = 0; i < type.shape().dim_size(); ++i)
        if (type.shape().dim(i).has_dim_value() &&
            type.shape().dim(i).dim_value() != given[static_cast<std::size_t>(i)])
          throw Error(fmt::format("{}: {}: dim {} of '{}' is {} in the model", path_, option, i, value.name(),
                                  type.shape().dim(i).dim_value()));
    }
    for (std::int64_t d : given)
      if (d <= 0) throw Error(fmt::format("{}: {}: dims must be positive", path_, option));
    element_count(given, path_ + ": " + option);
    return given;
  }

  /// A graph input frozen by --input-value: a constant of its declared type and dims (dynamic
  /// dims from --input-shape; a dynamic rank-1 input takes the number of values given).
  Constant frozen_input(const onnx::ValueInfoProto& value, const std::vector<double>& values) {
    const std::string option = fmt::format("--input-value {}", value.name());
    if (!value.type().has_tensor_type())
      throw Error(fmt::format("{}: {}: '{}' is not a tensor", path_, option, value.name()));
    const auto& type = value.type().tensor_type();
    Constant c;
    c.dtype = type.elem_type();
    if (raw_bytes(c.dtype) == 0)
      throw Error(fmt::format("{}: {}: '{}' holds {} elements, which cannot be frozen", path_, option, value.name(),
                              dtype_text(c.dtype)));
    if (auto fixed = options_.input_shapes.find(value.name()); fixed != options_.input_shapes.end()) {
      c.dims = fixed_dims(value, fixed->second);
    } else if (!type.has_shape()) {
      c.dims = {static_cast<std::int64_t>(values.size())};
    } else {
      for (const auto& dim : type.shape().dim()) {
        if (dim.has_dim_value() && dim.dim_value() >= 0) {
          c.dims.push_back(dim.dim_value());
        } else if (type.shape().dim_size() == 1) {
          c.dims.push_back(static_cast<std::int64_t>(values.size()));
        } else {
          throw Error(fmt::format("{}: {}: '{}' has a dynamic dim; give its dims with --input-shape {}=DIMS", path_,
                                  option, value.name(), value.name()));
        }
      }
    }
    if (element_count(c.dims, path_ + ": " + option) != static_cast<std::int64_t>(values.size()))
      throw Error(fmt::format("{}: {}: '{}' is {} ({} values), {} given", path_, option, value.name(),
                              dims_text(c.dims), element_count(c.dims, path_), values.size()));
    for (double v : values) c.values.push_back(round_to(c.dtype, v));
    ++result_.frozen_inputs;
    return c;
  }

  /// An --input-shape or --input-value naming no graph input is a mistake in the command line.
  void check_option_names(const onnx::GraphProto& graph) {
    std::set<std::string> inputs;
    for (const onnx::ValueInfoProto& input : graph.input())
      if (!constants_.count(input.name())) inputs.insert(input.name());
    auto check = [&](const std::string& name, const char* option) {
      if (!inputs.count(name))
        throw Error(fmt::format("{}: {} {}: the model has no graph input '{}'; its inputs: {}", path_, option, name,
                                name, fmt::join(inputs, ", ")));
    };
    for (const auto& [name, dims] : options_.input_shapes) check(name, "--input-shape");
    for (const auto& [name, values] : options_.input_values) check(name, "--input-value");
  }

  /// The element type the device holds `value` in.
  DType dtype_of(const Computed& value) const {
    if (value.tensor >= 0) return graph_.tensors[static_cast<std::size_t>(value.tensor)].dtype;
    auto found = input_dtypes_.find(value.input);
    return found == input_dtypes_.end() ? DType::float32 : found->second;
  }

  /// Why `name`, which must be a constant, is not: a graph input (or a view of one) can be frozen
  /// with --input-value; anything else is computed.
  std::string not_constant(const std::string& name) const {
    auto found = computed_.find(name);
    if (found != computed_.end() && found->second.tensor < 0)
      return fmt::format("'{}' is the graph input '{}', known only at run time; freeze it with --input-value {}=VALUES",
                         name, found->second.input, found->second.input);
    return fmt::format("'{}' is computed at run time", name);
  }

  std::string node_label(const onnx::NodeProto& node, int index) const {
    return fmt::format(
        "{}: node '{}' ({})", path_,
        node.name().empty() ? fmt::format("#{} -> {}", index, node.output_size() ? node.output(0) : "") : node.name(),
        node.op_type());
  }

  /// An operator the importer maps itself (or folds), rather than through an ONNX function body.
  static bool is_native(const std::string& op) {
    const std::vector<std::string>& names = supported_operators();
    return is_foldable(op) || std::find(names.begin(), names.end(), op) != names.end();
  }

  [[noreturn]] void unsupported(const std::string& where, const std::string& why) const {
    throw Error(fmt::format("{}: not supported: {}; supported operators: {} (and, on constant inputs, {})", where, why,
                            fmt::join(supported_operators(), ", "), fmt::join(folded_operators(), ", ")));
  }

  std::string unique_name(const std::string& wanted) {
    std::string name = wanted;
    for (int n = 2; names_.count(name); ++n) name = fmt::format("{}.{}", wanted, n);
    names_.insert(name);
    return name;
  }

  std::uint32_t declare_input(const std::string& name, std::vector<std::int64_t> shape) {
    Tensor tensor;
    tensor.name = name;
    names_.insert(name);
    tensor.shape = std::move(shape);
    tensor.kind = TensorKind::input;
    if (auto found = input_dtypes_.find(name); found != input_dtypes_.end()) tensor.dtype = found->second;
    const auto index = static_cast<std::uint32_t>(graph_.tensors.size());
    graph_.tensors.push_back(std::move(tensor));
    declared_[name] = index;
    return index;
  }

  /// The IR tensor of `value` in the layout `shape`: a graph input is declared in it the first
  /// time; afterwards, and for computed tensors, the layout must be the one it has.
  std::uint32_t tensor_as(const Computed& value, const std::vector<std::int64_t>& shape, const std::string& where) {
    std::int64_t index = value.tensor;
    if (index < 0) {
      auto declared = declared_.find(value.input);
      if (declared == declared_.end()) return declare_input(value.input, shape);
      index = declared->second;
    }
    const Tensor& tensor = graph_.tensors[static_cast<std::size_t>(index)];
    // A row-major tensor read in another layout of the same elements (a Reshape that is not a
    // view): a gather of one run copies it into that layout.
    std::int64_t wanted = 1;
    for (std::int64_t d : shape) wanted *= d;
    if (tensor.shape != shape && !value.channels_last && tensor.elements() == wanted) {
      if (wanted <= kMaxFoldedElements) {  // composed with a gather that wrote the tensor, if one did
        std::vector<std::int64_t> identity(static_cast<std::size_t>(wanted));
        for (std::int64_t i = 0; i < wanted; ++i) identity[static_cast<std::size_t>(i)] = source_of(0, i);
        return add_gather({static_cast<std::uint32_t>(index)}, std::move(identity), shape, tensor.name + ".relayout",
                          node_index_, where);
      }
      Op relayout;
      relayout.kind = OpKind::gather;
      relayout.inputs = {static_cast<std::uint32_t>(index)};
      relayout.gather_shape = shape;
      relayout.gather_runs = {GatherRun{0, 0, 0, static_cast<std::uint64_t>(wanted), 1, 1, 0, 0}};
      return add_op(relayout, tensor.name + ".relayout", node_index_, where);
    }
    if (tensor.shape != shape)
      unsupported(where, fmt::format("'{}' is needed as {} here but is laid out as {} (a tensor keeps the layout "
                                     "it was computed in: a view of it in another, as a Reshape into heads leaves, is "
                                     "read only by a Transpose into or out of heads)",
                                     tensor.name, dims_text(shape), dims_text(tensor.shape)));
    return static_cast<std::uint32_t>(index);
  }

  /// The IR tensor of `value` in its own layout (row-major, or channels last for a feature map:
  /// elementwise ops read either).
  std::uint32_t tensor_of(const Computed& value, const std::string& where) {
    if (value.channels_last)
      return tensor_as(value, {value.dims.at(0) * spatial_size(value.dims), value.dims.at(1)}, where);
    return tensor_as(value, ir_shape(value.dims), where);
  }

  /// A weight tensor holding `values` in IR layout `shape`, stored as float16 when `half`; an
  /// int32 or bool weight holds words (int_word), as the device does.
  std::uint32_t add_weight(const std::string& wanted, std::vector<std::int64_t> shape,
                           const std::vector<double>& values, bool half, DType dtype = DType::float32) {
    Tensor tensor;
    tensor.name = unique_name(wanted);
    tensor.shape = std::move(shape);
    tensor.kind = TensorKind::weight;
    tensor.dtype = half ? DType::float16 : dtype;
    std::vector<float>& data = result_.weights[tensor.name];
    data.reserve(values.size());
    for (double v : values)
      data.push_back(is_integer_word(dtype) ? int_word(static_cast<std::int32_t>(v))
                     : half                 ? round_to_half(static_cast<float>(v))
                                            : static_cast<float>(v));
    const auto index = static_cast<std::uint32_t>(graph_.tensors.size());
    graph_.tensors.push_back(std::move(tensor));
    return index;
  }

  /// An IR op writing a new intermediate tensor named `output`; its shape and type are inferred
  /// (a cast's type is `cast_to`). An operand of a type the op does not take is refused.
  std::uint32_t add_op(Op op, const std::string& output, int node_index, const std::string& where,
                       DType cast_to = DType::float32) {
    op.place = {static_cast<std::uint32_t>(node_index + 1), 0};
    std::vector<std::int64_t> shape;
    if (std::string problem = infer_shape(graph_, op, shape); !problem.empty())
      throw Error(fmt::format("{}: internal error: the imported {} op does not type-check: {}", where,
                              op_kind_name(op.kind), problem));
    DType dtype = cast_to;
    if (std::string problem = infer_dtype(graph_, op, dtype); !problem.empty())
      unsupported(where, fmt::format("{} (tensor types: docs/onnx.md)", problem));
    Tensor tensor;
    tensor.name = unique_name(output);
    tensor.shape = shape;
    tensor.dtype = dtype;
    op.output = static_cast<std::uint32_t>(graph_.tensors.size());
    graph_.tensors.push_back(std::move(tensor));
    graph_.ops.push_back(std::move(op));
    return graph_.ops.back().output;
  }

  /// Weights are float32 on the device; float16 ones only where the IR reads halves.
  static bool keeps_half(const Constant& c, bool allowed) { return allowed && c.dtype == TensorProto::FLOAT16; }

  void check_float(const Constant& c, const std::string& name, const std::string& where) const {
    if (c.dtype != TensorProto::FLOAT && c.dtype != TensorProto::FLOAT16)
      unsupported(where, fmt::format("constant '{}' is {}; only float and float16 weights are supported", name,
                                     dtype_text(c.dtype)));
    for (std::int64_t d : c.dims)
      if (d == 0) unsupported(where, fmt::format("constant '{}' is empty", name));
  }

  void import_node(const onnx::NodeProto& node, int index) {
    node_index_ = index;
    const std::string where = node_label(node, index);
    if (!node.domain().empty() && node.domain() != "ai.onnx")
      unsupported(where, fmt::format("operators of domain '{}'", node.domain()));
    std::vector<const Constant*> constant_inputs;
    bool all_constant = true;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        constant_inputs.push_back(nullptr);
        continue;
      }
      auto found = constants_.find(name);
      constant_inputs.push_back(found == constants_.end() ? nullptr : &found->second);
      if (found == constants_.end()) {
        if (!computed_.count(name))
          throw Error(fmt::format("{}: input '{}' is not produced by any earlier node", where, name));
        all_constant = false;
      }
    }
    const std::string& op = node.op_type();
    if (op == "If") return import_if(node, index, where);
    if (all_constant && is_foldable(op)) {
      std::vector<Constant> outputs = fold_node(node, constant_inputs, result_.opset, where);
      for (std::size_t i = 0; i < outputs.size() && i < static_cast<std::size_t>(node.output_size()); ++i)
        constants_[node.output(static_cast<int>(i))] = std::move(outputs[i]);
      ++result_.folded_nodes;
      return;
    }
    if (op == "Dropout") return import_dropout(node, where);
    if (!is_native(op) && import_function(node, index)) return;
    // Operators of several outputs: their import functions compute every output they name.
    if (auto several = several_outputs().find(op); several != several_outputs().end())
      return (this->*several->second)(node, index, where);
    int outputs = node.output_size();
    while (outputs > 1 && node.output(outputs - 1).empty()) --outputs;  // absent optional outputs
    if (outputs != 1)
      unsupported(where, fmt::format("{} with {} outputs (only the first output of a node is computed{})", op, outputs,
                                     op == "LayerNormalization" ? "; Mean and InvStdDev are not" : ""));
    const std::string& output = node.output(0);
    auto computed = [&](int i) -> const Computed& { return computed_.at(node.input(i)); };
    auto is_computed = [&](int i) { return i < node.input_size() && computed_.count(node.input(i)) != 0; };

    if (op == "Shape" || op == "Size") {  // the dims of a computed value are static
      Constant dims{TensorProto::FLOAT, computed(0).dims, {}};
      dims.values.assign(static_cast<std::size_t>(element_count(dims.dims, where)), 0.0);
      std::vector<const Constant*> inputs{&dims};
      constants_[output] = std::move(fold_node(node, inputs, result_.opset, where).at(0));
      ++result_.folded_nodes;
      return;
    }
    if (op == "Identity") {
      computed_[output] = computed(0);
      return;
    }
    if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
      if (!is_computed(0)) unsupported(where, "a computed shape (the shape input must be a constant)");
      for (int i = 1; i < node.input_size(); ++i)
        if (!node.input(i).empty() && !constants_.count(node.input(i)))
          unsupported(where, fmt::format("a dynamic shape: {}", not_constant(node.input(i))));
      // The same folding on a stand-in of the right dims gives the new dims.
      Constant stand_in{TensorProto::FLOAT, computed(0).dims, {}};
      stand_in.values.assign(static_cast<std::size_t>(element_count(stand_in.dims, where)), 0.0);
      std::vector<const Constant*> inputs = constant_inputs;
      inputs[0] = &stand_in;
      // A view: the IR tensor keeps its layout, which the next op must be able to read (a
      // split into heads is read by the Transpose that follows it).
      Computed value = computed(0);
      value.dims = fold_node(node, inputs, result_.opset, where).at(0).dims;
      if (value.channels_last) value = feature_map_view(computed(0), value.dims, where);
      computed_[output] = value;
      return;
    }
    if (op == "Slice") return import_slice(node, constant_inputs, index, where);
    // At computed indices: rows of a table looked up (axis 0), else a one-hot pick.
    if (op == "Gather" && !constants_.count(node.input(1)) && gather_axis(node, where) == 0)
      return import_embedding(node, index, where);
    if ((op == "Gather" || op == "GatherElements") && !constants_.count(node.input(1)))
      return import_one_hot_gather(node, index, where);
    if (op == "Concat" || op == "Gather" || op == "GatherElements") return import_folded_movement(node, index, where);
    if (op == "Trilu") return import_trilu(node, index, where);
    if (op == "Hardmax") return import_hardmax(node, index, where);
    if (op == "CumSum") return import_cumsum(node, index, where);
    if (op == "OneHot") return import_one_hot(node, index, where);
    if (op == "EyeLike") {  // the input's dims alone decide it: a constant
      const Dims& dims = is_computed(0) ? computed(0).dims : constants_.at(node.input(0)).dims;
      if (dims.size() != 2)
        throw Error(fmt::format("{}: EyeLike of {} (it takes 2-D tensors)", where, dims_text(dims)));
      const int type = static_cast<int>(int_attribute(node, "dtype", onnx_type_of(node.input(0))));
      const std::int64_t k = int_attribute(node, "k", 0);
      Constant eye{type, dims, std::vector<double>(static_cast<std::size_t>(element_count(dims, where)), 0.0)};
      for (std::int64_t r = 0; r < dims[0]; ++r)
        if (r + k >= 0 && r + k < dims[1]) eye.values[static_cast<std::size_t>(r * dims[1] + r + k)] = 1.0;
      constants_[output] = std::move(eye);
      ++result_.folded_nodes;
      return;
    }
    if (op == "InstanceNormalization") return import_instance_norm(node, index, where);
    if (op == "ArgMax" || op == "ArgMin") return import_arg_extreme(node, index, where);
    if (op == "Pad") return import_pad(node, index, where);
    if (op == "Tile" || op == "Expand") return import_tile_or_expand(node, index, where);
    if (op == "DepthToSpace" || op == "SpaceToDepth") return import_depth_space(node, index, where);
    if (op == "Resize" || op == "Upsample") return import_resize(node, index, where);  // Upsample: opset 9's Resize
    if (op == "Conv") return import_conv(node, index, where);
    if (op == "ConvTranspose") return import_conv_transpose(node, index, where);
    if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
      return import_pool(node, index, where);
    if (op == "BatchNormalization") return import_batch_norm(node, index, where);
    if (op == "Clip") return import_clip(node, index, where);
    if (op == "LeakyRelu" || op == "HardSigmoid" || op == "HardSwish") return import_activation(node, index, where);
    if (auto kind = unary_kind(op)) return import_unary(node, *kind, index, where);
    if (auto function = unary_function_of(op)) return import_unary_function(node, *function, index, where);
    if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") return import_variadic(node, index, where);
    if (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd" || op == "ReduceL1" || op == "ReduceL2" ||
        op == "ReduceLogSumExp" || op == "ReduceSumSquare" || op == "ReduceLogSum")
      return import_reduce(node, index, where);
    if (op == "Softmax" || op == "LogSoftmax") return import_softmax(node, index, where);
    if (op == "MatMul") return import_matmul(node, index, where);
    if (op == "Gemm") return import_gemm(node, index, where);
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "PRelu" || op == "Mod")
      return import_binary(node, index, where);
    if (op == "Equal" || op == "Greater" || op == "GreaterOrEqual" || op == "Less" || op == "LessOrEqual" ||
        op == "And" || op == "Or" || op == "Xor")
      return import_binary(node, index, where);
    if (op == "Where") return import_where(node, index, where);
    if (op == "Cast" || op == "CastLike") return import_cast(node, index, where);
    if (op == "ReduceMean" || op == "ReduceSum") return import_reduce(node, index, where);
    if (op == "LayerNormalization") return import_layer_norm(node, index, where);
    if (op == "Transpose") return import_transpose(node, index, where);
    if (is_foldable(op)) {
      // The sizes ConstantOfShape and Range take are what a user fixes at compile time: name the
      // graph input to freeze. Data (a Concat's, a Gather's) is not frozen: the device would then
      // compute nothing of it.
      if (op == "ConstantOfShape" || op == "Range")
        for (const std::string& name : node.input())
          if (!name.empty() && computed_.count(name) && computed_.at(name).tensor < 0)
            unsupported(where, fmt::format("{} of a computed tensor (it is folded only on constants): {}", op,
                                           not_constant(name)));
      unsupported(where, fmt::format("{} of a computed tensor (it is folded only on constants)", op));
    }
    unsupported(where, fmt::format("operator {}", op));
  }

  /// Transpose of a computed tensor. Moving only axes of size 1 is a view. Otherwise, with the
  /// axes of size 1 dropped and the rest seen as [A, B, C, D] (A fixed), the permutation is a
  /// product of two re-layouts: swapping B and C (split_heads from the [A*B, C*D] a Reshape left,
  /// merge_heads from [A*B*C, D]) and swapping C and D (a batched transpose).
  void import_transpose(const onnx::NodeProto& node, int index, const std::string& where) {
    const Computed& x = computed_.at(node.input(0));
    const std::size_t rank = x.dims.size();
    std::vector<std::int64_t> perm = ints_attribute(node, "perm");
    if (perm.empty())
      for (std::size_t i = rank; i-- > 0;) perm.push_back(static_cast<std::int64_t>(i));
    if (perm.size() != rank || !std::is_permutation(perm.begin(), perm.end(), identity_order(rank).begin()))
      unsupported(where, fmt::format("Transpose by perm [{}] of a rank-{} tensor", fmt::join(perm, ", "), rank));
    Dims dims;
    std::vector<std::int64_t> kept;  // the axes above 1, in their new order
    for (std::int64_t axis : perm) {
      dims.push_back(x.dims[static_cast<std::size_t>(axis)]);
      if (dims.back() != 1) kept.push_back(axis);
    }
    // A transpose of a gather's result joins that gather (each element moved once).
    if (x.tensor >= 0 && gather_producer(static_cast<std::uint32_t>(x.tensor)) &&
        !std::is_sorted(kept.begin(), kept.end()))
      return import_folded_movement(node, index, where);
    if (std::is_sorted(kept.begin(), kept.end())) {  // the elements keep their order
      Computed view = x;
      view.dims = dims;
      computed_[node.output(0)] = view;
      return;
    }
    // [A, B, C, D]: the axes above 1 in their old order, ones in front; `order` their new order.
    std::vector<std::int64_t> old_axes = kept;
    std::sort(old_axes.begin(), old_axes.end());
    // Beyond heads and batched transposes (the first axis moves, or more than four axes): a gather.
    if (old_axes.size() > 4) return import_folded_movement(node, index, where);
    const std::size_t pad = 4 - old_axes.size();
    std::array<std::int64_t, 4> shape{1, 1, 1, 1}, order{0, 1, 2, 3};
    for (std::size_t i = 0; i < old_axes.size(); ++i) {
      shape[pad + i] = x.dims[static_cast<std::size_t>(old_axes[i])];
      order[pad + i] = static_cast<std::int64_t>(
          pad + static_cast<std::size_t>(std::find(old_axes.begin(), old_axes.end(), kept[i]) - old_axes.begin()));
    }
    const std::vector<char> steps = relayout_steps(order);
    if (steps.empty()) return import_folded_movement(node, index, where);
    Computed value = x;
    value.dims = {shape[0], shape[1], shape[2], shape[3]};
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string name = i + 1 == steps.size() ? node.output(0) : fmt::format("{}.{}", node.output(0), i);
      const auto [a, b, c, d] = std::array{value.dims[0], value.dims[1], value.dims[2], value.dims[3]};
      Op op;
      if (steps[i] == 'T') {  // [A, B, C, D] to [A, B, D, C]
        op.kind = OpKind::transpose;
        op.batch = static_cast<std::uint32_t>(a * b);
        op.inputs = {tensor_as(value, {a * b * c, d}, where)};
        value = Computed{add_op(op, name, index, where), "", {a, b, d, c}};
        continue;
      }
      // [A, B, C, D] to [A, C, B, D]: B tokens of C heads, or B heads of C tokens.
      const std::vector<std::int64_t> merged{a * b, c * d}, by_heads{a * b * c, d};
      const bool from_merged =
          value.tensor < 0 ? !declared_.count(value.input) || layout_of(value) == merged : layout_of(value) == merged;
      op.kind = from_merged ? OpKind::split_heads : OpKind::merge_heads;
      op.batch = static_cast<std::uint32_t>(a);
      op.heads = static_cast<std::uint32_t>(from_merged ? c : b);
      op.inputs = {tensor_as(value, from_merged ? merged : by_heads, where)};
      value = Computed{add_op(op, name, index, where), "", {a, c, b, d}};
    }
    value.dims = dims;
    computed_[node.output(0)] = value;
  }

  // ---- Data movement: Concat, Split, Slice, Pad, Gather, Expand, Tile, Resize, DepthToSpace, SpaceToDepth and
  // Transpose of computed tensors, each one gather op (folded when every data input is a constant).

  /// A data input of a data-movement node: a computed value or a constant.
  struct MovedInput {
    std::string name;
    const Computed* value = nullptr;
    const Constant* constant = nullptr;
    const Dims& dims() const { return value ? value->dims : constant->dims; }
  };

  MovedInput moved_input(const onnx::NodeProto& node, int i) const {
    const std::string& name = node.input(i);
    if (auto c = constants_.find(name); c != constants_.end()) return {name, nullptr, &c->second};
    return {name, &computed_.at(name), nullptr};
  }

  /// A constant input (`role` names it in errors) as integers.
  std::vector<std::int64_t> constant_ints(const onnx::NodeProto& node, int i, const char* role,
                                          const std::string& where) const {
    auto found = constants_.find(node.input(i));
    if (found == constants_.end())
      unsupported(where, fmt::format("{} with {} that is not a constant: {}", node.op_type(), role,
                                     not_constant(node.input(i))));
    check_values(found->second, where);
    std::vector<std::int64_t> ints;
    for (double v : found->second.values) ints.push_back(static_cast<std::int64_t>(v));
    return ints;
  }

  static std::string string_attribute(const onnx::NodeProto& node, const char* name, const std::string& fallback) {
    const onnx::AttributeProto* attribute = find_attribute(node, name);
    return attribute ? attribute->s() : fallback;
  }

  /// A stand-in of `dims` whose elements hold their own source (data input `slot`, own index),
  /// for folding a node through constants.cpp to learn where its outputs come from.
  static Constant stand_in(const Dims& dims, std::int64_t slot, const std::string& where) {
    Constant c{TensorProto::FLOAT, dims, {}};
    const std::int64_t count = element_count(dims, where);
    if (count > kMaxFoldedElements)
      throw Error(fmt::format("{}: not supported: moving the {} elements of {} in one node (at most {})", where, count,
                              dims_text(dims), kMaxFoldedElements));
    c.values.resize(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) c.values[static_cast<std::size_t>(i)] = double(source_of(slot, i));
    return c;
  }

  /// The element of `value`'s IR tensor holding its element `index` (row-major over its dims).
  static std::int64_t ir_index(const Computed& value, std::int64_t index) {
    if (!value.channels_last) return index;
    const std::int64_t channels = value.dims.at(1), spatial = spatial_size(value.dims);
    const std::int64_t image = index / (channels * spatial), rest = index % (channels * spatial);
    return (image * spatial + rest % spatial) * channels + rest / spatial;
  }

  /// Output `output` of node `index` computed by `movement` from `inputs`: folded when they are all
  /// constants, else one gather op (constant inputs become weights; a constant Pad's `fill` a
  /// weight as long as the longest run of padding, which its runs read).
  void emit_movement(const Movement& movement, const std::vector<MovedInput>& inputs, double fill,
                     const std::string& output, int index, const std::string& where) {
    if (element_count(movement.dims, where) == 0)
      unsupported(where, fmt::format("an empty output {} (tensors have positive dims)", dims_text(movement.dims)));
    const bool folds = std::all_of(inputs.begin(), inputs.end(), [](const MovedInput& in) { return in.constant; });
    if (folds) {
      Constant c{inputs.at(0).constant->dtype, movement.dims, {}};
      for (const MovedInput& in : inputs) check_values(*in.constant, where);
      c.values.reserve(movement.sources.size());
      for (std::int64_t source : movement.sources)
        c.values.push_back(source == kPadded
                               ? round_to(c.dtype, fill)
                               : inputs[static_cast<std::size_t>(source >> kSourceShift)]
                                     .constant->values[static_cast<std::size_t>(source & kSourceIndexMask)]);
      constants_[output] = std::move(c);
      ++result_.folded_nodes;
      return;
    }
    Op op;
    op.kind = OpKind::gather;
    for (const MovedInput& in : inputs) {
      if (in.value) {
        op.inputs.push_back(tensor_of(*in.value, where));
        continue;
      }
      check_float(*in.constant, in.name, where);
      op.inputs.push_back(add_weight(in.name, ir_shape(in.constant->dims), in.constant->values, false));
    }
    std::vector<std::int64_t> sources = movement.sources;
    std::int64_t longest = 0, stretch = 0;
    for (std::int64_t source : sources) longest = std::max(longest, stretch = source == kPadded ? stretch + 1 : 0);
    const auto fill_slot = static_cast<std::int64_t>(op.inputs.size());
    if (longest > 0)
      op.inputs.push_back(add_weight(output + ".pad_value", {longest},
                                     std::vector<double>(static_cast<std::size_t>(longest), fill), false));
    stretch = 0;
    for (std::int64_t& source : sources) {
      if (source == kPadded) {
        source = source_of(fill_slot, stretch++);
        continue;
      }
      stretch = 0;
      const MovedInput& in = inputs[static_cast<std::size_t>(source >> kSourceShift)];
      if (in.value) source = source_of(source >> kSourceShift, ir_index(*in.value, source & kSourceIndexMask));
    }
    const std::uint32_t tensor =
        add_gather(std::move(op.inputs), std::move(sources), ir_shape(movement.dims), output, index, where);
    computed_[output] = Computed{tensor, "", movement.dims};
  }

  /// The gather op that wrote IR tensor `tensor`, or null when another kind of op (or none) did.
  const Op* gather_producer(std::uint32_t tensor) const {
    for (auto op = graph_.ops.rbegin(); op != graph_.ops.rend(); ++op)
      if (op->output == tensor) return op->kind == OpKind::gather ? &*op : nullptr;
    return nullptr;
  }

  /// A gather op of `shape` whose element i is element `sources[i] & kSourceIndexMask` of IR tensor
  /// `inputs[sources[i] >> kSourceShift]`. An input another gather wrote is read through that
  /// gather's runs, from its own inputs: a chain of data movement (Pad, DepthToSpace, Slice, a
  /// re-layout) moves each element once, and the gathers it skips are pruned if nothing else reads them.
  std::uint32_t add_gather(std::vector<std::uint32_t> inputs, std::vector<std::int64_t> sources,
                           std::vector<std::int64_t> shape, const std::string& output, int index,
                           const std::string& where) {
    std::vector<std::vector<std::int64_t>> through(inputs.size());  // per slot: the producer's sources
    std::vector<const Op*> producers(inputs.size(), nullptr);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const Op* producer = gather_producer(inputs[i]);
      if (!producer || graph_.tensors[inputs[i]].elements() > kMaxFoldedElements) continue;
      producers[i] = producer;
      through[i].resize(static_cast<std::size_t>(graph_.tensors[inputs[i]].elements()));
      for_each_gathered(producer->gather_runs, [&](std::uint64_t at, std::uint32_t input, std::int64_t element) {
        through[i][at] = source_of(input, element);
      });
    }
    std::vector<std::uint32_t> read;  // the IR tensors the composed gather reads, each once
    auto slot_of = [&](std::uint32_t tensor) {
      const auto found = std::find(read.begin(), read.end(), tensor);
      if (found != read.end()) return static_cast<std::int64_t>(found - read.begin());
      read.push_back(tensor);
      return static_cast<std::int64_t>(read.size() - 1);
    };
    for (std::int64_t& source : sources) {
      const auto slot = static_cast<std::size_t>(source >> kSourceShift);
      const std::int64_t element = source & kSourceIndexMask;
      if (const Op* producer = producers[slot]) {
        const std::int64_t inner = through[slot][static_cast<std::size_t>(element)];
        source = source_of(slot_of(producer->inputs[static_cast<std::size_t>(inner >> kSourceShift)]),
                           inner & kSourceIndexMask);
      } else {
        source = source_of(slot_of(inputs[slot]), element);
      }
    }
    Op op;
    op.kind = OpKind::gather;
    op.inputs = std::move(read);
    op.gather_shape = std::move(shape);
    op.gather_runs = compress_runs(sources);
    return add_op(std::move(op), output, index, where);
  }

  /// Gather at computed indices along axis 0: a lookup of rows (docs/onnx.md), the data seen as a
  /// table [rows, the product of its other dims]: a constant (a weight), a graph input or computed.
  /// Its output is the indices' dims and the data's other dims.
  void import_embedding(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& data = node.input(0);
    const std::string& ids_name = node.input(1);
    auto constant = constants_.find(data);
    const Dims data_dims = constant != constants_.end() ? constant->second.dims : computed_.at(data).dims;
    const auto rank = static_cast<std::int64_t>(data_dims.size());
    if (rank == 0)
      throw Error(fmt::format("{}: Gather of the scalar '{}' (data must have at least one axis)", where, data));
    if (normalize_axis(int_attribute(node, "axis", 0), rank, where) != 0)
      unsupported(where, fmt::format("Gather of '{}' along axis {} at computed indices '{}' (a lookup at run time "
                                     "picks rows: axis 0; other axes need constant indices)",
                                     data, int_attribute(node, "axis", 0), ids_name));
    const Computed& ids = computed_.at(ids_name);
    if (dtype_of(ids) != DType::int32)
      unsupported(where,
                  fmt::format("Gather indices '{}' of type {} (integer indices)", ids_name, dtype_name(dtype_of(ids))));
    std::int64_t row_width = 1;
    for (std::size_t d = 1; d < data_dims.size(); ++d) row_width *= data_dims[d];
    const std::vector<std::int64_t> table_shape{data_dims[0], row_width};
    std::uint32_t table = 0;
    if (constant != constants_.end()) {
      const Constant& c = constant->second;
      const DType dtype =
          c.dtype == TensorProto::BOOL ? DType::boolean
          : c.dtype == TensorProto::FLOAT || c.dtype == TensorProto::FLOAT16 || c.dtype == TensorProto::DOUBLE
              ? DType::float32
              : DType::int32;
      check_like(c, data, dtype, where);
      table = add_weight(data, table_shape, c.values, false, dtype);
    } else {
      table = tensor_as(computed_.at(data), table_shape, where);
    }
    Op op;
    op.kind = OpKind::embedding;
    op.inputs = {table, tensor_as(ids, ir_shape(ids.dims), where)};
    Dims dims = ids.dims;
    dims.insert(dims.end(), data_dims.begin() + 1, data_dims.end());
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", dims};
  }

  /// Concat, Gather (constant indices) and Transpose: stand-ins folded through the node.
  void import_folded_movement(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& op = node.op_type();
    const int data_inputs = op == "Concat" ? node.input_size() : 1;
    std::vector<MovedInput> inputs;
    std::vector<Constant> stand_ins;
    for (int i = 0; i < data_inputs; ++i) {
      inputs.push_back(moved_input(node, i));
      stand_ins.push_back(stand_in(inputs.back().dims(), i, where));
    }
    std::vector<const Constant*> folding;
    for (int i = 0; i < node.input_size(); ++i)
      folding.push_back(i < data_inputs ? &stand_ins[static_cast<std::size_t>(i)] : &constants_.at(node.input(i)));
    const Constant folded = fold_node(node, folding, result_.opset, where).at(0);
    emit_movement(folded_movement(folded), inputs, 0.0, node.output(0), index, where);
  }

  // ---- Expansions: nodes the importer makes in place of another, imported as if the model had them.

  /// A node of type `type` made to expand another; its outputs are named after that node's.
  static onnx::NodeProto made_node(const std::string& type, const std::vector<std::string>& inputs,
                                   const std::vector<std::string>& outputs) {
    onnx::NodeProto node;
    node.set_op_type(type);
    node.set_name(outputs.at(0));
    for (const std::string& name : inputs) node.add_input(name);
    for (const std::string& name : outputs) node.add_output(name);
    return node;
  }

  static void set_int(onnx::NodeProto& node, const std::string& name, std::int64_t value) {
    onnx::AttributeProto* attribute = node.add_attribute();
    attribute->set_name(name);
    attribute->set_type(onnx::AttributeProto::INT);
    attribute->set_i(value);
  }

  static void set_ints(onnx::NodeProto& node, const std::string& name, const std::vector<std::int64_t>& values) {
    onnx::AttributeProto* attribute = node.add_attribute();
    attribute->set_name(name);
    attribute->set_type(onnx::AttributeProto::INTS);
    for (std::int64_t value : values) attribute->add_ints(value);
  }

  /// The name a computed value goes by: its IR tensor's, or the graph input's it is a view of.
  std::string value_name(const Computed& value) const {
    return value.tensor >= 0 ? graph_.tensors[static_cast<std::size_t>(value.tensor)].name : value.input;
  }

  /// `wanted`, or `wanted` with a number, so that no value of the model has that name.
  std::string fresh_name(const std::string& wanted) const {
    std::string name = wanted;
    for (int n = 2; constants_.count(name) || computed_.count(name); ++n) name = fmt::format("{}.{}", wanted, n);
    return name;
  }

  /// A constant named after `wanted` (made unique among the model's values).
  std::string add_constant(const std::string& wanted, Constant c) {
    const std::string name = fresh_name(wanted);
    constants_[name] = std::move(c);
    return name;
  }

  /// Imports `nodes`, made in place of node `index`, in order.
  void import_expansion(const std::vector<onnx::NodeProto>& nodes, int index) {
    for (const onnx::NodeProto& node : nodes)
      for (const std::string& input : node.input()) ++readers_[input];
    for (const onnx::NodeProto& node : nodes) import_node(node, index);
  }

  /// The ONNX element type of value `name`: a constant's, else the model's declared or inferred one,
  /// else what the device holds it as (int32 holds int64).
  int onnx_type_of(const std::string& name) const {
    if (auto c = constants_.find(name); c != constants_.end()) return c->second.dtype;
    for (const auto* values : {&model_.graph().input(), &model_.graph().value_info(), &model_.graph().output()})
      for (const auto& value : *values)
        if (value.name() == name && value.type().has_tensor_type()) return value.type().tensor_type().elem_type();
    switch (dtype_of(computed_.at(name))) {
      case DType::int32:
        return TensorProto::INT64;
      case DType::boolean:
        return TensorProto::BOOL;
      default:
        return TensorProto::FLOAT;
    }
  }

  /// An operator ONNX defines as a function of others (NegativeLogLikelihoodLoss,
  /// SoftmaxCrossEntropyLoss, MeanVarianceNormalization...): the body ONNX's own schema gives for
  /// this node, imported in its place. False when the operator has no body.
  bool import_function(const onnx::NodeProto& node, int index) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(node.op_type(), result_.opset, "");
    if (!schema) return false;
    std::vector<onnx::NodeProto> nodes;
    try {  // ONNX's builders throw their own exceptions on a node they cannot expand
      if (!function_body(*schema, node, nodes)) return false;
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("{}: ONNX cannot expand {}'s function body: {}", node_label(node, index), node.op_type(),
                              one_line(e.what())));
    }
    import_expansion(nodes, index);
    return true;
  }

  /// The nodes of `schema`'s function body for `node` (false when it has none).
  bool function_body(const onnx::OpSchema& schema, const onnx::NodeProto& node, std::vector<onnx::NodeProto>& nodes) {
    onnx::FunctionProto body;
    if (schema.HasFunction()) {
      body = *schema.GetFunction();
    } else if (schema.HasContextDependentFunction()) {
      std::vector<onnx::TypeProto> types;  // the body may depend on its inputs' types and dims
      for (const std::string& name : node.input()) {
        onnx::TypeProto& type = types.emplace_back();
        if (name.empty()) continue;
        auto* tensor = type.mutable_tensor_type();
        tensor->set_elem_type(onnx_type_of(name));
        const Dims& dims = constants_.count(name) ? constants_.at(name).dims : computed_.at(name).dims;
        for (std::int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
      }
      if (!schema.BuildContextDependentFunction(onnx::FunctionBodyBuildContextImpl(node, types), body)) return false;
    } else {
      return false;
    }
    onnx::GraphProto expanded;
    onnx::FunctionExpandHelper(node, body, expanded, node.name().empty() ? node.output(0) + "/" : node.name() + "/");
    nodes.assign(expanded.node().begin(), expanded.node().end());
    // The helper gives an optional attribute the node leaves out (ignore_index) an empty value
    // of type UNDEFINED, which would read as 0: it is left out, as the node left it.
    for (onnx::NodeProto& inner : nodes) {
      auto* attributes = inner.mutable_attribute();
      attributes->erase(
          std::remove_if(attributes->begin(), attributes->end(),
                         [](const onnx::AttributeProto& a) { return a.type() == onnx::AttributeProto::UNDEFINED; }),
          attributes->end());
    }
    return true;
  }

  /// InstanceNormalization: each image's channel normalized over its pixels, then scaled and
  /// shifted per channel. The pixels are flattened to one axis (a view) so the statistics are
  /// columns of the [N * C, pixels] rows: ReduceMean, Sub, Mul, ReduceMean, Add, Sqrt, Div, Mul, Add.
  void import_instance_norm(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "InstanceNormalization of a constant");
    Computed x = computed_.at(node.input(0));
    if (x.dims.size() < 3)
      throw Error(fmt::format("{}: InstanceNormalization of {} (it needs [N, C, ...])", where, dims_text(x.dims)));
    const std::int64_t images = x.dims[0], channels = x.dims[1], pixels = spatial_size(x.dims);
    const std::string& output = node.output(0);
    if (x.channels_last) x = feature_map_view(x, x.dims, where);  // row-major first
    const std::string flat = fresh_name(output + ".pixels");
    computed_[flat] = x;
    computed_[flat].dims = {images, channels, pixels};
    auto shape = [&](const std::string& name, Dims dims) {
      Constant c{TensorProto::INT64, {static_cast<std::int64_t>(dims.size())}, {}};
      for (std::int64_t d : dims) c.values.push_back(static_cast<double>(d));
      return add_constant(name, std::move(c));
    };
    const std::string per_channel = shape(output + ".per_channel", {channels, 1});
    const std::string epsilon =
        add_constant(output + ".epsilon", Constant{TensorProto::FLOAT, {}, {float_attribute(node, "epsilon", 1e-5f)}});
    auto mean = [&](const std::string& in, const std::string& out) {
      onnx::NodeProto reduce = made_node("ReduceMean", {in}, {out});
      set_ints(reduce, "axes", {2});
      return reduce;
    };
    import_expansion({mean(flat, output + ".mean"), made_node("Sub", {flat, output + ".mean"}, {output + ".centered"}),
                      made_node("Mul", {output + ".centered", output + ".centered"}, {output + ".squares"}),
                      mean(output + ".squares", output + ".variance"),
                      made_node("Add", {output + ".variance", epsilon}, {output + ".variance_eps"}),
                      made_node("Sqrt", {output + ".variance_eps"}, {output + ".deviation"}),
                      made_node("Div", {output + ".centered", output + ".deviation"}, {output + ".normalized"}),
                      made_node("Reshape", {node.input(1), per_channel}, {output + ".scale"}),
                      made_node("Mul", {output + ".normalized", output + ".scale"}, {output + ".scaled"}),
                      made_node("Reshape", {node.input(2), per_channel}, {output + ".bias"}),
                      made_node("Add", {output + ".scaled", output + ".bias"}, {output + ".shifted"})},
                     index);
    Computed result = computed_.at(output + ".shifted");
    result.dims = computed_.at(node.input(0)).dims;  // the pixels' own dims again: a view
    computed_[output] = result;
  }

  /// Hardmax: 1 where ArgMax picks (the first maximum), else 0: Equal of the ArgMax (kept axis)
  /// with the positions along the axis, cast to float. Before opset 13 over the input seen as
  /// [dims before axis, dims from axis].
  void import_hardmax(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "Hardmax of a constant");
    const Computed& x = computed_.at(node.input(0));
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    std::int64_t axis = normalize_axis(int_attribute(node, "axis", result_.opset >= 13 ? -1 : 1), rank, where);
    const std::string& output = node.output(0);
    std::string value = node.input(0);
    Dims dims = x.dims;
    if (result_.opset < 13) {  // coerced to 2-D: the axes from `axis` on are one
      std::int64_t leading = 1, trailing = 1;
      for (std::int64_t d = 0; d < rank; ++d) (d < axis ? leading : trailing) *= x.dims[static_cast<std::size_t>(d)];
      value = fresh_name(output + ".matrix");
      computed_[value] = x;
      computed_[value].dims = dims = {leading, trailing};
      if (x.channels_last) computed_[value] = feature_map_view(x, dims, where);
      axis = 1;
    }
    const std::int64_t count = dims[static_cast<std::size_t>(axis)];
    onnx::NodeProto arg = made_node("ArgMax", {value}, {output + ".argmax"});
    set_int(arg, "axis", axis);
    Constant positions{TensorProto::INT64, {count}, {}};
    positions.dims.insert(positions.dims.end(), dims.size() - 1 - static_cast<std::size_t>(axis), 1);
    for (std::int64_t i = 0; i < count; ++i) positions.values.push_back(static_cast<double>(i));
    const std::string iota = add_constant(output + ".positions", std::move(positions));
    onnx::NodeProto cast = made_node("Cast", {output + ".hit"}, {output + ".hardmax"});
    set_int(cast, "to", TensorProto::FLOAT);
    import_expansion({arg, made_node("Equal", {output + ".argmax", iota}, {output + ".hit"}), cast}, index);
    Computed result = computed_.at(output + ".hardmax");
    result.dims = x.dims;  // the same elements in the same order
    computed_[output] = result;
  }

  /// OneHot(indices, depth, values): along a new axis of `depth` positions, values[1] where the
  /// position is the index (negative ones counted from the end), else values[0].
  void import_one_hot(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "OneHot of constant indices (it is not folded)");
    const std::vector<std::int64_t> depths = constant_ints(node, 1, "depth", where);
    auto values = constants_.find(node.input(2));
    if (values == constants_.end())
      unsupported(where, fmt::format("OneHot with values that are not a constant: {}", not_constant(node.input(2))));
    if (depths.size() != 1 || depths[0] < 1 || depths[0] > (1 << 24) || values->second.values.size() != 2)
      throw Error(fmt::format("{}: OneHot needs one positive depth and two values", where));
    const std::int64_t depth = depths[0];
    const Computed& indices = computed_.at(node.input(0));
    const auto rank = static_cast<std::int64_t>(indices.dims.size()) + 1;
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", -1), rank, where);
    const std::string& output = node.output(0);
    std::string ids = node.input(0);
    if (dtype_of(indices) != DType::int32) {  // float indices truncate, as ONNX casts them
      onnx::NodeProto cast = made_node("Cast", {ids}, {output + ".ids"});
      set_int(cast, "to", TensorProto::INT64);
      import_expansion({cast}, index);
      ids = output + ".ids";
    }
    Dims kept = indices.dims;  // the new axis, of 1, in its place: a view
    kept.insert(kept.begin() + axis, 1);
    const std::string placed = fresh_name(output + ".placed");
    computed_[placed] = computed_.at(ids);
    computed_[placed].dims = kept;
    Constant positions{TensorProto::INT64, {depth}, {}}, negative{TensorProto::INT64, {depth}, {}};
    positions.dims.insert(positions.dims.end(), static_cast<std::size_t>(rank - 1 - axis), 1);
    negative.dims = positions.dims;
    for (std::int64_t i = 0; i < depth; ++i) {
      positions.values.push_back(static_cast<double>(i));
      negative.values.push_back(static_cast<double>(i - depth));
    }
    const int type = values->second.dtype;
    const std::string off = add_constant(output + ".off", Constant{type, {}, {values->second.values[0]}});
    const std::string on = add_constant(output + ".on", Constant{type, {}, {values->second.values[1]}});
    const std::string iota = add_constant(output + ".positions", std::move(positions));
    const std::string from_end = add_constant(output + ".negative_positions", std::move(negative));
    import_expansion({made_node("Equal", {placed, iota}, {output + ".at"}),
                      made_node("Equal", {placed, from_end}, {output + ".at_from_end"}),
                      made_node("Or", {output + ".at", output + ".at_from_end"}, {output + ".hot"}),
                      made_node("Where", {output + ".hot", on, off}, {output})},
                     index);
  }

  /// CumSum along a constant axis: the axis moved last (a transpose), the rows multiplied by a
  /// constant triangle of ones (a matmul the AMP runs: out[j] sums x[i] for i <= j, i < j when
  /// `exclusive`, i >= j or i > j when `reverse`), and the axis moved back. Float tensors only.
  void import_cumsum(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "CumSum of a constant (it is not folded)");
    const Computed& x = computed_.at(node.input(0));
    if (dtype_of(x) != DType::float32) unsupported(where, "CumSum of integers (the triangle is a float product)");
    const std::vector<std::int64_t> axes = constant_ints(node, 1, "axis", where);
    if (axes.size() != 1) throw Error(fmt::format("{}: CumSum's axis holds {} values, not 1", where, axes.size()));
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    if (rank == 0) throw Error(fmt::format("{}: CumSum of a scalar", where));
    const std::int64_t axis = normalize_axis(axes[0], rank, where);
    const std::int64_t n = x.dims[static_cast<std::size_t>(axis)];
    if (n > 4096) unsupported(where, fmt::format("CumSum along {} elements (a {}x{} triangle; at most 4096)", n, n, n));
    const bool exclusive = int_attribute(node, "exclusive", 0) != 0, reverse = int_attribute(node, "reverse", 0) != 0;
    Constant triangle{TensorProto::FLOAT, {n, n}, {}};
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        triangle.values.push_back((reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j)) ? 1.0 : 0.0);
    const std::string& output = node.output(0);
    const std::string ones = add_constant(output + ".triangle", std::move(triangle));
    std::vector<onnx::NodeProto> nodes;
    std::string value = node.input(0);
    auto permute = [&](const std::vector<std::int64_t>& perm, const std::string& out) {
      onnx::NodeProto move = made_node("Transpose", {value}, {out});
      set_ints(move, "perm", perm);
      nodes.push_back(move);
      value = out;
    };
    std::vector<std::int64_t> to_last, back(static_cast<std::size_t>(rank));
    for (std::int64_t d = 0; d < rank; ++d)
      if (d != axis) to_last.push_back(d);
    to_last.push_back(axis);
    for (std::int64_t d = 0; d < rank; ++d) back[static_cast<std::size_t>(to_last[static_cast<std::size_t>(d)])] = d;
    if (axis != rank - 1) permute(to_last, output + ".axis_last");
    Dims moved;
    for (std::int64_t d : to_last) moved.push_back(x.dims[static_cast<std::size_t>(d)]);
    // As rows of the axis: [everything else, n] (a view), the product, then the moved dims again.
    const std::string rows = fresh_name(output + ".rows");
    nodes.push_back(made_node(
        "Reshape", {value, add_constant(output + ".rows_shape", Constant{TensorProto::INT64, {2}, {-1.0, double(n)}})},
        {rows}));
    nodes.push_back(made_node("MatMul", {rows, ones}, {output + ".sums"}));
    Constant shape{TensorProto::INT64, {static_cast<std::int64_t>(moved.size())}, {}};
    for (std::int64_t d : moved) shape.values.push_back(static_cast<double>(d));
    value = axis != rank - 1 ? output + ".sums_moved" : output;
    nodes.push_back(
        made_node("Reshape", {output + ".sums", add_constant(output + ".moved_shape", std::move(shape))}, {value}));
    if (axis != rank - 1) permute(back, output);
    import_expansion(nodes, index);
  }

  /// Dropout at inference (no training_mode, or a constant false): its input, and a mask of trues.
  void import_dropout(const onnx::NodeProto& node, const std::string& where) {
    if (node.input_size() > 2 && !node.input(2).empty()) {
      auto training = constants_.find(node.input(2));
      if (training == constants_.end())
        unsupported(
            where, fmt::format("Dropout with a training_mode that is not a constant: {}", not_constant(node.input(2))));
      if (training->second.values.size() != 1 || training->second.values[0] != 0)
        unsupported(where, "Dropout in training mode (random masks are not computed; export for inference)");
    }
    const std::string& x = node.input(0);
    const Dims& dims = constants_.count(x) ? constants_.at(x).dims : computed_.at(x).dims;
    if (constants_.count(x)) constants_[node.output(0)] = constants_.at(x);
    else computed_[node.output(0)] = computed_.at(x);
    if (node.output_size() > 1 && !node.output(1).empty())
      constants_[node.output(1)] = Constant{
          TensorProto::BOOL, dims, std::vector<double>(static_cast<std::size_t>(element_count(dims, where)), 1.0)};
  }

  /// Trilu: the elements on and above (upper) or on and below diagonal k of the last two axes
  /// kept, the rest zero: Where with a constant mask.
  void import_trilu(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "Trilu of a constant (it is not folded)");
    const Computed& x = computed_.at(node.input(0));
    if (x.dims.size() < 2) throw Error(fmt::format("{}: Trilu takes a tensor of rank 2 or more", where));
    std::int64_t k = 0;
    if (node.input_size() > 1 && !node.input(1).empty()) {
      const std::vector<std::int64_t> ks = constant_ints(node, 1, "k", where);
      if (ks.size() != 1) throw Error(fmt::format("{}: Trilu's k holds {} values, not 1", where, ks.size()));
      k = ks[0];
    }
    const bool upper = int_attribute(node, "upper", 1) != 0;
    const std::int64_t rows = x.dims[x.dims.size() - 2], cols = x.dims.back();
    Constant mask{TensorProto::BOOL, {rows, cols}, {}};
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) mask.values.push_back((upper ? c - r >= k : c - r <= k) ? 1.0 : 0.0);
    const int type = onnx_type_of(node.input(0));
    const std::string& output = node.output(0);
    const std::string mask_name = add_constant(output + ".mask", std::move(mask));
    const std::string zero = add_constant(output + ".zero", Constant{type, {}, {0.0}});
    import_expansion({made_node("Where", {mask_name, node.input(0), zero}, {output})}, index);
  }

  /// ArgMax and ArgMin along an axis: the extreme (ReduceMax/ReduceMin), the positions equal to it
  /// (Equal), their indices or a sentinel (Where), and the first (or last) of them (ReduceMin or
  /// ReduceMax), cast to int64. The axis is moved last first, so the extreme broadcasts as a column.
  void import_arg_extreme(const onnx::NodeProto& node, int index, const std::string& where) {
    const Computed& x = computed_.at(node.input(0));
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    if (rank == 0) throw Error(fmt::format("{}: {} of a scalar", where, node.op_type()));
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", 0), rank, where);
    const bool keep = int_attribute(node, "keepdims", 1) != 0, last = int_attribute(node, "select_last_index", 0) != 0;
    const std::int64_t count = x.dims[static_cast<std::size_t>(axis)];
    if (count > (std::int64_t{1} << 24))
      unsupported(where, fmt::format("{} over {} elements (indices are found in float32, exact to 2^24)",
                                     node.op_type(), count));
    const std::string& output = node.output(0);
    std::vector<onnx::NodeProto> nodes;
    std::string value = node.input(0);
    if (axis != rank - 1) {  // the axis last
      onnx::NodeProto move = made_node("Transpose", {value}, {output + ".axis_last"});
      std::vector<std::int64_t> perm;
      for (std::int64_t d = 0; d < rank; ++d)
        if (d != axis) perm.push_back(d);
      perm.push_back(axis);
      set_ints(move, "perm", perm);
      nodes.push_back(move);
      value = output + ".axis_last";
    }
    const bool max = node.op_type() == "ArgMax";
    onnx::NodeProto extreme = made_node(max ? "ReduceMax" : "ReduceMin", {value}, {output + ".extreme"});
    set_ints(extreme, "axes", {-1});
    nodes.push_back(extreme);
    nodes.push_back(made_node("Equal", {value, output + ".extreme"}, {output + ".at_extreme"}));
    Constant positions{TensorProto::FLOAT, {count}, {}};
    for (std::int64_t i = 0; i < count; ++i) positions.values.push_back(static_cast<double>(i));
    const std::string iota = add_constant(output + ".positions", std::move(positions));
    // Not at the extreme: past the end for the first index, before the start for the last.
    const std::string sentinel = add_constant(
        output + ".sentinel", Constant{TensorProto::FLOAT, {}, {last ? -1.0 : static_cast<double>(count)}});
    nodes.push_back(made_node("Where", {output + ".at_extreme", iota, sentinel}, {output + ".candidates"}));
    onnx::NodeProto pick = made_node(last ? "ReduceMax" : "ReduceMin", {output + ".candidates"}, {output + ".index"});
    set_ints(pick, "axes", {-1});
    set_int(pick, "keepdims", keep ? 1 : 0);
    nodes.push_back(pick);
    onnx::NodeProto cast = made_node("Cast", {output + ".index"}, {keep ? output + ".index_int" : output});
    set_int(cast, "to", TensorProto::INT64);
    nodes.push_back(cast);
    import_expansion(nodes, index);
    if (keep) {  // the kept axis of 1 back in its place: a view
      Computed result = computed_.at(output + ".index_int");
      result.dims = x.dims;
      result.dims[static_cast<std::size_t>(axis)] = 1;
      computed_[output] = result;
    }
  }

  /// A Gather's axis, normalized against its data's rank.
  std::int64_t gather_axis(const onnx::NodeProto& node, const std::string& where) const {
    const std::string& data = node.input(0);
    const Dims& dims = constants_.count(data) ? constants_.at(data).dims : computed_.at(data).dims;
    if (dims.empty()) throw Error(fmt::format("{}: Gather of the scalar '{}' (data must have an axis)", where, data));
    return normalize_axis(int_attribute(node, "axis", 0), static_cast<std::int64_t>(dims.size()), where);
  }

  /// Gather and GatherElements at computed indices, as a one-hot pick. The data each output
  /// element may take is spread along a new axis of the gathered dim's length C (placed after the
  /// gathered axis, so runs stay contiguous: a loss's [N, C, ...] scores need no movement at all),
  /// the index (negative ones counted from the end) likewise; where they match 0..C-1 the element
  /// is kept (Where) and the new axis is summed away. An index out of range gives 0. The work is C
  /// times the output's: meant for small C (classes, a loss's weights), not embedding tables.
  void import_one_hot_gather(const onnx::NodeProto& node, int index, const std::string& where) {
    const bool elements = node.op_type() == "GatherElements";
    const MovedInput data = moved_input(node, 0);
    const Computed& indices = computed_.at(node.input(1));
    const Dims& in = data.dims();
    const auto rank = static_cast<std::int64_t>(in.size());
    if (rank == 0) throw Error(fmt::format("{}: {} of a scalar", where, node.op_type()));
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", 0), rank, where);
    if (dtype_of(indices) != DType::int32)
      throw Error(fmt::format("{}: {}'s indices '{}' are not integers", where, node.op_type(), node.input(1)));
    if (elements) {
      if (indices.dims.size() != in.size())
        throw Error(fmt::format("{}: GatherElements' indices {} and data {} differ in rank", where,
                                dims_text(indices.dims), dims_text(in)));
      for (std::int64_t d = 0; d < rank; ++d)
        if (d != axis && indices.dims[static_cast<std::size_t>(d)] > in[static_cast<std::size_t>(d)])
          throw Error(fmt::format("{}: GatherElements' indices {} exceed its data {} on axis {}", where,
                                  dims_text(indices.dims), dims_text(in), d));
    }
    const std::int64_t count = in[static_cast<std::size_t>(axis)];
    const std::string& output = node.output(0);
    // ONNX's negative indices count from the end: idx < 0 ? idx + C : idx, on the indices alone.
    const std::string normalized = output + ".indices";
    const std::string zero_index = add_constant(output + ".zero_index", Constant{TensorProto::INT64, {}, {0.0}});
    const std::string length =
        add_constant(output + ".length", Constant{TensorProto::INT64, {}, {static_cast<double>(count)}});
    import_expansion({made_node("Less", {node.input(1), zero_index}, {output + ".negative"}),
                      made_node("Add", {node.input(1), length}, {output + ".from_end"}),
                      made_node("Where", {output + ".negative", output + ".from_end", node.input(1)}, {normalized})},
                     index);
    OneHotSpread spread = one_hot_spread(in, indices.dims, axis, elements, where);
    const Dims& spread_dims = spread.data.dims;
    bool identity = data.value != nullptr;  // the data already in the spread's order: a view of it
    for (std::size_t i = 0; identity && i < spread.data.sources.size(); ++i)
      identity = spread.data.sources[i] == source_of(0, static_cast<std::int64_t>(i));
    if (identity && static_cast<std::int64_t>(spread.data.sources.size()) == element_count(in, where)) {
      Computed view = *data.value;
      view.dims = spread_dims;
      if (view.channels_last) view = feature_map_view(*data.value, spread_dims, where);
      computed_[output + ".candidates"] = view;
    } else {
      emit_movement(spread.data, {data}, 0.0, output + ".candidates", index, where);
    }
    emit_movement(spread.indices, {MovedInput{normalized, &computed_.at(normalized), nullptr}}, 0.0,
                  output + ".index_spread", index, where);
    // Position c along the new axis: a row when it is the last axis, else a column.
    const std::size_t trailing = spread_dims.size() - 1 - static_cast<std::size_t>(spread.position);
    Constant positions{TensorProto::INT64, {count}, {}};
    positions.dims.insert(positions.dims.end(), trailing, 1);
    for (std::int64_t c = 0; c < count; ++c) positions.values.push_back(static_cast<double>(c));
    const std::string iota = add_constant(output + ".positions", std::move(positions));
    const std::string zero = add_constant(output + ".zero", Constant{onnx_type_of(node.input(0)), {}, {0.0}});
    import_expansion({made_node("Equal", {output + ".index_spread", iota}, {output + ".mask"}),
                      made_node("Where", {output + ".mask", output + ".candidates", zero}, {output + ".picked"})},
                     index);
    // The one kept element of each line along the new axis, summed out of it (exactly: the rest are 0).
    std::string sum = sum_axis(output + ".picked", spread.position, index, where);
    Computed result = computed_.at(sum);
    result.dims.erase(result.dims.begin() + spread.position);
    computed_[output] = result;
  }

  /// The computed value `name` summed along `axis` (kept, of length 1). The last axis folds rows;
  /// another is halved (two ranges added, each range a gather of contiguous runs) until one is left.
  std::string sum_axis(const std::string& name, std::int64_t axis, int index, const std::string& where) {
    const Dims dims = computed_.at(name).dims;
    const std::int64_t n = dims[static_cast<std::size_t>(axis)];
    if (n == 1) return name;
    if (axis + 1 == static_cast<std::int64_t>(dims.size())) {
      Op fold;
      fold.kind = OpKind::reduce_sum;
      fold.inputs = {tensor_as(computed_.at(name), {element_count(dims, where) / n, n}, where)};
      Dims kept = dims;
      kept.back() = 1;
      computed_[name + ".sum"] = Computed{add_op(fold, name + ".sum", index, where), "", kept};
      return name + ".sum";
    }
    const std::int64_t half = n / 2;
    const MovedInput value{name, &computed_.at(name), nullptr};
    emit_movement(axis_range_movement(dims, axis, 0, half, where), {value}, 0.0, name + ".low", index, where);
    emit_movement(axis_range_movement(dims, axis, half, half, where), {value}, 0.0, name + ".high", index, where);
    import_expansion({made_node("Add", {name + ".low", name + ".high"}, {name + ".halves"})}, index);
    std::string sum = sum_axis(name + ".halves", axis, index, where);
    if (n % 2 == 0) return sum;
    emit_movement(axis_range_movement(dims, axis, n - 1, 1, where), {MovedInput{name, &computed_.at(name), nullptr}},
                  0.0, name + ".odd", index, where);
    import_expansion({made_node("Add", {sum, name + ".odd"}, {name + ".with_odd"})}, index);
    return name + ".with_odd";
  }

  using ImportFunction = void (Importer::*)(const onnx::NodeProto&, int, const std::string&);
  /// Operators whose nodes may have several outputs, and the function that imports each of them as
  /// a value of its own (computed_[node.output(i)]); any other node must have one output.
  static const std::map<std::string, ImportFunction>& several_outputs() {
    static const std::map<std::string, ImportFunction> functions = {
        {"Split", &Importer::import_split},
        {"LayerNormalization", &Importer::import_layer_norm},
        {"LSTM", &Importer::import_recurrent},
        {"GRU", &Importer::import_recurrent},
        {"RNN", &Importer::import_recurrent}};
    return functions;
  }

  /// LSTM, GRU and RNN: unrolled over their static sequence length (recurrent.cpp) into nodes imported
  /// here as any others. The weights must be constants (they are the products' right operands).
  void import_recurrent(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    const int inputs = type == "LSTM" ? 8 : 6;
    if (node.input_size() > inputs)
      throw Error(fmt::format("{}: {} has {} inputs; it takes at most {}", where, type, node.input_size(), inputs));
    auto input = [&](int i) { return i < node.input_size() ? node.input(i) : std::string(); };
    if (input(0).empty() || input(1).empty() || input(2).empty())
      throw Error(fmt::format("{}: {} needs the inputs X, W and R", where, type));
    if (!computed_.count(input(0)))
      unsupported(where, fmt::format("{} of a constant X '{}' (it is not folded)", type, input(0)));
    auto weight = [&](int i, const char* role) -> const Constant* {
      if (input(i).empty()) return nullptr;
      const auto found = constants_.find(input(i));
      if (found == constants_.end())
        unsupported(where,
                    fmt::format("{} with {} '{}' computed at run time (the unrolled layer needs it constant): {}", type,
                                role, input(i), not_constant(input(i))));
      return &found->second;
    };
    auto state = [&](int i) {
      RecurrentOperand operand;
      operand.name = input(i);
      if (operand.name.empty()) return operand;
      if (auto c = constants_.find(operand.name); c != constants_.end()) {
        operand.constant = &c->second;
        operand.dims = c->second.dims;
      } else {
        operand.dims = computed_.at(operand.name).dims;
      }
      return operand;
    };
    RecurrentInputs in;
    in.x_dims = computed_.at(input(0)).dims;
    in.w = weight(1, "W");
    in.r = weight(2, "R");
    in.b = weight(3, "B");
    in.sequence_lens = weight(4, "sequence_lens");
    in.initial_h = state(5);
    if (type == "LSTM") {
      in.initial_c = state(6);
      in.p = weight(7, "P");
    }
    RecurrentExpansion expansion = expand_recurrent(node, in, result_.opset, where);
    auto check_new = [&](const std::string& name) {
      if (constants_.count(name) || computed_.count(name))
        throw Error(
            fmt::format("{}: the unrolled {} names a value '{}', which the model already has; rename that value", where,
                        type, name));
    };
    for (auto& [name, constant] : expansion.constants) {
      check_new(name);
      constants_[name] = std::move(constant);
    }
    for (const onnx::NodeProto& inner : expansion.nodes) {
      for (const std::string& output : inner.output())
        if (std::find(node.output().begin(), node.output().end(), output) == node.output().end()) check_new(output);
      for (const std::string& name : inner.input()) ++readers_[name];
      import_node(inner, index);
    }
  }

  /// Split into its outputs along an axis: sizes from the `split` input (opset 13) or attribute,
  /// else equal parts (the last smaller when num_outputs does not divide the axis).
  void import_split(const onnx::NodeProto& node, int index, const std::string& where) {
    const MovedInput x = moved_input(node, 0);
    const auto rank = static_cast<std::int64_t>(x.dims().size());
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", 0), rank, where);
    const std::int64_t size = x.dims()[static_cast<std::size_t>(axis)];
    const int outputs = node.output_size();
    std::vector<std::int64_t> sizes;
    if (result_.opset >= 13 && node.input_size() > 1 && !node.input(1).empty())
      sizes = constant_ints(node, 1, "split sizes", where);
    else if (result_.opset < 13) sizes = ints_attribute(node, "split");
    if (sizes.empty()) {
      const std::int64_t parts = int_attribute(node, "num_outputs", outputs);
      const std::int64_t each = (size + parts - 1) / parts;
      for (std::int64_t begin = 0; begin < size; begin += each) sizes.push_back(std::min(each, size - begin));
    }
    std::int64_t total = 0;
    for (std::int64_t part : sizes) total += part;
    if (static_cast<int>(sizes.size()) != outputs || total != size)
      throw Error(fmt::format("{}: Split of axis {} (size {}) into [{}] for {} outputs", where, axis, size,
                              fmt::join(sizes, ", "), outputs));
    std::int64_t begin = 0;
    for (int i = 0; i < outputs; ++i) {
      const std::int64_t part = sizes[static_cast<std::size_t>(i)];
      if (!node.output(i).empty())
        emit_movement(axis_range_movement(x.dims(), axis, begin, part, where), {x}, 0.0, node.output(i), index, where);
      begin += part;
    }
  }

  /// Pad (constant, reflect, edge): pads and the constant from attributes before opset 11, else
  /// constant inputs (with axes from opset 18).
  void import_pad(const onnx::NodeProto& node, int index, const std::string& where) {
    const MovedInput x = moved_input(node, 0);
    const auto rank = static_cast<std::int64_t>(x.dims().size());
    const std::string mode = string_attribute(node, "mode", "constant");
    std::vector<std::int64_t> pads, axes;
    double value = 0.0;
    if (result_.opset < 11) {
      pads = ints_attribute(node, "pads");
      value = float_attribute(node, "value", 0.0f);
    } else {
      pads = constant_ints(node, 1, "pads", where);
      if (node.input_size() > 2 && !node.input(2).empty()) {
        auto found = constants_.find(node.input(2));
        if (found == constants_.end())
          unsupported(where, fmt::format("Pad with a computed constant_value '{}'", node.input(2)));
        check_values(found->second, where);
        if (found->second.values.size() != 1)
          throw Error(fmt::format("{}: Pad's constant_value must be one value", where));
        value = found->second.values[0];
      }
      if (node.input_size() > 3 && !node.input(3).empty()) axes = constant_ints(node, 3, "axes", where);
    }
    if (axes.empty())
      for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
    axes = normalize_axes(axes, rank, where);
    if (pads.size() != 2 * axes.size())
      throw Error(fmt::format("{}: Pad has {} pads for {} axes (it needs a begin and an end for each)", where,
                              pads.size(), axes.size()));
    std::vector<std::int64_t> begin(static_cast<std::size_t>(rank), 0), end(static_cast<std::size_t>(rank), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      begin[static_cast<std::size_t>(axes[i])] = pads[i];
      end[static_cast<std::size_t>(axes[i])] = pads[axes.size() + i];
    }
    PadMode pad_mode = PadMode::constant;
    if (mode == "reflect") pad_mode = PadMode::reflect;
    else if (mode == "edge") pad_mode = PadMode::edge;
    else if (mode != "constant")
      unsupported(where, fmt::format("Pad mode '{}' (constant, reflect and edge are supported)", mode));
    emit_movement(pad_movement(x.dims(), begin, end, pad_mode, where), {x}, value, node.output(0), index, where);
  }

  void import_tile_or_expand(const onnx::NodeProto& node, int index, const std::string& where) {
    const MovedInput x = moved_input(node, 0);
    const bool tile = node.op_type() == "Tile";
    const std::vector<std::int64_t> numbers = constant_ints(node, 1, tile ? "repeats" : "shape", where);
    emit_movement(tile ? tile_movement(x.dims(), numbers, where) : expand_movement(x.dims(), numbers, where), {x}, 0.0,
                  node.output(0), index, where);
  }

  void import_depth_space(const onnx::NodeProto& node, int index, const std::string& where) {
    const MovedInput x = moved_input(node, 0);
    const std::int64_t block = int_attribute(node, "blocksize", 0);
    if (node.op_type() == "SpaceToDepth")
      return emit_movement(space_to_depth_movement(x.dims(), block, where), {x}, 0.0, node.output(0), index, where);
    const std::string mode = string_attribute(node, "mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      throw Error(fmt::format("{}: DepthToSpace mode '{}' (DCR or CRD)", where, mode));
    emit_movement(depth_to_space_movement(x.dims(), block, mode == "CRD", where), {x}, 0.0, node.output(0), index,
                  where);
  }

  /// Resize by nearest neighbour: scales or sizes (constants), axes (opset 18), every coordinate
  /// transformation but tf_crop_and_resize. Linear and cubic modes are refused.
  void import_resize(const onnx::NodeProto& node, int index, const std::string& where) {
    const MovedInput x = moved_input(node, 0);
    const Dims& in = x.dims();
    const auto rank = static_cast<std::int64_t>(in.size());
    const std::string mode = string_attribute(node, "mode", "nearest");
    if (mode != "nearest" && mode != "linear" && mode != "cubic")
      unsupported(where, fmt::format("Resize mode '{}' (nearest, linear and cubic are supported)", mode));
    if (string_attribute(node, "keep_aspect_ratio_policy", "stretch") != "stretch")
      unsupported(where, "Resize with a keep_aspect_ratio_policy other than stretch");
    const int scales_input = result_.opset < 11 || node.op_type() == "Upsample" ? 1 : 2, sizes_input = 3;
    auto present = [&](int i) { return i < node.input_size() && !node.input(i).empty(); };
    std::vector<std::int64_t> axes = ints_attribute(node, "axes");
    if (axes.empty())
      for (std::int64_t d = 0; d < rank; ++d) axes.push_back(d);
    axes = normalize_axes(axes, rank, where);
    std::vector<double> scales(in.size(), 1.0);
    Dims out = in;
    std::vector<double> given;
    if (present(scales_input)) {
      auto found = constants_.find(node.input(scales_input));
      if (found == constants_.end())
        unsupported(where, fmt::format("Resize with scales that are not a constant: {}",
                                       not_constant(node.input(scales_input))));
      check_values(found->second, where);
      given = found->second.values;
    }
    if (!given.empty()) {
      if (given.size() != axes.size())
        throw Error(fmt::format("{}: Resize has {} scales for {} axes", where, given.size(), axes.size()));
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto d = static_cast<std::size_t>(axes[i]);
        if (!(given[i] > 0)) throw Error(fmt::format("{}: Resize scale {} is not positive", where, given[i]));
        scales[d] = given[i];
        out[d] = static_cast<std::int64_t>(std::floor(static_cast<double>(in[d]) * given[i]));
      }
    } else if (present(sizes_input)) {
      const std::vector<std::int64_t> sizes = constant_ints(node, sizes_input, "sizes", where);
      if (sizes.size() != axes.size())
        throw Error(fmt::format("{}: Resize has {} sizes for {} axes", where, sizes.size(), axes.size()));
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const auto d = static_cast<std::size_t>(axes[i]);
        out[d] = sizes[i];
        scales[d] = static_cast<double>(sizes[i]) / static_cast<double>(in[d]);
      }
    } else {
      throw Error(fmt::format("{}: Resize needs scales or sizes", where));
    }
    const std::string transformation =
        result_.opset < 11 ? "asymmetric" : string_attribute(node, "coordinate_transformation_mode", "half_pixel");
    if (mode != "nearest") return import_resize_interpolated(node, x, out, scales, transformation, index, where);
    const std::string nearest_mode =
        result_.opset < 11 ? "floor" : string_attribute(node, "nearest_mode", "round_prefer_floor");
    emit_movement(resize_nearest_movement(in, out, scales, transformation, nearest_mode, where), {x}, 0.0,
                  node.output(0), index, where);
  }

  /// Resize `linear` or `cubic`, separable as ONNX's reference computes it: each output element a
  /// weighted sum of its taps' input elements (2 or 4 along each resized axis). One `gather` per
  /// combination of taps, multiplied by its constant weights (a weight of the output's dims) and
  /// added: 2^d products for d resized axes (4 bilinear, 16 bicubic).
  void import_resize_interpolated(const onnx::NodeProto& node, const MovedInput& x, const Dims& out,
                                  const std::vector<double>& scales, const std::string& transformation, int index,
                                  const std::string& where) {
    const std::string mode = string_attribute(node, "mode", "nearest");
    if (!x.value) unsupported(where, fmt::format("Resize {} of a constant (it is not folded)", mode));
    const Dims& in = x.dims();
    std::vector<std::size_t> resized;
    std::vector<AxisTaps> taps(in.size());
    const double cubic_a = float_attribute(node, "cubic_coeff_a", -0.75f);
    const bool exclude_outside = int_attribute(node, "exclude_outside", 0) != 0;
    for (std::size_t d = 0; d < in.size(); ++d) {
      if (out[d] == in[d] && scales[d] == 1.0) continue;
      resized.push_back(d);
      taps[d] = resize_axis_taps(in[d], out[d], scales[d], transformation, mode, cubic_a, exclude_outside, where);
    }
    const std::size_t per_axis = mode == "cubic" ? 4 : 2;
    const std::int64_t count = element_count(out, where);
    std::size_t combinations = 1;
    for (std::size_t i = 0; i < resized.size() && static_cast<std::int64_t>(combinations) * count <= kMaxFoldedElements;
         ++i)
      combinations *= per_axis;
    if (static_cast<std::int64_t>(combinations) * count > kMaxFoldedElements)
      unsupported(where, fmt::format("Resize {} to {} ({} taps an element, at most {} in all)", mode, dims_text(out),
                                     combinations, kMaxFoldedElements));
    const std::string& output = node.output(0);
    std::string sum;
    for (std::size_t k = 0; k < combinations; ++k) {
      // Combination k picks tap (k / per_axis^i) % per_axis along the i-th resized axis.
      Movement pick{out, {}};
      Constant weights{TensorProto::FLOAT, out, {}};
      std::vector<std::int64_t> at(out.size(), 0), from(out.size());
      for (std::int64_t e = 0; e < count; ++e) {
        double weight = 1.0;
        for (std::size_t d = 0; d < out.size(); ++d) from[d] = at[d];
        std::size_t rest = k;
        for (std::size_t d : resized) {
          const std::size_t tap = rest % per_axis;
          rest /= per_axis;
          from[d] = taps[d].at[static_cast<std::size_t>(at[d])][tap];
          weight *= taps[d].weight[static_cast<std::size_t>(at[d])][tap];
        }
        std::int64_t flat_index = 0;
        for (std::size_t d = 0; d < in.size(); ++d) flat_index = flat_index * in[d] + from[d];
        pick.sources.push_back(source_of(0, flat_index));
        weights.values.push_back(weight);
        for (std::size_t d = out.size(); d-- > 0;) {
          if (++at[d] < out[d]) break;
          at[d] = 0;
        }
      }
      const std::string picked = fresh_name(fmt::format("{}.tap{}", output, k));
      emit_movement(pick, {x}, 0.0, picked, index, where);
      const std::string weight_name = add_constant(fmt::format("{}.weights{}", output, k), std::move(weights));
      const std::string term = k + 1 == combinations && sum.empty() ? output : fresh_name(picked + ".weighted");
      import_expansion({made_node("Mul", {picked, weight_name}, {term})}, index);
      if (sum.empty()) {
        sum = term;
        continue;
      }
      const std::string total = k + 1 == combinations ? output : fresh_name(fmt::format("{}.sum{}", output, k));
      import_expansion({made_node("Add", {sum, term}, {total})}, index);
      sum = total;
    }
  }

  static std::vector<std::int64_t> identity_order(std::size_t rank) {
    std::vector<std::int64_t> order(rank);
    for (std::size_t i = 0; i < rank; ++i) order[i] = static_cast<std::int64_t>(i);
    return order;
  }

  /// The shortest sequence of 'H' (swap axes 1 and 2) and 'T' (swap axes 2 and 3) giving the
  /// permutation `order` of four axes; empty when it moves axis 0 (or is the identity).
  static std::vector<char> relayout_steps(const std::array<std::int64_t, 4>& order) {
    if (order[0] != 0) return {};
    // Breadth first over the six orders of axes 1 to 3.
    std::vector<std::pair<std::array<std::int64_t, 4>, std::vector<char>>> frontier{{{0, 1, 2, 3}, {}}};
    for (std::size_t depth = 0; depth < 3; ++depth) {
      std::vector<std::pair<std::array<std::int64_t, 4>, std::vector<char>>> next;
      for (const auto& [current, steps] : frontier)
        for (char step : {'H', 'T'}) {
          std::array<std::int64_t, 4> moved = current;
          if (step == 'H') std::swap(moved[1], moved[2]);
          else std::swap(moved[2], moved[3]);
          std::vector<char> longer = steps;
          longer.push_back(step);
          if (moved == order) return longer;
          next.emplace_back(moved, std::move(longer));
        }
      frontier = std::move(next);
    }
    return {};
  }

  /// The IR layout of a computed value (its tensor's shape).
  std::vector<std::int64_t> layout_of(const Computed& value) const {
    const std::int64_t index = value.tensor >= 0 ? value.tensor : static_cast<std::int64_t>(declared_.at(value.input));
    return graph_.tensors[static_cast<std::size_t>(index)].shape;
  }

  /// Slice of a computed tensor: a range of its last axis, step 1 (slice_columns). The same
  /// folding on a stand-in holding each element's index tells which elements it keeps.
  void import_slice(const onnx::NodeProto& node, const std::vector<const Constant*>& constant_inputs, int index,
                    const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "Slice of a constant with computed bounds");
    for (int i = 1; i < node.input_size(); ++i)
      if (!node.input(i).empty() && !constants_.count(node.input(i)))
        unsupported(where, fmt::format("a Slice bound that is not a constant: {}", not_constant(node.input(i))));
    // The host streams every element of an input: a slice of the input itself slices its copy on
    // the device (a slice alone would leave the other columns unstreamed).
    const Computed x =
        computed_.at(node.input(0)).tensor >= 0
            ? computed_.at(node.input(0))
            : Computed{copy_of(tensor_of(computed_.at(node.input(0)), where), node.input(0), index, where), "",
                       computed_.at(node.input(0)).dims};
    Constant stand_in{TensorProto::FLOAT, x.dims, {}};
    stand_in.values.resize(static_cast<std::size_t>(element_count(x.dims, where)));
    for (std::size_t i = 0; i < stand_in.values.size(); ++i) stand_in.values[i] = static_cast<double>(i);
    std::vector<const Constant*> inputs = constant_inputs;
    inputs[0] = &stand_in;
    const Constant kept = fold_node(node, inputs, result_.opset, where).at(0);
    bool in_place = kept.dims == x.dims;
    for (std::size_t i = 0; in_place && i < kept.values.size(); ++i)
      in_place = kept.values[i] == static_cast<double>(i);
    if (in_place) {  // every element kept where it was: the input itself
      computed_[node.output(0)] = computed_.at(node.input(0));
      return;
    }
    const std::vector<std::int64_t> from = ir_shape(x.dims), to = ir_shape(kept.dims);
    // Columns of a row-major tensor (a feature map's IR rows are pixels: a gather maps it).
    bool columns = !x.channels_last && from.size() == 2 && to.size() == 2 && to[0] == from[0] && !kept.values.empty();
    const std::int64_t begin = columns ? static_cast<std::int64_t>(kept.values[0]) : 0;
    for (std::int64_t r = 0; columns && r < to[0]; ++r)
      for (std::int64_t c = 0; columns && c < to[1]; ++c)
        columns = kept.values[static_cast<std::size_t>(r * to[1] + c)] == static_cast<double>(r * from[1] + begin + c);
    if (!columns) {  // any other axes and steps: the folded stand-in says where each element comes from
      emit_movement(folded_movement(kept), {moved_input(node, 0)}, 0.0, node.output(0), index, where);
      return;
    }
    Op op;
    op.kind = OpKind::slice_columns;
    op.column_begin = static_cast<std::uint32_t>(begin);
    op.column_count = static_cast<std::uint32_t>(to[1]);
    op.inputs = {tensor_of(x, where)};
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", kept.dims};
  }

  static std::optional<OpKind> unary_kind(const std::string& op) {
    if (op == "Relu") return OpKind::relu;
    if (op == "Not") return OpKind::logical_not;
    if (op == "Sigmoid") return OpKind::sigmoid;
    if (op == "Tanh") return OpKind::tanh;
    if (op == "Erf") return OpKind::erf;
    if (op == "Sqrt") return OpKind::sqrt;
    if (op == "Pow") return OpKind::pow;
    return std::nullopt;
  }

  void import_unary(const onnx::NodeProto& node, OpKind kind, int index, const std::string& where) {
    if (!computed_.count(node.input(0)))
      unsupported(where, fmt::format("{} of a constant (it is not folded)", node.op_type()));
    const Computed& x = computed_.at(node.input(0));
    Op op;
    op.kind = kind;
    if (kind == OpKind::pow) {
      // One constant exponent: a unary pow (a square is a multiply); any other, elementwise power.
      auto exponent = constants_.find(node.input(1));
      if (exponent == constants_.end() || exponent->second.values.size() != 1 ||
          broadcast_dims(x.dims, exponent->second.dims, where) != x.dims)
        return import_binary(node, index, where);
      op.exponent = exponent->second.values[0];
    }
    op.inputs = {tensor_of(x, where)};
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", x.dims, x.channels_last};
  }

  /// ONNX's elementwise operators that are a unary function of the IR's `unary` op.
  static std::optional<UnaryFunction> unary_function_of(const std::string& op) {
    static const std::map<std::string, UnaryFunction> kFunctions = {
        {"Exp", UnaryFunction::exp},
        {"Log", UnaryFunction::log},
        {"Neg", UnaryFunction::neg},
        {"Abs", UnaryFunction::abs},
        {"Reciprocal", UnaryFunction::reciprocal},
        {"Floor", UnaryFunction::floor},
        {"Ceil", UnaryFunction::ceil},
        {"Round", UnaryFunction::round},
        {"Sign", UnaryFunction::sign},
        {"Sin", UnaryFunction::sin},
        {"Cos", UnaryFunction::cos},
        {"Softplus", UnaryFunction::softplus},
        {"Softsign", UnaryFunction::softsign},
        {"Elu", UnaryFunction::elu},
        {"Selu", UnaryFunction::elu},  // gamma * elu(x) with Selu's alpha
        {"Celu", UnaryFunction::celu},
        {"ThresholdedRelu", UnaryFunction::thresholded_relu},
        {"Mish", UnaryFunction::mish},
        {"Tan", UnaryFunction::tan},
        {"Asin", UnaryFunction::asin},
        {"Acos", UnaryFunction::acos},
        {"Atan", UnaryFunction::atan},
        {"Sinh", UnaryFunction::sinh},
        {"Cosh", UnaryFunction::cosh},
        {"Asinh", UnaryFunction::asinh},
        {"Acosh", UnaryFunction::acosh},
        {"Atanh", UnaryFunction::atanh},
        {"IsInf", UnaryFunction::is_inf},
        {"IsNaN", UnaryFunction::is_nan}};
    auto found = kFunctions.find(op);
    if (found == kFunctions.end()) return std::nullopt;
    return found->second;
  }

  /// A unary op of the computed input, by `function` (Selu: an elu, then a multiply by gamma).
  std::uint32_t unary_op(const Computed& x, UnaryFunction function, double alpha, const std::string& output, int index,
                         const std::string& where) {
    Op op;
    op.kind = OpKind::unary;
    op.function = static_cast<std::uint32_t>(function);
    op.alpha = alpha;
    op.inputs = {tensor_of(x, where)};
    return add_op(op, output, index, where);
  }

  void import_unary_function(const onnx::NodeProto& node, UnaryFunction function, int index, const std::string& where) {
    if (!computed_.count(node.input(0)))
      unsupported(where, fmt::format("{} of a constant (it is not folded)", node.op_type()));
    const Computed& x = computed_.at(node.input(0));
    const std::string& type = node.op_type();
    double alpha = 0.0;
    if (type == "Elu" || type == "Celu" || type == "ThresholdedRelu") alpha = float_attribute(node, "alpha", 1.0f);
    if (type == "Selu") alpha = float_attribute(node, "alpha", 1.67326319217681884765625f);
    if (type == "IsInf")  // which infinities: bit 1 positive, bit 2 negative
      alpha = (int_attribute(node, "detect_positive", 1) != 0 ? 1 : 0) +
              (int_attribute(node, "detect_negative", 1) != 0 ? 2 : 0);
    if (type == "Celu" && alpha == 0.0) throw Error(fmt::format("{}: Celu's alpha must not be 0", where));
    const std::string& output = node.output(0);
    if (type != "Selu") {
      computed_[output] = Computed{unary_op(x, function, alpha, output, index, where), "", x.dims, x.channels_last};
      return;
    }
    const double gamma = float_attribute(node, "gamma", 1.05070102214813232421875f);
    const std::uint32_t elu = unary_op(x, function, alpha, output + ".elu", index, where);
    const std::int64_t cols = x.dims.empty() ? 1 : x.channels_last ? x.dims[1] : x.dims.back();
    Op scale;
    scale.kind = OpKind::mul;
    scale.inputs = {
        elu, add_weight(output + ".gamma", {cols}, std::vector<double>(static_cast<std::size_t>(cols), gamma), false)};
    computed_[output] = Computed{add_op(scale, output, index, where), "", x.dims, x.channels_last};
  }

  /// Max, Min, Sum and Mean of one or more inputs: a chain of binary ops (Mean: the sum, then a
  /// multiply by 1 / n), each broadcasting as Add does.
  void import_variadic(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    const std::string& output = node.output(0);
    std::vector<std::string> inputs;
    for (const std::string& name : node.input())
      if (!name.empty()) inputs.push_back(name);
    if (inputs.empty()) throw Error(fmt::format("{}: {} needs at least one input", where, type));
    const std::string pair_type = type == "Max" ? "Max" : type == "Min" ? "Min" : "Add";
    std::string value = inputs[0];
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      onnx::NodeProto pair;
      pair.set_op_type(pair_type);
      pair.add_input(value);
      pair.add_input(inputs[i]);
      const bool last = i + 1 == inputs.size() && type != "Mean";
      pair.add_output(last ? output : fmt::format("{}.{}", output, i));
      import_binary(pair, index, where);
      value = pair.output(0);
    }
    if (!computed_.count(value)) unsupported(where, fmt::format("{} of constants only (it is not folded)", type));
    if (type == "Mean" && inputs.size() > 1) {
      onnx::NodeProto scale;
      scale.set_op_type("Mul");
      scale.add_input(value);
      const std::string factor = output + ".one_over_n";
      constants_[factor] = Constant{TensorProto::FLOAT, {}, {1.0 / static_cast<double>(inputs.size())}};
      scale.add_input(factor);
      scale.add_output(output);
      import_binary(scale, index, where);
    } else if (value != output) {
      computed_[output] = computed_.at(value);  // one input: itself
    }
  }

  /// The IR layout in which a value of `dims` is [product of dims before `axis`, product from
  /// `axis`]: its own when that is the last axis, else a view only a graph input can take.
  static std::vector<std::int64_t> split_view(const Dims& dims, std::int64_t axis) {
    const auto rank = static_cast<std::int64_t>(dims.size());
    if (axis >= rank - 1 || rank <= 1) return ir_shape(dims);
    std::int64_t leading = 1, trailing = 1;
    for (std::int64_t d = 0; d < rank; ++d) (d < axis ? leading : trailing) *= dims[static_cast<std::size_t>(d)];
    return {leading, trailing};
  }

  /// The IR op that folds rows as ONNX's Reduce* operator `type` reduces (ReduceLogSum: a sum, then a log).
  static Op row_fold(const std::string& type) {
    static const std::map<std::string, ReduceFunction> kFunctions = {{"ReduceMax", ReduceFunction::max},
                                                                     {"ReduceMin", ReduceFunction::min},
                                                                     {"ReduceProd", ReduceFunction::prod},
                                                                     {"ReduceL1", ReduceFunction::l1},
                                                                     {"ReduceL2", ReduceFunction::l2},
                                                                     {"ReduceLogSumExp", ReduceFunction::log_sum_exp},
                                                                     {"ReduceSumSquare", ReduceFunction::sum_square}};
    Op op;
    op.kind = type == "ReduceMean" ? OpKind::reduce_mean : OpKind::reduce_sum;
    if (auto found = kFunctions.find(type); found != kFunctions.end()) {
      op.kind = OpKind::reduce;
      op.function = static_cast<std::uint32_t>(found->second);
    }
    return op;
  }

  /// ONNX's Reduce* operators over any axes. Each run of adjacent reduced axes, from the last,
  /// is a fold of rows: the value seen as [P, R, Q] (R the run's elements), transposed to
  /// [P*Q, R] when Q > 1, and each row folded, leaving [P, Q]. Later runs fold what the earlier
  /// left (a sum of squares or of magnitudes goes on as a sum).
  void import_reduce(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    if (!computed_.count(node.input(0))) unsupported(where, fmt::format("{} of a constant (it is not folded)", type));
    const Computed& x = computed_.at(node.input(0));
    if (x.channels_last) unsupported(where, fmt::format("{} of a feature map (a Conv's output)", type));
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    std::vector<std::int64_t> axes;
    // ReduceSum takes its axes as an input from opset 13 (the others from 18, beyond ONNX 1.12).
    if (type == "ReduceSum" && result_.opset >= 13) {
      if (node.input_size() > 1 && !node.input(1).empty()) {
        auto found = constants_.find(node.input(1));
        if (found == constants_.end())
          unsupported(where, fmt::format("{} with axes that are not a constant: {}", node.op_type(),
                                         not_constant(node.input(1))));
        for (double v : found->second.values) axes.push_back(static_cast<std::int64_t>(v));
      }
    } else if (const onnx::AttributeProto* attribute = find_attribute(node, "axes")) {
      axes.assign(attribute->ints().begin(), attribute->ints().end());
    }
    if (axes.empty() && int_attribute(node, "noop_with_empty_axes", 0) != 0) {
      computed_[node.output(0)] = x;  // no axes and noop: the input itself
      return;
    }
    std::set<std::int64_t> reduced;
    for (std::int64_t axis : normalize_axes(axes, rank, where)) reduced.insert(axis);
    if (axes.empty())
      for (std::int64_t axis = 0; axis < rank; ++axis) reduced.insert(axis);
    const bool keep = int_attribute(node, "keepdims", 1) != 0;
    Dims dims;
    for (std::int64_t d = 0; d < rank; ++d)
      if (!reduced.count(d)) dims.push_back(x.dims[static_cast<std::size_t>(d)]);
      else if (keep) dims.push_back(1);
    const std::string& output = node.output(0);
    if (reduced.empty() || element_count(x.dims, where) == 0) {
      computed_[output] = Computed{tensor_of(x, where), "", dims};
      return;
    }
    // The dims still to fold, with each reduced axis marked; runs are folded from the last.
    Dims current = x.dims;
    std::vector<bool> marked(static_cast<std::size_t>(rank));
    for (std::int64_t axis : reduced) marked[static_cast<std::size_t>(axis)] = true;
    const bool log_after = type == "ReduceLogSum";
    Op fold = row_fold(log_after ? "ReduceSum" : type);
    std::optional<std::uint32_t> value;  // none: x itself, which a graph input can give in any view
    auto as_shape = [&](std::vector<std::int64_t> shape) {
      return value ? reshaped(*value, shape, where) : tensor_as(x, shape, where);
    };
    int run_index = 0;
    while (true) {
      auto last = std::find(marked.rbegin(), marked.rend(), true);
      if (last == marked.rend()) break;
      const auto end = static_cast<std::size_t>(marked.rend() - last);  // one past the run's last axis
      std::size_t begin = end - 1;
      while (begin > 0 && marked[begin - 1]) --begin;
      std::int64_t p = 1, r = 1, q = 1;
      for (std::size_t d = 0; d < current.size(); ++d) (d < begin ? p : d < end ? r : q) *= current[d];
      const bool final_run = std::find(marked.begin(), marked.begin() + static_cast<std::ptrdiff_t>(begin), true) ==
                             marked.begin() + static_cast<std::ptrdiff_t>(begin);
      const std::string name = final_run && !log_after ? output : fmt::format("{}.fold{}", output, run_index);
      if (q > 1) {  // the run's axes last: [P, R, Q] to [P*Q, R]
        Op transpose;
        transpose.kind = OpKind::transpose;
        transpose.batch = static_cast<std::uint32_t>(p);
        transpose.inputs = {as_shape({p * r, q})};
        value = add_op(transpose, name + ".transposed", index, where);
      } else {
        value = as_shape({p, r});
      }
      Op op = fold;
      op.inputs = {*value};
      value = add_op(op, name, index, where);
      current.erase(current.begin() + static_cast<std::ptrdiff_t>(begin),
                    current.begin() + static_cast<std::ptrdiff_t>(end));
      marked.erase(marked.begin() + static_cast<std::ptrdiff_t>(begin),
                   marked.begin() + static_cast<std::ptrdiff_t>(end));
      current.insert(current.begin() + static_cast<std::ptrdiff_t>(begin), 1);
      marked.insert(marked.begin() + static_cast<std::ptrdiff_t>(begin), false);
      ++run_index;
      // Later runs fold partial results: squares and magnitudes are already taken.
      if (fold.kind == OpKind::reduce && (fold.function == static_cast<std::uint32_t>(ReduceFunction::sum_square) ||
                                          fold.function == static_cast<std::uint32_t>(ReduceFunction::l1)))
        fold = row_fold("ReduceSum");
    }
    if (log_after) {
      Op log;
      log.kind = OpKind::unary;
      log.function = static_cast<std::uint32_t>(UnaryFunction::log);
      log.inputs = {*value};
      value = add_op(log, output, index, where);
    }
    computed_[output] = Computed{*value, "", dims};
  }

  /// IR tensor `tensor` read as `shape` (the same elements in the same order): itself when it
  /// has that shape, else a re-layout (tensor_as).
  std::uint32_t reshaped(std::uint32_t tensor, const std::vector<std::int64_t>& shape, const std::string& where) {
    return tensor_as(Computed{tensor, "", {}}, shape, where);
  }

  /// LayerNormalization (opset 17) over the axes from `axis` on: layer_norm of the rows of the
  /// [leading, trailing] view with Scale and B (zeros when absent) as rows of `trailing`.
  void import_layer_norm(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "LayerNormalization of a constant (it is not folded)");
    const Computed& x = computed_.at(node.input(0));
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", -1), rank, where);
    const std::vector<std::int64_t> view = split_view(x.dims, axis);
    const Dims normalized(x.dims.begin() + axis, x.dims.end());
    const std::int64_t trailing = element_count(normalized, where);
    Op op;
    op.kind = OpKind::layer_norm;
    op.epsilon = float_attribute(node, "epsilon", 1e-5f);
    op.inputs = {tensor_as(x, view, where)};
    for (int i = 1; i <= 2; ++i) {
      const char* role = i == 1 ? "Scale" : "B";
      if (i >= node.input_size() || node.input(i).empty()) {  // no B: a zero shift
        op.inputs.push_back(add_weight(node.output(0) + ".zero_bias", {trailing},
                                       std::vector<double>(static_cast<std::size_t>(trailing), 0.0), false));
        continue;
      }
      const std::string& name = node.input(i);
      if (auto c = constants_.find(name); c != constants_.end()) {
        check_float(c->second, name, where);
        if (broadcast_dims(normalized, c->second.dims, where) != normalized)
          unsupported(where, fmt::format("{} '{}' of dims {} for normalized dims {}", role, name,
                                         dims_text(c->second.dims), dims_text(normalized)));
        const bool as_is = c->second.dims == normalized && normalized.size() == 1;
        op.inputs.push_back(
            add_weight(as_is ? name : name + ".row", {trailing}, expand_to(c->second, normalized), false));
      } else {
        const Computed& value = computed_.at(name);
        if (element_count(value.dims, where) != trailing)
          unsupported(where,
                      fmt::format("a computed {} '{}' of dims {} for normalized dims {} (it must hold one value per "
                                  "normalized element)",
                                  role, name, dims_text(value.dims), dims_text(normalized)));
        op.inputs.push_back(tensor_as(value, {trailing}, where));
      }
    }
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", x.dims};
    if (node.output_size() > 1) layer_norm_statistics(node, op.inputs[0], op.epsilon, index, where);
  }

  /// LayerNormalization's optional Mean and InvStdDev outputs, of each row of the [leading,
  /// trailing] view `rows`: the mean, and 1 / sqrt(mean((x - mean)^2) + epsilon), kept as
  /// [dims before axis, 1, ...].
  void layer_norm_statistics(const onnx::NodeProto& node, std::uint32_t rows, double epsilon, int index,
                             const std::string& where) {
    const Computed& x = computed_.at(node.input(0));
    const std::int64_t axis =
        normalize_axis(int_attribute(node, "axis", -1), static_cast<std::int64_t>(x.dims.size()), where);
    Dims kept(x.dims.begin(), x.dims.begin() + axis);
    kept.resize(x.dims.size(), 1);
    const std::string& base = node.output(0);
    auto op_of = [&](OpKind kind, std::vector<std::uint32_t> inputs, const std::string& name) {
      Op op;
      op.kind = kind;
      op.inputs = std::move(inputs);
      if (kind == OpKind::pow) op.exponent = 2.0;
      return add_op(op, name, index, where);
    };
    const bool wants_mean = node.output_size() > 1 && !node.output(1).empty();
    const bool wants_inverse = node.output_size() > 2 && !node.output(2).empty();
    const std::string mean_name = wants_mean ? node.output(1) : base + ".mean";
    const std::uint32_t mean = op_of(OpKind::reduce_mean, {rows}, mean_name);
    if (wants_mean) computed_[mean_name] = Computed{mean, "", kept};
    if (!wants_inverse) return;
    const std::uint32_t centered = op_of(OpKind::sub, {rows, mean}, base + ".centered");
    const std::uint32_t squares = op_of(OpKind::pow, {centered}, base + ".squares");
    const std::uint32_t variance = op_of(OpKind::reduce_mean, {squares}, base + ".variance");
    const std::uint32_t eps = add_weight(base + ".epsilon", {1}, {epsilon}, false);
    const std::uint32_t shifted = op_of(OpKind::add, {variance, eps}, base + ".shifted");
    const std::uint32_t deviation = op_of(OpKind::sqrt, {shifted}, base + ".deviation");
    Op inverse;
    inverse.kind = OpKind::unary;
    inverse.function = static_cast<std::uint32_t>(UnaryFunction::reciprocal);
    inverse.inputs = {deviation};
    computed_[node.output(2)] = Computed{add_op(inverse, node.output(2), index, where), "", kept};
  }

  /// Softmax and LogSoftmax. Before opset 13 the input is coerced to [dims before axis, dims
  /// from axis] and each row of that view normalized; from 13 along `axis` alone: when it is not
  /// the last, the value seen as [P, R, Q] is transposed to [P*Q, R], normalized by rows, and
  /// transposed back.
  void import_softmax(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    if (!computed_.count(node.input(0))) unsupported(where, fmt::format("{} of a constant (it is not folded)", type));
    const Computed& x = computed_.at(node.input(0));
    if (x.channels_last) unsupported(where, fmt::format("{} of a feature map (a Conv's output)", type));
    const bool log = type == "LogSoftmax";
    const auto rank = static_cast<std::int64_t>(x.dims.size());
    const std::int64_t axis = normalize_axis(int_attribute(node, "axis", result_.opset < 13 ? 1 : -1), rank, where);
    const std::string& output = node.output(0);
    std::int64_t p = 1, r = 1, q = 1;
    for (std::int64_t d = 0; d < rank; ++d)
      (d < axis ? p : d == axis || result_.opset < 13 ? r : q) *= x.dims[static_cast<std::size_t>(d)];
    if (q == 1) {
      computed_[output] = Computed{row_softmax(tensor_as(x, {p, r}, where), log, output, index, where), "", x.dims};
      return;
    }
    Op there;
    there.kind = OpKind::transpose;
    there.batch = static_cast<std::uint32_t>(p);
    there.inputs = {tensor_as(x, {p * r, q}, where)};
    const std::uint32_t rows = add_op(there, output + ".rows", index, where);
    Op back = there;
    back.inputs = {row_softmax(rows, log, output + ".normalized", index, where)};
    computed_[output] = Computed{add_op(back, output, index, where), "", x.dims};
  }

  /// Each row of `in` normalized: softmax, or its logarithm computed stably as t - log(sum(exp(t)))
  /// with t = x - max(x).
  std::uint32_t row_softmax(std::uint32_t in, bool log, const std::string& output, int index,
                            const std::string& where) {
    auto op_of = [&](OpKind kind, std::vector<std::uint32_t> inputs, std::uint32_t function, const std::string& name) {
      Op op;
      op.kind = kind;
      op.function = function;
      op.inputs = std::move(inputs);
      return add_op(op, name, index, where);
    };
    if (!log) return op_of(OpKind::softmax, {in}, 0, output);
    const std::uint32_t max =
        op_of(OpKind::reduce, {in}, static_cast<std::uint32_t>(ReduceFunction::max), output + ".max");
    const std::uint32_t shifted = op_of(OpKind::sub, {in, max}, 0, output + ".shifted");
    const std::uint32_t exp =
        op_of(OpKind::unary, {shifted}, static_cast<std::uint32_t>(UnaryFunction::exp), output + ".exp");
    const std::uint32_t sum = op_of(OpKind::reduce_sum, {exp}, 0, output + ".sum");
    const std::uint32_t log_sum =
        op_of(OpKind::unary, {sum}, static_cast<std::uint32_t>(UnaryFunction::log), output + ".log");
    return op_of(OpKind::sub, {shifted, log_sum}, 0, output);
  }

  /// A constant operand of a matmul's right side: [k, n] float weights.
  std::uint32_t matrix_weight(const std::string& name, const Constant& c, const std::string& where) {
    check_float(c, name, where);
    if (c.dims.size() != 2)
      unsupported(where,
                  fmt::format("a rank-{} constant right operand '{}' (it must be a matrix)", c.dims.size(), name));
    return add_weight(name, {c.dims[0], c.dims[1]}, c.values, keeps_half(c, true));
  }

  void import_matmul(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0)))
      unsupported(where, "a constant left operand (the left operand must be computed or a graph input)");
    const Computed& a = computed_.at(node.input(0));
    if (a.dims.size() < 2) unsupported(where, "a rank-1 left operand");
    Op matmul;
    matmul.kind = OpKind::matmul;
    std::int64_t n = 0;
    if (auto b = constants_.find(node.input(1)); b != constants_.end()) {
      const std::uint32_t w = matrix_weight(node.input(1), b->second, where);
      n = b->second.dims[1];
      matmul.inputs = {tensor_of(a, where), w};
    } else {
      const Computed& b_value = computed_.at(node.input(1));
      const std::size_t rank = b_value.dims.size();
      if (rank > 2) {
        // A batch of products: the same leading dims on both sides (no broadcasting), each
        // product a row block of the IR's matrices.
        if (a.dims.size() != rank || !std::equal(a.dims.begin(), a.dims.end() - 2, b_value.dims.begin()))
          unsupported(where, fmt::format("a batched product of {} x {} (both operands need the same leading dims)",
                                         dims_text(a.dims), dims_text(b_value.dims)));
        std::int64_t batch = 1;
        for (std::size_t i = 0; i + 2 < rank; ++i) batch *= a.dims[i];
        matmul.batch = static_cast<std::uint32_t>(batch);
      } else if (rank != 2) {
        unsupported(where, fmt::format("a rank-{} right operand {}", rank, dims_text(b_value.dims)));
      }
      n = b_value.dims[rank - 1];
      matmul.inputs = {tensor_of(a, where), tensor_of(b_value, where)};
      // A product by a transpose reads the transpose's input by rows (transpose_b): the
      // transpose itself is dropped at the end if nothing else reads it.
      const auto producer = std::find_if(graph_.ops.begin(), graph_.ops.end(),
                                         [&](const Op& op) { return op.output == matmul.inputs[1]; });
      if (producer != graph_.ops.end() && producer->kind == OpKind::transpose && producer->batch == matmul.batch) {
        matmul.inputs[1] = producer->inputs[0];
        matmul.transpose_b = true;
      }
    }
    // Leading dims of a rank-3/4 left operand are rows of the IR's matrix: the right one is shared.
    Dims dims(a.dims.begin(), a.dims.end() - 1);
    dims.push_back(n);
    computed_[node.output(0)] = Computed{add_op(matmul, node.output(0), index, where), "", dims};
  }

  void import_gemm(const onnx::NodeProto& node, int index, const std::string& where) {
    const float alpha = float_attribute(node, "alpha", 1.0f), beta = float_attribute(node, "beta", 1.0f);
    const bool trans_a = int_attribute(node, "transA", 0) != 0, trans_b = int_attribute(node, "transB", 0) != 0;
    if (!computed_.count(node.input(0))) unsupported(where, "a constant A (A must be computed or a graph input)");
    const Computed& a = computed_.at(node.input(0));
    std::uint32_t a_tensor = tensor_of(a, where);
    Dims a_dims = a.dims;
    if (trans_a) {  // A^T: a transpose on the device (an exchange re-layout)
      Op transpose;
      transpose.kind = OpKind::transpose;
      transpose.inputs = {a_tensor};
      a_tensor = add_op(transpose, node.output(0) + ".At", index, where);
      std::swap(a_dims.at(0), a_dims.at(1));
    }
    Op matmul;
    matmul.kind = OpKind::matmul;
    std::int64_t n = 0;
    if (auto b = constants_.find(node.input(1)); b != constants_.end()) {
      Constant w = trans_b ? transpose(b->second, {}, where) : b->second;
      check_float(w, node.input(1), where);
      // alpha * (A B) = A (alpha B): folded into the weights, rounded as the weights' type holds.
      if (alpha != 1.0f)
        for (double& v : w.values) v = round_to(w.dtype, alpha * v);
      const bool derived = trans_b || alpha != 1.0f;
      n = w.dims.at(1);
      matmul.inputs = {a_tensor, matrix_weight(derived ? node.output(0) + ".B" : node.input(1), w, where)};
    } else {
      if (alpha != 1.0f)
        unsupported(where, "alpha != 1 with a computed B (it can only be folded into constant weights)");
      const Computed& b_value = computed_.at(node.input(1));
      n = trans_b ? b_value.dims.at(0) : b_value.dims.at(1);
      matmul.transpose_b = trans_b;
      matmul.inputs = {a_tensor, tensor_of(b_value, where)};
    }
    const Dims dims{a_dims.at(0), n};
    const bool has_c = node.input_size() > 2 && !node.input(2).empty();
    if (!has_c) {
      computed_[node.output(0)] = Computed{add_op(matmul, node.output(0), index, where), "", dims};
      return;
    }
    const std::uint32_t product = add_op(matmul, node.output(0) + ".AB", index, where);
    Op add;
    add.kind = OpKind::add;
    add.inputs = {product, 0};
    if (auto c = constants_.find(node.input(2)); c != constants_.end()) {
      Constant bias = c->second;
      check_float(bias, node.input(2), where);
      if (beta != 1.0f)
        for (double& v : bias.values) v = round_to(bias.dtype, beta * v);
      add.inputs[1] = constant_operand(node.input(2), bias, dims, beta != 1.0f, true, where);
    } else {
      if (beta != 1.0f) unsupported(where, "beta != 1 with a computed C (it can only be folded into constant biases)");
      add.inputs[1] = computed_operand(computed_.at(node.input(2)), dims, where);
    }
    computed_[node.output(0)] = Computed{add_op(add, node.output(0), index, where), "", dims};
  }

  /// A constant operand of a tensor of `dims`: a row vector when it varies along the last axis
  /// only (a bias), else expanded to the whole tensor. Only add's rows may stay float16 (`half_row`).
  std::uint32_t constant_operand(const std::string& name, const Constant& c, const Dims& dims, bool derived,
                                 bool half_row, const std::string& where, DType dtype = DType::float32) {
    const Dims out = broadcast_dims(dims, c.dims, where);
    if (out != dims)
      unsupported(where, fmt::format("broadcasting the computed operand {} to {}", dims_text(dims), dims_text(out)));
    bool row = !dims.empty();
    for (std::size_t i = 0; i + 1 < c.dims.size(); ++i) row = row && c.dims[i] == 1;
    if (row && !dims.empty()) {
      Constant row_dims = c;
      row_dims.dims = {c.dims.empty() ? 1 : c.dims.back()};
      const bool as_is = !derived && c.dims.size() == 1 && c.dims[0] == dims.back();
      return add_weight(as_is ? name : name + ".row", {dims.back()}, expand_to(row_dims, {dims.back()}),
                        keeps_half(c, as_is && half_row), dtype);
    }
    // A value per row ([..., 1] of the other dims): a column, not the whole tensor.
    if (dims.size() >= 2 && !c.dims.empty() && c.dims.back() == 1 && dims.back() != 1) {
      Dims column = dims;
      column.back() = 1;
      return add_weight(name + ".column", {ir_shape(dims)[0], 1}, expand_to(c, column), false, dtype);
    }
    return add_weight(c.dims == dims && !derived ? name : name + ".expanded", ir_shape(dims), expand_to(c, dims), false,
                      dtype);
  }

  /// A computed value meeting a tensor of `dims`: the same dims, a row vector [n] / [1, n] (a
  /// value per column), or a column [..., 1] with the other dims of `dims` (a value per row,
  /// as a ReduceMean with keepdims leaves it).
  std::uint32_t computed_operand(const Computed& value, const Dims& dims, const std::string& where) {
    if (value.dims == dims) return tensor_of(value, where);
    bool row =
        !value.dims.empty() && !dims.empty() && value.dims.back() == dims.back() && value.dims.size() <= dims.size();
    for (std::size_t i = 0; row && i + 1 < value.dims.size(); ++i) row = value.dims[i] == 1;
    if (row) return tensor_as(value, {dims.back()}, where);
    // Right-aligned: the last dim 1, the others equal; dims value lacks in front must be 1.
    const std::size_t rank = value.dims.size(), full = dims.size();
    bool column = rank >= 1 && full >= 2 && rank <= full && value.dims.back() == 1 && dims.back() != 1;
    for (std::size_t j = 1; column && j < rank; ++j) column = value.dims[rank - 1 - j] == dims[full - 1 - j];
    for (std::size_t i = 0; column && i < full - rank; ++i) column = dims[i] == 1;
    if (!column) return broadcast_to(value, dims, where);
    return tensor_as(value, {ir_shape(dims)[0], 1}, where);
  }

  /// `value` broadcast to `dims` as numpy broadcasts: a gather copying each element where it
  /// repeats (the IR's own broadcasts, a row or a column, need none).
  std::uint32_t broadcast_to(const Computed& value, const Dims& dims, const std::string& where) {
    const std::string key = fresh_name(value_name(value) + ".broadcast");
    emit_movement(broadcast_movement(value.dims, dims, where), {MovedInput{key, &value, nullptr}}, 0.0, key,
                  node_index_, where);
    return tensor_of(computed_.at(key), where);
  }

  /// Add, Sub, Mul, Div: the computed operand first; a constant second operand is a row
  /// vector or expanded (constant_operand). Add and Mul commute; c - x is (-1 * x) + c.
  void import_binary(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    OpKind kind = binary_kind(type);
    if (type == "Mod" && int_attribute(node, "fmod", 0) != 0) kind = OpKind::fmod;
    const bool commutes = kind == OpKind::add || kind == OpKind::mul || kind == OpKind::max || kind == OpKind::min ||
                          kind == OpKind::equal || kind == OpKind::logical_and || kind == OpKind::logical_or ||
                          kind == OpKind::logical_xor;
    int first = 0, second = 1;
    bool negate_first = false;
    if (!computed_.count(node.input(0))) {
      if (kind == OpKind::div || kind == OpKind::prelu || kind == OpKind::power || kind == OpKind::mod ||
          kind == OpKind::fmod) {
        // A constant first operand of an op that does not commute: a weight of the output's dims.
        const Constant& c = constants_.at(node.input(0));
        const Computed& y = computed_.at(node.input(1));
        check_like(c, node.input(0), dtype_of(y), where);
        const Dims dims = broadcast_dims(c.dims, y.dims, where);
        const std::string name = fresh_name(node.input(0) + ".expanded");
        computed_[name] = Computed{add_weight(name, ir_shape(dims), expand_to(c, dims), false, dtype_of(y)), "", dims};
        onnx::NodeProto weighted = node;
        weighted.set_input(0, name);
        return import_binary(weighted, index, where);
      }
      negate_first = kind == OpKind::sub;
      kind = mirrored(kind);  // c < x is x > c
      std::swap(first, second);
    }
    const Computed& x = computed_.at(node.input(first));
    const std::string& other = node.input(second);
    if (x.channels_last) return import_feature_map_binary(node, kind, first, index, where);
    if (auto y = computed_.find(node.input(1 - first)); y != computed_.end() && y->second.channels_last)
      unsupported(where, fmt::format("{} of the computed {} and the feature map {} (two feature maps of the same "
                                     "dims, or a feature map and a constant per channel, are supported)",
                                     type, dims_text(x.dims), dims_text(y->second.dims)));
    Op op;
    op.kind = negate_first ? OpKind::add : kind;
    const DType x_dtype = dtype_of(x);
    std::uint32_t x_tensor = tensor_of(x, where);
    if (negate_first) {
      // c - x = (-1 * x) + c: the negation is exact, so one rounding as in c - x.
      Op negate;
      negate.kind = OpKind::mul;
      negate.inputs = {
          x_tensor, add_weight(node.output(0) + ".minus_one", {x.dims.empty() ? 1 : x.dims.back()},
                               std::vector<double>(static_cast<std::size_t>(x.dims.empty() ? 1 : x.dims.back()), -1.0),
                               false, x_dtype)};
      x_tensor = add_op(negate, node.output(0) + ".negated", index, where);
    }
    op.inputs = {x_tensor, 0};
    Dims dims = x.dims;
    if (auto c = constants_.find(other); c != constants_.end()) {
      Constant operand = c->second;
      check_like(operand, other, x_dtype, where);
      // A constant of more dims than the computed operand: that operand broadcast to them first.
      if (const Dims out = broadcast_dims(dims, operand.dims, where); out != dims) {
        op.inputs[0] = broadcast_to(Computed{x_tensor, "", dims}, out, where);
        dims = out;
      }
      // x - c = x + (-c), exactly: the bias add the device fuses.
      if (kind == OpKind::sub && !negate_first) {
        for (double& v : operand.values) v = -v;
        op.kind = OpKind::add;
      }
      const bool derived = kind == OpKind::sub && !negate_first;
      op.inputs[1] = constant_operand(other, operand, dims, derived,
                                      op.kind == OpKind::add && x_dtype == DType::float32, where, x_dtype);
    } else {
      const Computed& y = computed_.at(other);
      const Dims out = broadcast_dims(x.dims, y.dims, where);
      if (out != x.dims && out == y.dims && commutes) {
        // The larger operand goes first: the IR broadcasts the second as a row or a column.
        dims = y.dims;
        op.inputs = {tensor_of(y, where), computed_operand(x, dims, where)};
      } else if (out != x.dims) {  // the first operand broadcast too (a gather)
        dims = out;
        op.inputs = {broadcast_to(x, out, where), computed_operand(y, dims, where)};
      } else {
        op.inputs[1] = computed_operand(y, dims, where);
      }
    }
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", dims};
  }

  // --- Tensor types: comparisons, logic, Where, Cast, If -----------------------------------

  static OpKind binary_kind(const std::string& type) {
    if (type == "Add") return OpKind::add;
    if (type == "Sub") return OpKind::sub;
    if (type == "Mul") return OpKind::mul;
    if (type == "Equal") return OpKind::equal;
    if (type == "Greater") return OpKind::greater;
    if (type == "GreaterOrEqual") return OpKind::greater_or_equal;
    if (type == "Less") return OpKind::less;
    if (type == "LessOrEqual") return OpKind::less_or_equal;
    if (type == "And") return OpKind::logical_and;
    if (type == "Or") return OpKind::logical_or;
    if (type == "Xor") return OpKind::logical_xor;
    if (type == "Max") return OpKind::max;
    if (type == "Min") return OpKind::min;
    if (type == "PRelu") return OpKind::prelu;
    if (type == "Pow") return OpKind::power;
    if (type == "Mod") return OpKind::mod;
    return OpKind::div;
  }

  /// The comparison with its operands swapped (a < b is b > a); other kinds are their own.
  static OpKind mirrored(OpKind kind) {
    switch (kind) {
      case OpKind::less:
        return OpKind::greater;
      case OpKind::greater:
        return OpKind::less;
      case OpKind::less_or_equal:
        return OpKind::greater_or_equal;
      case OpKind::greater_or_equal:
        return OpKind::less_or_equal;
      default:
        return kind;
    }
  }

  /// A constant that meets a computed tensor of `dtype` must be of its kind: float constants
  /// for float tensors, integer ones for int32, bool for bool.
  void check_like(const Constant& c, const std::string& name, DType dtype, const std::string& where) const {
    if (dtype == DType::float32 || dtype == DType::float16) return check_float(c, name, where);
    const bool integer = c.dtype != TensorProto::FLOAT && c.dtype != TensorProto::FLOAT16 &&
                         c.dtype != TensorProto::DOUBLE && c.dtype != TensorProto::BOOL;
    if (dtype == DType::int32 ? !integer : c.dtype != TensorProto::BOOL)
      unsupported(where, fmt::format("constant '{}' is {} beside a computed {} tensor", name, dtype_text(c.dtype),
                                     dtype_name(dtype)));
    for (double v : c.values)
      if (v < -2147483648.0 || v > 2147483647.0)
        unsupported(where,
                    fmt::format("constant '{}' holds {}, outside int32 (the device holds integers as int32)", name, v));
  }

  /// Where(condition, x, y): the three of one shape on the device (constants expanded to it).
  void import_where(const onnx::NodeProto& node, int index, const std::string& where) {
    Dims dims;
    for (int i = 0; i < 3; ++i) {
      const std::string& name = node.input(i);
      const Dims& d = constants_.count(name) ? constants_.at(name).dims : computed_.at(name).dims;
      dims = i == 0 ? d : broadcast_dims(dims, d, where);
    }
    // The values' type: a computed one's, else the constants' kind.
    std::optional<DType> values;
    for (int i = 1; i < 3; ++i)
      if (computed_.count(node.input(i))) values = dtype_of(computed_.at(node.input(i)));
    if (!values) {
      const int type = constants_.at(node.input(1)).dtype;
      values = type == TensorProto::BOOL ? DType::boolean
               : type == TensorProto::FLOAT || type == TensorProto::DOUBLE || type == TensorProto::FLOAT16
                   ? DType::float32
                   : DType::int32;
    }
    Op op;
    op.kind = OpKind::where;
    for (int i = 0; i < 3; ++i) {
      const std::string& name = node.input(i);
      const DType dtype = i == 0 ? DType::boolean : *values;
      if (auto c = constants_.find(name); c != constants_.end()) {
        check_like(c->second, name, dtype, where);
        op.inputs.push_back(add_weight(name + ".expanded", ir_shape(dims), expand_to(c->second, dims), false, dtype));
        continue;
      }
      const Computed& value = computed_.at(name);
      if (value.channels_last && value.dims != dims)
        unsupported(where,
                    fmt::format("Where of the feature map {} broadcast to {}", dims_text(value.dims), dims_text(dims)));
      op.inputs.push_back(value.dims == dims ? tensor_of(value, where) : broadcast_to(value, dims, where));
    }
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", dims};
  }

  /// Cast (and CastLike) of a computed tensor: between float, int32 and bool on the device. A
  /// cast between float types is a view (the device computes in float32; the host writes an
  /// output of another float type), as is one between int32 and int64 (int64 lives as int32).
  void import_cast(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "CastLike of a constant");
    const Computed& x = computed_.at(node.input(0));
    int to = static_cast<int>(int_attribute(node, "to", TensorProto::FLOAT));
    if (node.op_type() == "CastLike") {
      const std::string& like = node.input(1);
      to = constants_.count(like) ? constants_.at(like).dtype : -1;
      if (to < 0) {
        for (const auto& value : model_.graph().input())
          if (value.name() == like && value.type().has_tensor_type()) to = value.type().tensor_type().elem_type();
        for (const auto& value : model_.graph().value_info())
          if (value.name() == like && value.type().has_tensor_type()) to = value.type().tensor_type().elem_type();
      }
    }
    const bool narrow = to == TensorProto::INT8 || to == TensorProto::UINT8 || to == TensorProto::INT16 ||
                        to == TensorProto::UINT16 || to == TensorProto::UINT32 || to == TensorProto::UINT64;
    const std::optional<DType> target = narrow ? std::nullopt : device_dtype(to);
    if (!target)
      unsupported(where, fmt::format("Cast of a computed tensor to {} (the device casts between float, int32/int64 "
                                     "and bool)",
                                     to < 0 ? std::string("an unknown type") : dtype_text(to)));
    const DType from = dtype_of(x);
    if (from == *target || (from == DType::float16 && *target == DType::float32)) {
      computed_[node.output(0)] = x;  // float to float, int to int: the same values on the device
      return;
    }
    Op op;
    op.kind = OpKind::cast;
    op.inputs = {tensor_of(x, where)};
    computed_[node.output(0)] =
        Computed{add_op(op, node.output(0), index, where, *target), "", x.dims, x.channels_last};
  }

  /// If on a constant condition (a frozen input, folded shapes): the taken branch's nodes are
  /// imported in its place, its outputs become the If's. A computed condition is refused.
  void import_if(const onnx::NodeProto& node, int index, const std::string& where) {
    auto condition = constants_.find(node.input(0));
    if (condition == constants_.end())
      unsupported(where, fmt::format("If on a condition that is not a constant: {}", not_constant(node.input(0))));
    if (condition->second.values.size() != 1)
      unsupported(where, fmt::format("If on a condition of {} values", condition->second.values.size()));
    const bool taken = condition->second.values[0] != 0;
    const onnx::AttributeProto* branch = find_attribute(node, taken ? "then_branch" : "else_branch");
    if (!branch || !branch->has_g())
      throw Error(fmt::format("{}: If has no {} graph", where, taken ? "then_branch" : "else_branch"));
    const onnx::GraphProto& body = branch->g();
    if (body.output_size() != node.output_size())
      throw Error(fmt::format("{}: the {} has {} outputs, the If {}", where, taken ? "then_branch" : "else_branch",
                              body.output_size(), node.output_size()));
    for (const TensorProto& initializer : body.initializer())
      constants_[initializer.name()] =
          read_tensor(initializer, fmt::format("{}: initializer '{}'", where, initializer.name()));
    for (const onnx::NodeProto& inner : body.node()) {
      for (const std::string& input : inner.input()) ++readers_[input];
      import_node(inner, index);
    }
    ++result_.folded_nodes;
    for (int i = 0; i < node.output_size(); ++i) {
      const std::string& from = body.output(i).name();
      if (auto c = constants_.find(from); c != constants_.end()) constants_[node.output(i)] = c->second;
      else if (auto v = computed_.find(from); v != computed_.end()) computed_[node.output(i)] = v->second;
      else throw Error(fmt::format("{}: the taken branch computes no '{}'", where, from));
    }
  }

  // --- Convolutional networks -------------------------------------------------------------
  // A feature map [N, C, H, W] (or [N, C, L]) lives channels last, [N*H*W, C]: conv and pooling
  // read it so, per-channel constants (biases, batch norms) are row vectors of it, and
  // elementwise ops do not care. A graph input arrives row-major ([N*C, H*W]) and is re-laid out
  // once by a transpose (written transposed by the host); an output goes back the same way.

  /// The channels-last IR tensor of a feature map value of rank 3 or 4.
  /// The re-layout, when one is needed, takes the place of node `index`, the op that reads the map.
  std::uint32_t feature_map(const Computed& value, int index, const std::string& where) {
    if (value.dims.size() < 3 || value.dims.size() > 4)
      unsupported(where, fmt::format("a feature map of rank {} {} (rank 3 [N, C, L] or 4 [N, C, H, W] is supported)",
                                     value.dims.size(), dims_text(value.dims)));
    if (value.channels_last) return tensor_of(value, where);
    const std::int64_t n = value.dims[0], c = value.dims[1], spatial = spatial_size(value.dims);
    // A map computed row-major by another operator (a Concat, a Resize) is re-laid out [N*C, spatial]
    // by tensor_as (a gather), then transposed.
    if (value.tensor < 0)
      if (auto done = channels_last_inputs_.find(value.input); done != channels_last_inputs_.end()) return done->second;
    Op transpose;
    transpose.kind = OpKind::transpose;
    transpose.batch = static_cast<std::uint32_t>(n);
    transpose.inputs = {tensor_as(value, {n * c, spatial}, where)};
    const std::string name = (value.tensor < 0 ? value.input : graph_.tensors[value.tensor].name) + ".channels_last";
    const std::uint32_t tensor = add_op(transpose, name, index, where);
    if (value.tensor < 0) channels_last_inputs_[value.input] = tensor;
    return tensor;
  }

  /// A feature map back in row-major order ([N*C, spatial], ONNX's own), for a graph output.
  Computed to_row_major(const Computed& value, const std::string& name, const std::string& where) {
    // The output's name goes to the row-major tensor; the channels-last one gives it up.
    std::string& own = graph_.tensors[static_cast<std::size_t>(value.tensor)].name;
    if (own == name) {
      names_.erase(own);
      own = unique_name(name + ".channels_last");
    }
    Op transpose;
    transpose.kind = OpKind::transpose;
    transpose.batch = static_cast<std::uint32_t>(value.dims.at(0));
    transpose.inputs = {tensor_of(value, where)};
    // A graph output's re-layout has no node of its own: its place is unknown (0).
    return Computed{add_op(transpose, name + ".row_major", -1, where), "", value.dims, false};
  }

  /// A feature map seen with new `dims` (Flatten, Reshape, Squeeze): where its spatial size is 1
  /// the channels-last layout [N, C] is also the row-major one.
  Computed feature_map_view(const Computed& value, const Dims& dims, const std::string& where) {
    const std::int64_t n = value.dims.at(0), c = value.dims.at(1);
    Computed view = value;
    view.dims = dims;
    bool ones = dims.size() >= 3 && dims[0] == n && dims[1] == c;
    for (std::size_t i = 2; ones && i < dims.size(); ++i) ones = dims[i] == 1;
    if (spatial_size(value.dims) == 1 && ones) return view;  // still [N, C, 1, 1]
    view.channels_last = false;
    if (spatial_size(value.dims) == 1 && ir_shape(dims) == std::vector<std::int64_t>{n, c}) return view;
    if (c == 1) return view;  // one channel: the elements are in row-major order already
    // Any other reshape: the map copied into row-major order (a gather), which is then viewed.
    const std::string key = fresh_name(value_name(value) + ".row_major");
    Movement in_order{value.dims, {}};
    const std::int64_t count = element_count(value.dims, where);
    for (std::int64_t i = 0; i < count; ++i) in_order.sources.push_back(source_of(0, i));
    emit_movement(in_order, {MovedInput{key, &value, nullptr}}, 0.0, key, node_index_, where);
    Computed row_major = computed_.at(key);
    row_major.dims = dims;
    return row_major;
  }

  /// Kernel, strides, dilations and pads of a Conv or pooling node over `field` (1 or 2 dims),
  /// auto_pad resolved as ONNX defines it, ceil_mode by extra padding at the end.
  Window window_of(const onnx::NodeProto& node, const Dims& field, const Dims& kernel, const std::string& where) {
    const std::size_t rank = field.size();
    auto list = [&](const char* name, std::int64_t fallback, std::size_t size) {
      std::vector<std::int64_t> values = ints_attribute(node, name);
      if (values.empty()) values.assign(size, fallback);
      if (values.size() != size)
        unsupported(where, fmt::format("'{}' of {} values for a {}-D field", name, values.size(), rank));
      for (std::int64_t v : values)
        if (v < (fallback == 0 ? 0 : 1) || v > (1 << 24)) unsupported(where, fmt::format("'{}' of {}", name, v));
      return values;
    };
    const std::vector<std::int64_t> strides = list("strides", 1, rank), dilations = list("dilations", 1, rank);
    std::vector<std::int64_t> pads = list("pads", 0, 2 * rank);
    const onnx::AttributeProto* auto_pad = find_attribute(node, "auto_pad");
    const std::string mode = auto_pad ? auto_pad->s() : "NOTSET";
    const bool ceil = int_attribute(node, "ceil_mode", 0) != 0;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t span = (kernel[i] - 1) * dilations[i] + 1;
      if (mode == "VALID") {
        pads[i] = pads[i + rank] = 0;
      } else if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
        const std::int64_t out = (field[i] + strides[i] - 1) / strides[i];
        const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * strides[i] + span - field[i]);
        pads[i] = mode == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[i + rank] = total - pads[i];
      } else if (mode != "NOTSET") {
        unsupported(where, fmt::format("auto_pad '{}'", mode));
      }
      if (ceil) {  // the last window may start past the end, within the padding before it
        const std::int64_t room = field[i] + pads[i] + pads[i + rank] - span;
        if (room >= 0) {
          std::int64_t out = (room + strides[i] - 1) / strides[i] + 1;
          if ((out - 1) * strides[i] >= field[i] + pads[i]) --out;
          pads[i + rank] +=
              std::max<std::int64_t>(0, (out - 1) * strides[i] + span - (field[i] + pads[i] + pads[i + rank]));
        }
      }
    }
    Window w;
    const bool two = rank == 2;
    w.height = static_cast<std::uint32_t>(two ? field[0] : 1);
    w.width = static_cast<std::uint32_t>(field[rank - 1]);
    w.kernel_h = static_cast<std::uint32_t>(two ? kernel[0] : 1);
    w.kernel_w = static_cast<std::uint32_t>(kernel[rank - 1]);
    w.stride_h = static_cast<std::uint32_t>(two ? strides[0] : 1);
    w.stride_w = static_cast<std::uint32_t>(strides[rank - 1]);
    w.dilation_h = static_cast<std::uint32_t>(two ? dilations[0] : 1);
    w.dilation_w = static_cast<std::uint32_t>(dilations[rank - 1]);
    w.pad_top = static_cast<std::uint32_t>(two ? pads[0] : 0);
    w.pad_left = static_cast<std::uint32_t>(pads[rank - 1]);
    w.pad_bottom = static_cast<std::uint32_t>(two ? pads[rank] : 0);
    w.pad_right = static_cast<std::uint32_t>(pads[2 * rank - 1]);
    if (w.out_height() <= 0 || w.out_width() <= 0)
      unsupported(
          where, fmt::format("a kernel {} that does not fit the padded field {}", dims_text(kernel), dims_text(field)));
    return w;
  }

  /// The output dims [N, M, out field...] of a window op on `x`.
  static Dims window_dims(const Dims& x, const Window& w, std::int64_t channels) {
    if (x.size() == 3) return {x[0], channels, w.out_width()};
    return {x[0], channels, w.out_height(), w.out_width()};
  }

  /// Conv: constant weights [M, C/group, kH, kW] laid out [kH*kW*C/group, M] (a tap's channels
  /// contiguous, as the AMP streams them), a constant bias [M].
  void import_conv(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "Conv of a constant input");
    const Computed& x = computed_.at(node.input(0));
    auto weights = constants_.find(node.input(1));
    if (weights == constants_.end())
      unsupported(where, fmt::format("Conv with weights that are not a constant: {}", not_constant(node.input(1))));
    const Constant& w = weights->second;
    check_float(w, node.input(1), where);
    if (x.dims.size() < 3 || x.dims.size() > 4 || w.dims.size() != x.dims.size())
      unsupported(where, fmt::format("Conv of {} by weights {} (1-D and 2-D convolutions are supported)",
                                     dims_text(x.dims), dims_text(w.dims)));
    const std::int64_t group = int_attribute(node, "group", 1);
    const std::int64_t channels = x.dims[1], outs = w.dims[0];
    if (group < 1 || channels % group != 0 || outs % group != 0 || w.dims[1] != channels / group)
      unsupported(where,
                  fmt::format("Conv of {} channels in {} groups by weights {}", channels, group, dims_text(w.dims)));
    const Dims field(x.dims.begin() + 2, x.dims.end()), kernel(w.dims.begin() + 2, w.dims.end());
    if (const std::vector<std::int64_t> shape = ints_attribute(node, "kernel_shape"); !shape.empty() && shape != kernel)
      unsupported(where, fmt::format("kernel_shape {} unlike the weights' {}", dims_text(shape), dims_text(kernel)));
    Op op;
    op.kind = OpKind::conv;
    op.batch = static_cast<std::uint32_t>(x.dims[0]);
    op.window = window_of(node, field, kernel, where);
    op.window.groups = static_cast<std::uint32_t>(group);
    const std::int64_t group_in = channels / group, taps = element_count(kernel, where);
    std::vector<double> laid_out(static_cast<std::size_t>(taps * group_in * outs));
    for (std::int64_t m = 0; m < outs; ++m)
      for (std::int64_t c = 0; c < group_in; ++c)
        for (std::int64_t t = 0; t < taps; ++t)
          laid_out[static_cast<std::size_t>((t * group_in + c) * outs + m)] =
              w.values[static_cast<std::size_t>((m * group_in + c) * taps + t)];
    op.inputs = {feature_map(x, index, where),
                 add_weight(node.input(1) + ".taps", {taps * group_in, outs}, laid_out, false)};
    if (node.input_size() > 2 && !node.input(2).empty()) {
      auto bias = constants_.find(node.input(2));
      if (bias == constants_.end()) unsupported(where, fmt::format("Conv with a computed bias '{}'", node.input(2)));
      check_float(bias->second, node.input(2), where);
      if (bias->second.values.size() != static_cast<std::size_t>(outs))
        unsupported(where, fmt::format("a bias of dims {} for {} output channels", dims_text(bias->second.dims), outs));
      op.inputs.push_back(add_weight(node.input(2), {outs}, bias->second.values, false));
    }
    computed_[node.output(0)] =
        Computed{add_op(op, node.output(0), index, where), "", window_dims(x.dims, op.window, outs), true};
  }

  /// ConvTranspose as a Conv: the input's pixels spread `stride` apart with zeros between them and
  /// padded by d*(k-1) less ONNX's pads (a gather, its padding filled with 0), then a stride-1
  /// convolution by the kernel flipped, its input and output channels swapped. The zeros cost MACs
  /// a transposed-convolution vertex would skip (stride^2 more at stride 2).
  void import_conv_transpose(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "ConvTranspose of a constant input");
    const Computed& x = computed_.at(node.input(0));
    auto weights = constants_.find(node.input(1));
    if (weights == constants_.end())
      unsupported(where,
                  fmt::format("ConvTranspose with weights that are not a constant: {}", not_constant(node.input(1))));
    const Constant& w = weights->second;
    check_float(w, node.input(1), where);
    check_values(w, where);
    if (x.dims.size() < 3 || x.dims.size() > 4 || w.dims.size() != x.dims.size())
      unsupported(where, fmt::format("ConvTranspose of {} by weights {} (1-D and 2-D are supported)", dims_text(x.dims),
                                     dims_text(w.dims)));
    const std::int64_t group = int_attribute(node, "group", 1), channels = x.dims[1];
    if (group < 1 || channels % group != 0 || w.dims[0] != channels)
      unsupported(where, fmt::format("ConvTranspose of {} channels in {} groups by weights {}", channels, group,
                                     dims_text(w.dims)));
    const std::size_t rank = x.dims.size() - 2;
    const Dims kernel(w.dims.begin() + 2, w.dims.end());
    auto list = [&](const char* name, std::int64_t fallback, std::size_t size, std::int64_t low) {
      std::vector<std::int64_t> values = ints_attribute(node, name);
      if (values.empty()) values.assign(size, fallback);
      if (values.size() != size)
        unsupported(where, fmt::format("'{}' of {} values for a {}-D field", name, values.size(), rank));
      for (std::int64_t v : values)
        if (v < low || v > (1 << 24)) unsupported(where, fmt::format("'{}' of {}", name, v));
      return values;
    };
    const std::vector<std::int64_t> strides = list("strides", 1, rank, 1), dilations = list("dilations", 1, rank, 1),
                                    extra = list("output_padding", 0, rank, 0);
    std::vector<std::int64_t> pads = list("pads", 0, 2 * rank, 0);
    const std::string auto_pad = string_attribute(node, "auto_pad", "NOTSET");
    std::vector<std::int64_t> wanted = ints_attribute(node, "output_shape");
    if (wanted.size() > rank) wanted.erase(wanted.begin(), wanted.end() - static_cast<std::ptrdiff_t>(rank));
    if (wanted.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"))
      for (std::size_t i = 0; i < rank; ++i) wanted.push_back(x.dims[2 + i] * strides[i]);
    if (auto_pad == "VALID") pads.assign(2 * rank, 0);
    if (!wanted.empty()) {  // ONNX's pads for an output shape
      if (wanted.size() != rank)
        unsupported(where, fmt::format("output_shape {} for a {}-D field", dims_text(wanted), rank));
      for (std::size_t i = 0; i < rank; ++i) {
        const std::int64_t total =
            strides[i] * (x.dims[2 + i] - 1) + extra[i] + (kernel[i] - 1) * dilations[i] + 1 - wanted[i];
        // Halves floored, as ONNX's reference: an output_shape past the full output (a negative
        // total) extends the end, as output_padding does.
        const std::int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);
        const bool upper = auto_pad == "SAME_UPPER";
        pads[i] = upper ? half : total - half;
        pads[rank + i] = upper ? total - half : half;
      }
    }
    // The spread and padded field: size (in - 1) * s + 1 + (d*(k-1) - pad_begin) + (d*(k-1) - pad_end + extra).
    Dims spread_dims{x.dims[0], channels};
    std::vector<std::int64_t> before(rank);
    for (std::size_t i = 0; i < rank; ++i) {
      const std::int64_t reach = dilations[i] * (kernel[i] - 1);
      before[i] = reach - pads[i];
      const auto far = [](std::int64_t pad) { return pad > (1 << 24) || pad < -(1 << 24); };
      if (x.dims[2 + i] > (std::int64_t{1} << 31) || far(pads[i]) || far(pads[rank + i]))
        unsupported(where, fmt::format("ConvTranspose of {} with pads {}", dims_text(x.dims), dims_text(pads)));
      const std::int64_t size = (x.dims[2 + i] - 1) * strides[i] + 1 + before[i] + reach - pads[rank + i] + extra[i];
      if (size < dilations[i] * (kernel[i] - 1) + 1)
        unsupported(where, fmt::format("ConvTranspose whose pads {} leave no output", dims_text(pads)));
      spread_dims.push_back(size);
    }
    const std::int64_t pixels = spatial_size(spread_dims), images = x.dims[0];
    if (images * pixels * channels > kMaxFoldedElements)
      unsupported(where, fmt::format("ConvTranspose spreading {} to {} (at most {} elements)", dims_text(x.dims),
                                     dims_text(spread_dims), kMaxFoldedElements));
    Movement spread{{images * pixels, channels}, {}};  // channels last: a row per pixel
    std::vector<std::int64_t> at(rank);
    for (std::int64_t row = 0; row < images * pixels; ++row) {
      const std::int64_t image = row / pixels;
      for (std::int64_t rest = row % pixels, i = static_cast<std::int64_t>(rank) - 1; i >= 0; --i) {
        at[static_cast<std::size_t>(i)] = rest % spread_dims[2 + static_cast<std::size_t>(i)];
        rest /= spread_dims[2 + static_cast<std::size_t>(i)];
      }
      std::int64_t pixel = 0;  // the input pixel this one holds, or -1 for a zero
      for (std::size_t i = 0; i < rank && pixel >= 0; ++i) {
        const std::int64_t u = at[i] - before[i];
        if (u < 0 || u % strides[i] != 0 || u / strides[i] >= x.dims[2 + i]) pixel = -1;
        else pixel = pixel * x.dims[2 + i] + u / strides[i];
      }
      for (std::int64_t c = 0; c < channels; ++c)
        spread.sources.push_back(pixel < 0 ? kPadded
                                           : source_of(0, (image * channels + c) * spatial_size(x.dims) + pixel));
    }
    const std::string& output = node.output(0);
    const std::string spread_name = fresh_name(output + ".spread");
    emit_movement(spread, {MovedInput{node.input(0), &x, nullptr}}, 0.0, spread_name, index, where);
    computed_[spread_name].dims = spread_dims;
    computed_[spread_name].channels_last = true;
    // The kernel flipped, [C, M/g, k...] to [M, C/g, k...].
    const std::int64_t group_in = channels / group, group_out = w.dims[1], outs = group_out * group;
    const std::int64_t taps = element_count(kernel, where);
    Constant flipped{w.dtype, {outs, group_in}, std::vector<double>(w.values.size())};
    flipped.dims.insert(flipped.dims.end(), kernel.begin(), kernel.end());
    for (std::int64_t g = 0; g < group; ++g)
      for (std::int64_t c = 0; c < group_in; ++c)
        for (std::int64_t m = 0; m < group_out; ++m)
          for (std::int64_t t = 0; t < taps; ++t)
            flipped.values[static_cast<std::size_t>(((g * group_out + m) * group_in + c) * taps + (taps - 1 - t))] =
                w.values[static_cast<std::size_t>(((g * group_in + c) * group_out + m) * taps + t)];
    const std::string kernel_name = add_constant(output + ".flipped_kernel", std::move(flipped));
    onnx::NodeProto conv = made_node("Conv", {spread_name, kernel_name}, {output});
    if (node.input_size() > 2 && !node.input(2).empty()) conv.add_input(node.input(2));
    set_int(conv, "group", group);
    set_ints(conv, "dilations", dilations);
    import_expansion({conv}, index);
  }

  void import_pool(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    if (!computed_.count(node.input(0))) unsupported(where, fmt::format("{} of a constant", type));
    const Computed& x = computed_.at(node.input(0));
    if (x.dims.size() < 3 || x.dims.size() > 4)
      unsupported(where, fmt::format("{} of {} (1-D and 2-D pooling is supported)", type, dims_text(x.dims)));
    const Dims field(x.dims.begin() + 2, x.dims.end());
    const bool global = type.starts_with("Global");
    Op op;
    op.kind = type == "MaxPool" || type == "GlobalMaxPool" ? OpKind::max_pool : OpKind::avg_pool;
    op.batch = static_cast<std::uint32_t>(x.dims[0]);
    if (global) {
      op.window.height = static_cast<std::uint32_t>(field.size() == 2 ? field[0] : 1);
      op.window.width = static_cast<std::uint32_t>(field.back());
      op.window.kernel_h = op.window.height;
      op.window.kernel_w = op.window.width;
    } else {
      const Dims kernel = ints_attribute(node, "kernel_shape");
      if (kernel.size() != field.size())
        unsupported(where, fmt::format("kernel_shape {} for the field {}", dims_text(kernel), dims_text(field)));
      for (std::int64_t k : kernel)
        if (k < 1 || k > (1 << 24)) unsupported(where, fmt::format("kernel_shape {}", dims_text(kernel)));
      op.window = window_of(node, field, kernel, where);
      if (op.kind == OpKind::avg_pool && int_attribute(node, "count_include_pad", 0) != 0) {
        op.window.count_include_pad = true;
        const Window plain = window_of_without_ceil(node, field, kernel, where);
        if (plain.pad_bottom != op.window.pad_bottom || plain.pad_right != op.window.pad_right)
          unsupported(where, "AveragePool with count_include_pad and ceil_mode windows past the padding");
      }
    }
    op.inputs = {feature_map(x, index, where)};
    computed_[node.output(0)] =
        Computed{add_op(op, node.output(0), index, where), "", window_dims(x.dims, op.window, x.dims[1]), true};
  }

  Window window_of_without_ceil(const onnx::NodeProto& node, const Dims& field, const Dims& kernel,
                                const std::string& where) {
    onnx::NodeProto plain = node;
    for (auto& attribute : *plain.mutable_attribute())
      if (attribute.name() == "ceil_mode") attribute.set_i(0);
    return window_of(plain, field, kernel, where);
  }

  /// Clip (ReLU6 as torch exports it): constant bounds, inputs from opset 11, attributes before.
  void import_clip(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "Clip of a constant (it is not folded)");
    const Computed& x = computed_.at(node.input(0));
    Op op;
    op.kind = OpKind::clip;
    if (result_.opset < 11) {
      op.clip_low = float_attribute(node, "min", -std::numeric_limits<float>::infinity());
      op.clip_high = float_attribute(node, "max", std::numeric_limits<float>::infinity());
    }
    for (int i = 1; i <= 2 && i < node.input_size(); ++i) {
      if (node.input(i).empty()) continue;
      auto bound = constants_.find(node.input(i));
      if (bound == constants_.end())
        unsupported(where, fmt::format("Clip with a bound that is not a constant: {}", not_constant(node.input(i))));
      if (bound->second.values.size() != 1)
        unsupported(where, fmt::format("Clip with a non-scalar bound '{}' (bounds must be constants of one value)",
                                       node.input(i)));
      (i == 1 ? op.clip_low : op.clip_high) = bound->second.values[0];
    }
    if (!(op.clip_low <= op.clip_high))
      unsupported(where, fmt::format("Clip with min {} above max {}", op.clip_low, op.clip_high));
    op.inputs = {tensor_of(x, where)};
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", x.dims, x.channels_last};
  }

  /// LeakyRelu, HardSigmoid and HardSwish as the elementwise ops they are made of (not fused):
  /// LeakyRelu x + (alpha - 1) * min(x, 0); HardSigmoid clip(alpha * x + beta, 0, 1); HardSwish
  /// x * HardSigmoid(x) with alpha 1/6 and beta 1/2.
  void import_activation(const onnx::NodeProto& node, int index, const std::string& where) {
    const std::string& type = node.op_type();
    if (!computed_.count(node.input(0))) unsupported(where, fmt::format("{} of a constant (it is not folded)", type));
    const Computed& x = computed_.at(node.input(0));
    const std::string& out = node.output(0);
    const std::uint32_t input = tensor_of(x, where);
    const std::int64_t cols = graph_.tensors[input].shape.back();
    auto row = [&](const std::string& name, double value) {
      return add_weight(out + "." + name, {cols}, std::vector<double>(static_cast<std::size_t>(cols), value), false);
    };
    auto make = [&](OpKind kind, std::vector<std::uint32_t> inputs, const std::string& name, double low = 0,
                    double high = 0) {
      Op op;
      op.kind = kind;
      op.inputs = std::move(inputs);
      if (kind == OpKind::clip) op.clip_low = low, op.clip_high = high;
      return add_op(op, name, index, where);
    };
    std::uint32_t y = 0;
    if (type == "LeakyRelu") {
      const double alpha = float_attribute(node, "alpha", 0.01f);
      const std::uint32_t negative =
          make(OpKind::clip, {input}, out + ".negative", -std::numeric_limits<double>::infinity(), 0.0);
      const std::uint32_t scaled = make(OpKind::mul, {negative, row("slope", alpha - 1.0)}, out + ".scaled");
      y = make(OpKind::add, {input, scaled}, out);
    } else {
      const bool swish = type == "HardSwish";
      const double alpha = swish ? 1.0 / 6.0 : float_attribute(node, "alpha", 0.2f);
      const double beta = swish ? 0.5 : float_attribute(node, "beta", 0.5f);
      const std::uint32_t scaled = make(OpKind::mul, {input, row("alpha", alpha)}, out + ".scaled");
      const std::uint32_t shifted = make(OpKind::add, {scaled, row("beta", beta)}, out + ".shifted");
      y = make(OpKind::clip, {shifted}, swish ? out + ".gate" : out, 0.0, 1.0);
      if (swish) y = make(OpKind::mul, {input, y}, out);
    }
    computed_[out] = Computed{y, "", x.dims, x.channels_last};
  }

  /// BatchNormalization (inference): y = (x - mean) / sqrt(var + eps) * scale + B per channel.
  /// Folded into the Conv that alone produced x (its weights and bias rescaled), else a
  /// per-channel multiply and add.
  void import_batch_norm(const onnx::NodeProto& node, int index, const std::string& where) {
    if (!computed_.count(node.input(0))) unsupported(where, "BatchNormalization of a constant");
    int outputs = node.output_size();
    while (outputs > 1 && node.output(outputs - 1).empty()) --outputs;
    if (outputs != 1 || int_attribute(node, "training_mode", 0) != 0)
      unsupported(where, "BatchNormalization in training mode (inference only: one output)");
    const Computed& x = computed_.at(node.input(0));
    if (x.dims.size() < 2) unsupported(where, fmt::format("BatchNormalization of {}", dims_text(x.dims)));
    const std::int64_t channels = x.dims[1];
    if (node.input_size() < 5) unsupported(where, "BatchNormalization without its four parameters");
    bool computed_parameters = false;
    for (int i = 1; i <= 4; ++i) computed_parameters = computed_parameters || !constants_.count(node.input(i));
    if (computed_parameters) return import_batch_norm_of_inputs(node, index, where);
    std::array<const Constant*, 4> parameters{};
    for (int i = 1; i <= 4; ++i) {
      auto found = constants_.find(node.input(i));
      check_float(found->second, node.input(i), where);
      if (found->second.values.size() != static_cast<std::size_t>(channels))
        unsupported(where, fmt::format("'{}' of dims {} for {} channels", node.input(i), dims_text(found->second.dims),
                                       channels));
      parameters[static_cast<std::size_t>(i - 1)] = &found->second;
    }
    const double epsilon = float_attribute(node, "epsilon", 1e-5f);
    std::vector<double> scale(static_cast<std::size_t>(channels)), shift(static_cast<std::size_t>(channels));
    for (std::size_t c = 0; c < scale.size(); ++c) {
      scale[c] = parameters[0]->values[c] / std::sqrt(parameters[3]->values[c] + epsilon);
      shift[c] = parameters[1]->values[c] - parameters[2]->values[c] * scale[c];
    }
    // Fold into the conv whose output nothing else reads.
    Op* conv = x.tensor >= 0 && !graph_.ops.empty() ? &graph_.ops.back() : nullptr;
    if (conv && conv->kind == OpKind::conv && conv->output == static_cast<std::uint32_t>(x.tensor) &&
        readers_[node.input(0)] == 1) {
      Tensor& weights = graph_.tensors[conv->inputs[1]];
      std::vector<float>& w = result_.weights.at(weights.name);
      const std::size_t outs = static_cast<std::size_t>(weights.shape[1]);
      for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(double(w[i]) * scale[i % outs]);
      std::vector<double> bias(outs, 0.0);
      if (conv->inputs.size() == 3) {
        const std::vector<float>& old = result_.weights.at(graph_.tensors[conv->inputs[2]].name);
        for (std::size_t m = 0; m < outs; ++m) bias[m] = old[m];
        conv->inputs.pop_back();
      }
      for (std::size_t m = 0; m < outs; ++m) bias[m] = bias[m] * scale[m] + shift[m];
      conv->inputs.push_back(
          add_weight(node.output(0) + ".folded_bias", {static_cast<std::int64_t>(outs)}, bias, false));
      computed_[node.output(0)] = x;
      return;
    }
    // A per-channel scale and shift: row vectors of a channels-last map (or of [N, C]).
    Op multiply;
    multiply.kind = OpKind::mul;
    multiply.inputs = {batch_norm_input(x, index, where),
                       add_weight(node.output(0) + ".scale", {channels}, scale, false)};
    Op add;
    add.kind = OpKind::add;
    add.inputs = {add_op(multiply, node.output(0) + ".scaled", index, where),
                  add_weight(node.output(0) + ".shift", {channels}, shift, false)};
    computed_[node.output(0)] = Computed{add_op(add, node.output(0), index, where), "", x.dims, x.dims.size() > 2};
  }

  /// The tensor a per-channel batch norm reads: [N, C] as it is, a feature map channels last.
  std::uint32_t batch_norm_input(const Computed& x, int index, const std::string& where) {
    return x.dims.size() > 2 ? feature_map(x, index, where) : tensor_of(x, where);
  }

  /// BatchNormalization whose parameters are computed (graph inputs of [C]): per channel on the
  /// device, ((x - mean) / sqrt(var + eps)) * scale + B, each a row of the channels-last map.
  void import_batch_norm_of_inputs(const onnx::NodeProto& node, int index, const std::string& where) {
    const Computed& x = computed_.at(node.input(0));
    const std::int64_t channels = x.dims[1];
    std::array<std::uint32_t, 4> rows{};  // scale, B, mean, var
    for (int i = 1; i <= 4; ++i) {
      if (constants_.count(node.input(i))) {
        const Constant& c = constants_.at(node.input(i));
        check_float(c, node.input(i), where);
        if (c.values.size() != static_cast<std::size_t>(channels))
          unsupported(where,
                      fmt::format("'{}' of dims {} for {} channels", node.input(i), dims_text(c.dims), channels));
        rows[static_cast<std::size_t>(i - 1)] = add_weight(node.input(i), {channels}, c.values, false);
        continue;
      }
      const Computed& value = computed_.at(node.input(i));
      if (element_count(value.dims, where) != channels)
        unsupported(where,
                    fmt::format("'{}' of dims {} for {} channels", node.input(i), dims_text(value.dims), channels));
      rows[static_cast<std::size_t>(i - 1)] = tensor_as(value, {channels}, where);
    }
    const double epsilon = float_attribute(node, "epsilon", 1e-5f);
    auto binary = [&](OpKind kind, std::uint32_t a, std::uint32_t b, const std::string& name) {
      Op op;
      op.kind = kind;
      op.inputs = {a, b};
      return add_op(op, name, index, where);
    };
    const std::string& out = node.output(0);
    const std::uint32_t variance =
        binary(OpKind::add, rows[3],
               add_weight(out + ".epsilon", {channels},
                          std::vector<double>(static_cast<std::size_t>(channels), epsilon), false),
               out + ".variance");
    Op root;
    root.kind = OpKind::sqrt;
    root.inputs = {variance};
    const std::uint32_t deviation = add_op(root, out + ".deviation", index, where);
    std::uint32_t y = binary(OpKind::sub, batch_norm_input(x, index, where), rows[2], out + ".centred");
    y = binary(OpKind::div, y, deviation, out + ".normalized");
    y = binary(OpKind::mul, y, rows[0], out + ".scaled");
    computed_[out] = Computed{binary(OpKind::add, y, rows[1], out), "", x.dims, x.dims.size() > 2};
  }

  /// Add, Sub, Mul, Div of a feature map: by another feature map of the same dims, or by a
  /// constant varying along channels only (a row of the channels-last map) or not at all.
  /// `value` broadcast to a feature map of `dims`, in its layout (a row per pixel): a gather.
  std::uint32_t feature_map_broadcast(const Computed& value, const Dims& dims, int index, const std::string& where) {
    const std::int64_t images = dims[0], channels = dims[1], pixels = spatial_size(dims);
    if (element_count(dims, where) > kMaxFoldedElements)
      unsupported(where, fmt::format("broadcasting {} over the feature map {} (at most {} elements)",
                                     dims_text(value.dims), dims_text(dims), kMaxFoldedElements));
    const std::size_t lead = dims.size() - value.dims.size();
    Movement movement{{images * pixels, channels}, {}};
    std::vector<std::int64_t> at(dims.size());  // ONNX coordinates in the feature map
    for (std::int64_t row = 0; row < images * pixels; ++row)
      for (std::int64_t c = 0; c < channels; ++c) {
        at[0] = row / pixels;
        at[1] = c;
        for (std::int64_t rest = row % pixels, d = static_cast<std::int64_t>(dims.size()) - 1; d >= 2; --d) {
          at[static_cast<std::size_t>(d)] = rest % dims[static_cast<std::size_t>(d)];
          rest /= dims[static_cast<std::size_t>(d)];
        }
        std::int64_t source = 0;  // numpy broadcasting: dims of 1 repeat
        for (std::size_t d = 0; d < value.dims.size(); ++d)
          source = source * value.dims[d] + (value.dims[d] == 1 ? 0 : at[lead + d]);
        movement.sources.push_back(source_of(0, source));
      }
    const std::string key = fresh_name(value_name(value) + ".broadcast");
    emit_movement(movement, {MovedInput{key, &value, nullptr}}, 0.0, key, index, where);
    return tensor_of(computed_.at(key), where);
  }

  void import_feature_map_binary(const onnx::NodeProto& node, OpKind kind, int first, int index,
                                 const std::string& where) {
    const Computed& x = computed_.at(node.input(first));
    const std::string& other = node.input(1 - first);
    if (first != 0 && (kind == OpKind::sub || kind == OpKind::div || kind == OpKind::prelu))
      unsupported(where, fmt::format("{} of a constant by a feature map", node.op_type()));
    Op op;
    op.kind = kind;
    op.inputs = {tensor_of(x, where), 0};
    if (auto c = constants_.find(other); c != constants_.end()) {
      check_float(c->second, other, where);
      if (broadcast_dims(x.dims, c->second.dims, where) != x.dims)
        unsupported(where, fmt::format("broadcasting the feature map {} to {}", dims_text(x.dims),
                                       dims_text(broadcast_dims(x.dims, c->second.dims, where))));
      // Per channel: the constant expanded to [C, 1, ...] must hold it all.
      Dims per_channel(x.dims.size(), 1);
      per_channel[1] = x.dims[1];
      if (broadcast_dims(per_channel, c->second.dims, where) != per_channel)
        unsupported(where, fmt::format("a constant {} that varies over the pixels of the feature map {}",
                                       dims_text(c->second.dims), dims_text(x.dims)));
      Constant row = c->second;
      std::vector<double> values = expand_to(row, per_channel);
      if (kind == OpKind::sub) {
        for (double& v : values) v = -v;
        op.kind = OpKind::add;
      }
      op.inputs[1] = add_weight(other + ".channels", {x.dims[1]}, values, false);
    } else {
      const Computed& y = computed_.at(other);
      if (broadcast_dims(x.dims, y.dims, where) != x.dims)
        unsupported(
            where, fmt::format("{} of the feature map {} and the computed {}, which broadcast to {}", node.op_type(),
                               dims_text(x.dims), dims_text(y.dims), dims_text(broadcast_dims(x.dims, y.dims, where))));
      Dims per_channel(x.dims.size(), 1);
      per_channel[1] = x.dims[1];
      if (y.dims == x.dims && y.channels_last) op.inputs[1] = tensor_of(y, where);
      // A value per channel (a squeeze-and-excitation gate of one image): a row over the pixels.
      else if (broadcast_dims(per_channel, y.dims, where) == per_channel) {
        Computed row = y;  // a feature map of one pixel is laid out as it is row-major
        if (spatial_size(y.dims) == 1) row.channels_last = false;
        op.inputs[1] = tensor_as(row, {x.dims[1]}, where);
      } else {
        op.inputs[1] = feature_map_broadcast(y, x.dims, index, where);
      }
    }
    computed_[node.output(0)] = Computed{add_op(op, node.output(0), index, where), "", x.dims, true};
  }

  void import_output(const onnx::ValueInfoProto& output) {
    const std::string where = fmt::format("{}: graph output '{}'", path_, output.name());
    int element_type = 0;
    DType dtype = DType::float32;
    Dims declared = value_dims(output, "output", element_type, dtype);
    const int place = model_.graph().node_size();  // after the last node
    Computed value;
    if (auto c = constants_.find(output.name()); c != constants_.end()) {
      // A constant output (a folded shape, a frozen switch): a weight the device copies out.
      const Constant& constant = c->second;
      if (constant.values.empty()) unsupported(where, "an output that is an empty constant");
      check_like(constant, output.name(), dtype, where);
      const std::uint32_t weight =
          add_weight(output.name() + ".constant", ir_shape(constant.dims), constant.values, false, dtype);
      value = Computed{copy_of(weight, output.name(), place, where), "", constant.dims};
    } else {
      const auto found = computed_.find(output.name());
      if (found == computed_.end())
        throw Error(where + ": no node, initializer or graph input produces it; name an output a node computes");
      value = found->second;
      // One channel (or one pixel): the channels-last order is the row-major one already.
      if (value.channels_last && (spatial_size(value.dims) == 1 || value.dims[1] == 1)) value.channels_last = false;
      if (value.channels_last) value = to_row_major(value, output.name(), where);
      // A graph input (or a view of one) as an output: the device copies it out.
      if (value.tensor < 0)
        value = Computed{copy_of(tensor_of(value, where), output.name(), place, where), "", value.dims};
    }
    // A dynamic dim (or a missing shape) is what the graph computes.
    if (declared.empty() && !output.type().tensor_type().has_shape()) declared = value.dims;
    if (std::find(declared.begin(), declared.end(), -1) != declared.end()) {
      if (declared.size() != value.dims.size())
        throw Error(
            fmt::format("{}: declared of rank {} but computed {}", where, declared.size(), dims_text(value.dims)));
      for (std::size_t i = 0; i < declared.size(); ++i)
        if (declared[i] == -1) declared[i] = value.dims[i];
    }
    if (element_count(declared, where) != element_count(value.dims, where))
      throw Error(fmt::format("{}: declared {} but computed {}", where, dims_text(declared), dims_text(value.dims)));
    // A value another output already is: the output is a copy of it, a gather of one run.
    const bool taken = std::find(graph_.outputs.begin(), graph_.outputs.end(),
                                 static_cast<std::uint32_t>(value.tensor)) != graph_.outputs.end();
    if (taken) {
      Op copy;
      copy.kind = OpKind::gather;
      copy.inputs = {tensor_of(value, where)};
      copy.gather_shape = graph_.tensors[copy.inputs[0]].shape;
      copy.gather_runs = {GatherRun{0, 0, 0, static_cast<std::uint64_t>(element_count(value.dims, where)), 1, 1, 0, 0}};
      value = Computed{add_op(copy, output.name() + ".copy", -1, where), "", value.dims};
    }
    const auto tensor = static_cast<std::uint32_t>(value.tensor);
    if (graph_.tensors[tensor].dtype != dtype)
      unsupported(where,
                  fmt::format("an output declared {} ({} on the device) computed as {}", dtype_text(element_type),
                              dtype_name(dtype), dtype_name(graph_.tensors[tensor].dtype)));
    // The IR tensor takes the output's name (an Identity or Reshape may have renamed it).
    std::string& name = graph_.tensors[tensor].name;
    if (name != output.name()) {
      if (names_.count(output.name()))
        unsupported(where, fmt::format("an output named like another tensor '{}'", output.name()));
      names_.erase(name);
      names_.insert(output.name());
      name = output.name();
    }
    graph_.outputs.push_back(tensor);
    result_.outputs.push_back({output.name(), declared, element_type});
  }

  /// A copy of `tensor` on the device (a cast to its own type), for an output that would
  /// otherwise be an input or a constant, which no op computes.
  std::uint32_t copy_of(std::uint32_t tensor, const std::string& output, int place, const std::string& where) {
    Op copy;
    copy.kind = OpKind::cast;
    copy.inputs = {tensor};
    return add_op(copy, output + ".copy", place, where, graph_.tensors[tensor].dtype);
  }

  /// Drops the ops whose results no op and no output reads (a transpose a product reads as
  /// transpose_b, a dead branch), with their tensors; inputs and weights stay.
  void prune_unread_ops() {
    std::vector<bool> read(graph_.tensors.size(), false), keep(graph_.ops.size(), false);
    for (std::uint32_t output : graph_.outputs) read[output] = true;
    for (std::size_t i = graph_.ops.size(); i-- > 0;)
      if ((keep[i] = read[graph_.ops[i].output]))
        for (std::uint32_t input : graph_.ops[i].inputs) read[input] = true;
    std::vector<bool> dropped(graph_.tensors.size(), false);
    for (std::size_t i = 0; i < graph_.ops.size(); ++i) dropped[graph_.ops[i].output] = !keep[i];
    std::vector<std::uint32_t> renumbered(graph_.tensors.size());
    std::vector<Tensor> tensors;
    for (std::size_t t = 0; t < graph_.tensors.size(); ++t) {
      renumbered[t] = static_cast<std::uint32_t>(tensors.size());
      if (!dropped[t]) tensors.push_back(std::move(graph_.tensors[t]));
    }
    std::vector<Op> ops;
    for (std::size_t i = 0; i < graph_.ops.size(); ++i) {
      if (!keep[i]) continue;
      Op& op = graph_.ops[i];
      for (std::uint32_t& input : op.inputs) input = renumbered[input];
      op.output = renumbered[op.output];
      ops.push_back(std::move(op));
    }
    for (std::uint32_t& output : graph_.outputs) output = renumbered[output];
    graph_.tensors = std::move(tensors);
    graph_.ops = std::move(ops);
  }

  std::string path_;
  onnx::ModelProto& model_;
  const ImportOptions& options_;
  std::map<std::string, DType> input_dtypes_;  ///< graph input name -> the device type it is held in
  OnnxImport result_;
  Graph& graph_ = result_.graph;
  std::map<std::string, Constant> constants_;
  std::map<std::string, Computed> computed_;
  std::map<std::string, std::uint32_t> declared_;  ///< graph input name -> IR tensor
  std::map<std::string, std::uint32_t> readers_;   ///< ONNX value name -> nodes and graph outputs reading it
  std::map<std::string, std::uint32_t> channels_last_inputs_;  ///< graph input -> its channels-last transpose
  std::set<std::string> names_;                                ///< IR tensor names in use
  int node_index_ = -1;                                        ///< the node being imported
};

/// A model of an IR version newer than the checker's is accepted when every opset it imports and
/// every node's operator at that opset is one this build's ONNX registry knows (our own checks in
/// place of the checker's for what it does not know); the checker then checks it as of its own
/// IR version. Otherwise the refusal names the opset or the node.
void check_newer_ir_version(const std::string& path, onnx::ModelProto& model) {
  if (model.ir_version() <= onnx::IR_VERSION) return;
  const std::string newer = fmt::format("{}: IR version {} is newer than the ONNX checker's ({})", path,
                                        model.ir_version(), onnx::IR_VERSION);
  const auto& ranges = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  std::map<std::string, int> opsets;
  for (const auto& opset : model.opset_import()) {
    const std::string domain = opset.domain() == "ai.onnx" ? "" : opset.domain();
    const auto range = ranges.find(domain);
    if (range == ranges.end() || opset.version() > range->second.second)
      throw Error(fmt::format(
          "{}, and so is its opset {} of domain '{}' (this build implements {}); export with an "
          "older opset",
          newer, opset.version(), domain.empty() ? "ai.onnx" : domain,
          range == ranges.end() ? std::string("none of it") : fmt::format("up to {}", range->second.second)));
    opsets[domain] = static_cast<int>(opset.version());
  }
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const onnx::NodeProto& node = model.graph().node(i);
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    const auto opset = opsets.find(domain);
    if (opset == opsets.end() || !onnx::OpSchemaRegistry::Schema(node.op_type(), opset->second, domain))
      throw Error(
          fmt::format("{}, and node '{}' ({}) has no operator of that name at opset {} of domain '{}' in this "
                      "build; export with an older opset",
                      newer, node.name().empty() ? fmt::format("#{}", i) : node.name(), node.op_type(),
                      opset == opsets.end() ? 0 : opset->second, domain.empty() ? "ai.onnx" : domain));
  }
  logger("tessera.build")
      ->info("model of IR version {} accepted as IR version {}: every opset and operator is known path={}",
             model.ir_version(), onnx::IR_VERSION, path);
  model.set_ir_version(onnx::IR_VERSION);
}

/// Writes --input-shape dims into the model's graph inputs, so shape inference sees static dims;
/// a rank or a static dim other than the model's is refused first.
void fix_input_shapes(const std::string& path, onnx::ModelProto& model, const ImportOptions& options) {
  for (auto& input : *model.mutable_graph()->mutable_input()) {
    const auto fixed = options.input_shapes.find(input.name());
    if (fixed == options.input_shapes.end() || !input.type().has_tensor_type()) continue;
    const std::string option = fmt::format("--input-shape {}={}", input.name(), fmt::join(fixed->second, "x"));
    if (input.type().tensor_type().has_shape()) {
      const auto& declared = input.type().tensor_type().shape();
      if (declared.dim_size() != static_cast<int>(fixed->second.size()))
        throw Error(fmt::format("{}: {}: the model declares '{}' of rank {}; give {} dims", path, option, input.name(),
                                declared.dim_size(), declared.dim_size()));
      for (int i = 0; i < declared.dim_size(); ++i)
        if (declared.dim(i).has_dim_value() &&
            declared.dim(i).dim_value() != fixed->second[static_cast<std::size_t>(i)])
          throw Error(fmt::format("{}: {}: dim {} of '{}' is {} in the model", path, option, i, input.name(),
                                  declared.dim(i).dim_value()));
    }
    auto* shape = input.mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->clear_dim();
    for (std::int64_t d : fixed->second) shape->add_dim()->set_dim_value(d);
  }
}

/// "NAME=REST" split; the error names the option and shows an example.
std::pair<std::string, std::string> option_parts(const std::string& text, const char* option, const char* example,
                                                 bool allow_empty = false) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || (equals + 1 == text.size() && !allow_empty))
    throw Error(
        fmt::format("{} '{}': give NAME={}, e.g. {} {}", option, text, example, option, std::string("x=") + example));
  return {text.substr(0, equals), text.substr(equals + 1)};
}

}  // namespace

void add_input_shape(ImportOptions& options, const std::string& text) {
  const auto [name, rest] = option_parts(text, "--input-shape", "1x3x640x640");
  std::vector<std::int64_t> dims;
  std::size_t start = 0;
  while (start <= rest.size()) {
    const std::size_t end = std::min(rest.find('x', start), rest.size());
    const std::string part = rest.substr(start, end - start);
    std::size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (part.empty() || used != part.size() || value <= 0 || value > kMaxElements)
      throw Error(
          fmt::format("--input-shape {}: '{}' is not a positive dim; give dims joined by 'x', e.g. {}=1x3x640x640",
                      text, part, name));
    dims.push_back(value);
    start = end + 1;
  }
  if (!options.input_shapes.emplace(name, dims).second)
    throw Error(fmt::format("--input-shape {}: '{}' is given twice", text, name));
  options.texts.push_back("--input-shape " + text);
}

void add_input_value(ImportOptions& options, const std::string& text) {
  // NAME= freezes an empty input (a .pb of no values is recorded so).
  const auto [name, rest] = option_parts(text, "--input-value", "16000", true);
  std::vector<double> values;
  const std::string extension = fs::path(rest).extension().string();
  if (rest.empty()) {
    // no values: an input of an empty dim
  } else if (extension == ".pb" || extension == ".npy") {
    values = read_tensor_file(rest).values;  // the file's values; the model's dims decide their shape
  } else {
    std::size_t start = 0;
    while (start <= rest.size()) {
      const std::size_t end = std::min(rest.find(',', start), rest.size());
      const std::string part = rest.substr(start, end - start);
      std::size_t used = 0;
      double value = 0;
      try {
        value = std::stod(part, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (part.empty() || used != part.size() || !std::isfinite(value))
        throw Error(
            fmt::format("--input-value {}: '{}' is not a number; give numbers joined by ',' (e.g. {}=1,0,2) "
                        "or a .pb or .npy file",
                        text, part, name));
      values.push_back(value);
      start = end + 1;
    }
  }
  if (options.input_values.count(name)) throw Error(fmt::format("--input-value {}: '{}' is given twice", text, name));
  // Recorded as the numbers themselves (exact: %.17g), so a run needs no file.
  std::string written;
  for (double v : values) written += fmt::format("{}{:.17g}", written.empty() ? "" : ",", v);
  options.input_values.emplace(name, std::move(values));
  options.texts.push_back(fmt::format("--input-value {}={}", name, written));
}

ImportOptions import_options_of(const std::vector<std::string>& texts) {
  ImportOptions options;
  for (const std::string& text : texts) {
    if (text.rfind("--input-shape ", 0) == 0) add_input_shape(options, text.substr(14));
    else if (text.rfind("--input-value ", 0) == 0) add_input_value(options, text.substr(14));
    else throw Error(fmt::format("the package records an unknown import option '{}'; recompile it", text));
  }
  return options;
}

namespace {

/// Ranks ONNX 1.12's shape inference takes for granted without checking them (Gemm before opset 7
/// reads dims 0 and 1 of A and B): a model that breaks them is refused before inference runs,
/// where it would read past a dims list.
void check_inference_ranks(const std::string& path, const onnx::ModelProto& model) {
  const onnx::GraphProto& graph = model.graph();
  auto rank_of = [&](const std::string& name) -> int {
    for (const auto& value : graph.input())
      if (value.name() == name && value.type().tensor_type().has_shape())
        return value.type().tensor_type().shape().dim_size();
    for (const TensorProto& initializer : graph.initializer())
      if (initializer.name() == name) return initializer.dims_size();
    return -1;  // computed: inference checks what it derives itself
  };
  for (const onnx::NodeProto& node : graph.node()) {
    if (node.op_type() != "Gemm") continue;
    for (int i = 0; i < std::min(node.input_size(), 2); ++i)
      if (const int rank = rank_of(node.input(i)); rank >= 0 && rank != 2)
        throw Error(fmt::format("{}: node '{}' (Gemm): input '{}' has rank {}; Gemm's A and B are 2-D", path,
                                node.name().empty() ? node.output_size() ? node.output(0) : "" : node.name(),
                                node.input(i), rank));
  }
}

/// ONNX 1.12's shape inference reads past a dims list on some malformed nodes (an RNN's X of rank
/// 2, Gemm before opset 7) instead of failing, and no check of ours can list them all: it runs
/// first in a child process, and a child that does not come back cleanly refuses the model.
void check_inference_survives(const std::string& path, const onnx::ModelProto& model) {
  const pid_t child = fork();
  if (child < 0) return;  // no child to spare: inference runs as it always did
  if (child == 0) {
    // A crash here is the answer, not a bug of ours: die by the signal, past any handler the
    // process installed (a sanitizer's or fuzzer's would report it and write a crash file).
    for (const int signal_number : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(signal_number, SIG_DFL);
    // The child's memory is its own: inference may write into its model without a copy.
    auto& own = const_cast<onnx::ModelProto&>(model);
    try {
      onnx::ShapeInferenceOptions options{true, 1, false};
      onnx::shape_inference::InferShapes(own, onnx::OpSchemaRegistry::Instance(), options);
    } catch (...) {  // an error is reported by the parent's own run
    }
    _exit(0);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  throw Error(fmt::format(
      "{}: ONNX shape inference crashes on this model ({}): a node's inputs have ranks its operator does not "
      "take; check it with onnx.checker.check_model(model, full_check=True)",
      path,
      WIFSIGNALED(status) ? fmt::format("signal {}", WTERMSIG(status)) : fmt::format("exit {}", WEXITSTATUS(status))));
}

}  // namespace

OnnxImport import_onnx(const std::string& path, const std::string& expected_sha256, const ImportOptions& options) {
  // protobuf parses at most 2 GiB - 1; a FIFO or a device is refused before it is read.
  std::string bytes = read_bounded_file(path, "the ONNX model", (std::uint64_t{1} << 31) - 1);
  onnx::ModelProto model;
  // The hash is of the very bytes parsed, so a run can tell it reads the same weights.
  const std::string sha256 = sha256_hex(bytes);
  if (!expected_sha256.empty() && sha256 != expected_sha256)
    throw Error(
        fmt::format("{}: the model changed since the package was compiled (sha256 {}, the package records "
                    "{}); it is not parsed; recompile it, or give the weights to use with --weights FILE",
                    path, sha256, expected_sha256));
  if (!model.ParseFromString(bytes))
    throw Error(
        path +
        ": not an ONNX model (the protobuf ModelProto does not parse); export it with torch.onnx.export or onnx.save");
  std::string().swap(bytes);  // parsed: the model holds the weights now
  check_newer_ir_version(path, model);
  try {
    onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: the ONNX checker refuses the model: {}", path, one_line(e.what())));
  }
  fix_input_shapes(path, model, options);
  check_inference_ranks(path, model);
  check_inference_survives(path, model);
  try {
    onnx::ShapeInferenceOptions options{true, 1, false};
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: ONNX shape inference fails: {}", path, one_line(e.what())));
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  OnnxImport result = Importer(path, model, options).run();
  result.graph.source_file = ec ? path : absolute.lexically_normal().string();
  result.graph.source_sha256 = sha256;
  result.graph.import_options = options.texts;
  return result;
}

}  // namespace tessera::onnx_import
