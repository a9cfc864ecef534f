// Models and their data for the driver: YAML or ONNX models in, weights, inputs, expected and written outputs.
#include "model_data.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <set>

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/onnx/import.hpp"
#include "tessera/onnx/tensor_file.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

/// NAME=FILE, split; the error names the option and the fix.
std::pair<std::string, std::string> name_and_file(const std::string& text, const char* option) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size())
    throw Error(fmt::format("{} '{}': give NAME=FILE, e.g. {} x=input_0.pb", option, text, option));
  return {text.substr(0, equals), text.substr(equals + 1)};
}

/// Reads NAME=FILE tensors as the device holds the model's tensor NAME (float32 values, int32 and
/// bool words: integers outside int32 are refused, naming the element); the run checks their
/// number against the tensor's.
runtime::HostTensors read_named(const Graph& graph, const std::vector<std::string>& items, const char* option) {
  runtime::HostTensors tensors;
  for (const std::string& item : items) {
    auto [name, file] = name_and_file(item, option);
    if (tensors.count(name)) throw Error(fmt::format("{} {}: '{}' is given twice", option, item, name));
    const std::int64_t index = graph.find_tensor(name);
    const DType dtype = index < 0 ? DType::float32 : graph.tensors[static_cast<std::size_t>(index)].dtype;
    tensors[name] =
        onnx_import::device_words(onnx_import::read_tensor_file(file), dtype, fmt::format("{} {}", option, item));
  }
  return tensors;
}

}  // namespace

PreparedRun prepare_run(const Package& package, const RunData& data, runtime::RunOptions& options) {
  const Graph& graph = package.graph;
  PreparedRun prepared;
  for (std::uint32_t index : graph.outputs)
    prepared.output_dims.emplace_back(graph.tensors[index].name, graph.tensors[index].shape);
  if (!graph.source_sha256.empty()) {
    // The weights are read again from the model, so the package never copies them.
    prepared.model = data.weights.empty() ? graph.source_file : data.weights;
    // A signature covers the sha256 the package records, not a file named on the command line.
    if (!data.weights.empty() && !options.verify_key.empty())
      throw Error(
          fmt::format("--weights {}: with --verify, weights come only from the model the signed package "
                      "names, whose sha256 it records; drop --weights",
                      data.weights));
    // Found now, read (read_model_weights) after the device load: a missing model should not wait for that.
    std::error_code error;
    if (!fs::is_regular_file(prepared.model, error))
      throw Error(
          fmt::format("{}: the model the package's weights come from is not a readable file; give it "
                      "with --weights FILE",
                      prepared.model));
  } else if (!data.weights.empty()) {
    throw Error(
        fmt::format("--weights {}: the package was compiled from the YAML model {}, whose weights come from its "
                    "seed; --weights applies to packages compiled from ONNX models",
                    data.weights, graph.source_file));
  }
  options.inputs = read_named(graph, data.inputs, "--input");
  options.expected = read_named(graph, data.expected, "--expect");
  if (data.differential && prepared.model.empty())
    throw Error(
        fmt::format("--differential: the package was compiled from the YAML model {}; ONNX Runtime runs ONNX "
                    "models only (compile an .onnx file)",
                    graph.source_file));
  return prepared;
}

runtime::HostTensors read_model_weights(const Package& package, const RunData& data, PreparedRun& prepared) {
  const Graph& graph = package.graph;
  const std::string& source = prepared.model;
  runtime::HostTensors weights;
  // The model's bytes are checked against the package's sha256 before they are parsed.
  // The model is imported as the compile fixed it (its frozen inputs and shapes).
  onnx_import::OnnxImport imported =
      onnx_import::import_onnx(source, data.weights.empty() ? graph.source_sha256 : std::string(),
                               onnx_import::import_options_of(graph.import_options));
  for (const Tensor& tensor : graph.tensors) {
    if (tensor.kind != TensorKind::weight) continue;
    auto found = imported.weights.find(tensor.name);
    if (found == imported.weights.end() || found->second.size() != static_cast<std::size_t>(tensor.elements()))
      throw Error(
          fmt::format("{}: has no weight '{}' of {} values, which the package needs; give the model it was "
                      "compiled from",
                      source, tensor.name, tensor.elements()));
    weights[tensor.name] = std::move(found->second);
    const std::int64_t as_imported = imported.graph.find_tensor(tensor.name);
    prepared.float16_stored_weights +=
        tensor.dtype == DType::float16 && as_imported >= 0 &&
        imported.graph.tensors[static_cast<std::size_t>(as_imported)].dtype == DType::float32;
  }
  logger("tessera.runtime")
      ->info("weights read from the model path={} sha256={} weights={} matches_package={}", source,
             imported.graph.source_sha256, weights.size(), imported.graph.source_sha256 == graph.source_sha256);
  for (auto& [name, dims] : prepared.output_dims)
    for (const onnx_import::OnnxValue& output : imported.outputs)
      if (output.name == name) dims = output.dims;
  for (const onnx_import::OnnxValue& input : imported.inputs) prepared.input_dims.emplace_back(input.name, input.dims);
  prepared.frozen_inputs = std::move(imported.frozen);
  for (const auto& values : {imported.inputs, imported.outputs})
    for (const onnx_import::OnnxValue& value : values) prepared.element_types[value.name] = value.element_type;
  return weights;
}

std::vector<std::string> write_outputs(const Graph& graph, const runtime::HostTensors& outputs,
                                       const PreparedRun& prepared, const RunData& data) {
  const NamedDims& dims = prepared.output_dims;
  if (data.output_format != "pb" && data.output_format != "npy")
    throw Error(fmt::format("--output-format '{}': use pb or npy", data.output_format));
  // Output tensors are results a user reads back: a folder of theirs, so no one can plant links in it.
  const OwnedFolder folder(data.output_directory, "the output folder (--output-dir)");
  std::vector<std::string> written;
  std::set<std::string> files;
  for (const auto& [name, shape] : dims) {
    // A tensor name may hold any character: the file name keeps the safe ones.
    std::string file = name;
    for (char& c : file)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') c = '_';
    if (file.empty() || file[0] == '.') file = "_" + file;
    if (!files.insert(file).second)
      throw Error(
          fmt::format("outputs '{}' and another map to the same file name {}; rename one in the model", name, file));
    const std::string path = (fs::path(data.output_directory) / (file + "." + data.output_format)).string();
    // The device's words as values of the type the model declares (a YAML model's are float).
    const std::int64_t index = graph.find_tensor(name);
    const DType dtype = index < 0 ? DType::float32 : graph.tensors[static_cast<std::size_t>(index)].dtype;
    const auto type = prepared.element_types.find(name);
    onnx_import::TensorFile tensor{name, shape, onnx_import::host_values(outputs.at(name), dtype),
                                   type == prepared.element_types.end() ? onnx_import::kFloatElements : type->second};
    onnx_import::write_tensor_file(path, tensor);
    written.push_back(path);
  }
  return written;
}

}  // namespace tessera::cli
