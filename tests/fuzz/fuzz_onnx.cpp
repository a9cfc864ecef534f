// libFuzzer target: import_onnx() on arbitrary bytes must return or throw tessera::Error, nothing else.
// A custom mutator makes it structure-aware: an input that parses as a ModelProto is changed
// where the importer's checks live (dims against data, axis lists, op types, node inputs) and
// serialized again, so most runs reach folding and mapping instead of the protobuf parser.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>

#include <onnx/onnx_pb.h>

#include "fuzz_input_file.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/onnx/import.hpp"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

// Small and edge values: where off-by-one, negative and empty bugs live.
std::int64_t interesting(std::mt19937& random) {
  static constexpr std::int64_t kValues[] = {-3, -2, -1, 0, 1, 2, 3, 4, 7, 1 << 16, INT64_MIN, INT64_MAX};
  return kValues[random() % std::size(kValues)];
}

// The ops the importer folds or maps, so a changed op type is one it reads.
const char* some_op(std::mt19937& random) {
  static constexpr const char* kOps[] = {"Squeeze",
                                         "Unsqueeze",
                                         "Concat",
                                         "Gather",
                                         "Slice",
                                         "Reshape",
                                         "Flatten",
                                         "Transpose",
                                         "Identity",
                                         "Add",
                                         "Mul",
                                         "MatMul",
                                         "Gemm",
                                         "Softmax",
                                         "ReduceSum",
                                         "Shape",
                                         "Cast",
                                         "ConstantOfShape",
                                         "GatherElements",
                                         "ArgMax",
                                         "Trilu",
                                         "Mod",
                                         "Pow",
                                         "Where",
                                         "Resize",
                                         "ConvTranspose",
                                         "LSTM",
                                         "InstanceNormalization",
                                         "NegativeLogLikelihoodLoss",
                                         "SoftmaxCrossEntropyLoss"};
  return kOps[random() % std::size(kOps)];
}

void mutate_tensor(onnx::TensorProto& tensor, std::mt19937& random) {
  switch (random() % 4) {
    case 0:  // dims that disagree with the data
      if (tensor.dims_size() > 0) tensor.set_dims(static_cast<int>(random() % tensor.dims_size()), interesting(random));
      else tensor.add_dims(interesting(random));
      break;
    case 1:
      tensor.add_dims(random() % 2);
      break;
    case 2:  // one value more or fewer
      if (tensor.int64_data_size() > 0 && random() % 2) tensor.mutable_int64_data()->RemoveLast();
      else tensor.add_int64_data(interesting(random));
      break;
    default:
      if (tensor.int64_data_size() > 0)
        tensor.set_int64_data(static_cast<int>(random() % tensor.int64_data_size()), interesting(random));
      break;
  }
}

void mutate_node(onnx::NodeProto& node, const onnx::GraphProto& graph, std::mt19937& random) {
  switch (random() % 4) {
    case 0:
      node.set_op_type(some_op(random));
      break;
    case 1:  // an axis list: repeated, out of range, negative
      for (onnx::AttributeProto& attribute : *node.mutable_attribute())
        if (attribute.ints_size() > 0)
          attribute.set_ints(static_cast<int>(random() % attribute.ints_size()), interesting(random));
        else if (attribute.type() == onnx::AttributeProto::INT) attribute.set_i(interesting(random));
      break;
    case 2:  // an input taken from elsewhere in the graph, or left out
      if (node.input_size() > 0 && graph.node_size() > 0) {
        const onnx::NodeProto& other = graph.node(static_cast<int>(random() % graph.node_size()));
        const std::string source = other.output_size() > 0 && random() % 3 ? other.output(0) : std::string();
        node.set_input(static_cast<int>(random() % node.input_size()), source);
      }
      break;
    default:
      if (node.input_size() > 1) node.mutable_input()->SwapElements(0, node.input_size() - 1);
      break;
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  onnx::ModelProto model;
  std::mt19937 random(seed);
  // Bytes that are no model, and a share of the rest, get libFuzzer's own byte mutations.
  if (random() % 4 == 0 || !model.ParseFromArray(data, static_cast<int>(size)) || !model.has_graph())
    return LLVMFuzzerMutate(data, size, max_size);
  onnx::GraphProto& graph = *model.mutable_graph();
  const unsigned rounds = 1 + random() % 3;
  for (unsigned round = 0; round < rounds; ++round) {
    const unsigned choice = random() % 3;
    if (choice == 0 && graph.initializer_size() > 0)
      mutate_tensor(*graph.mutable_initializer(static_cast<int>(random() % graph.initializer_size())), random);
    else if (choice == 1 && graph.node_size() > 0)
      mutate_node(*graph.mutable_node(static_cast<int>(random() % graph.node_size())), graph, random);
    else if (graph.node_size() > 1)  // order matters: a node before its input is produced
      graph.mutable_node()->SwapElements(static_cast<int>(random() % graph.node_size()),
                                         static_cast<int>(random() % graph.node_size()));
  }
  const std::string bytes = model.SerializeAsString();
  if (bytes.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(bytes.begin(), bytes.end(), data);
  return bytes.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = tessera::fuzz::input_path("model.onnx");
  tessera::fuzz::write_input(path, data, size);
  try {
    (void)tessera::onnx_import::import_onnx(path);
  } catch (const tessera::Error&) {
    // The one way to refuse a model: protobuf, checker and shape-inference errors must arrive as Error.
  }
  return 0;
}
