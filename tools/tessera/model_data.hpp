// Models and their data for the driver: YAML or ONNX models in, weights, inputs, expected and written outputs.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tessera/graph.hpp"
#include "tessera/onnx/import.hpp"
#include "tessera/runtime/run.hpp"

namespace tessera {
struct Package;
}

namespace tessera::cli {

/// What `tessera run` was given beside the package.
struct RunData {
  std::string weights;                ///< --weights: an ONNX model whose weights to use
  std::vector<std::string> inputs;    ///< --input NAME=FILE
  std::vector<std::string> expected;  ///< --expect NAME=FILE
  std::string output_directory;       ///< --output-dir
  std::string output_format = "pb";   ///< pb or npy
  bool differential = false;          ///< --differential: also run the inputs through ONNX Runtime
};

using NamedDims = std::vector<std::pair<std::string, std::vector<std::int64_t>>>;

/// What prepare_run learnt of the model: its file and its inputs' and outputs' dims and element
/// types (onnx::TensorProto::DataType; float for YAML models) as it declares them.
struct PreparedRun {
  std::string model;     ///< the ONNX model the weights come from ("" for YAML models)
  NamedDims input_dims;  ///< ONNX models only
  NamedDims output_dims;
  std::map<std::string, int> element_types;  ///< of the inputs and outputs an ONNX model declares
  /// The inputs the compile froze (--input-value), with their values, for ONNX Runtime.
  std::vector<std::pair<onnx_import::OnnxValue, std::vector<double>>> frozen_inputs;
  /// Weights the package stores as float16 that the model holds as float32 (--float16-weights).
  std::size_t float16_stored_weights = 0;
};

/// Fills options.inputs and options.expected and, for a package compiled from an ONNX model,
/// names the model its weights come from (the file it was compiled from, or data.weights),
/// which must be a file; read_model_weights reads them.
PreparedRun prepare_run(const Package& package, const RunData& data, runtime::RunOptions& options);

/// An imported model's weights, from prepared.model (checked against the package's sha256 when
/// it is the file the package was compiled from), and what the model declares of its inputs and
/// outputs, into `prepared`.
runtime::HostTensors read_model_weights(const Package& package, const RunData& data, PreparedRun& prepared);

/// Writes each output as DIR/NAME.pb or .npy in its declared element type, atomically; returns
/// the files written.
std::vector<std::string> write_outputs(const Graph& graph, const runtime::HostTensors& outputs,
                                       const PreparedRun& prepared, const RunData& data);

}  // namespace tessera::cli
