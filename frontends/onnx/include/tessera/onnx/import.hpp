// The ONNX frontend: an ONNX model file imported into the Graph IR with its weights.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/graph.hpp"

namespace tessera::onnx_import {

/// A graph input or output as the ONNX model declares it.
struct OnnxValue {
  std::string name;
  std::vector<std::int64_t> dims;  ///< ONNX dims (any rank); the IR tensor holds them row-major
  /// The declared element type (onnx::TensorProto::DataType); the device holds it as the IR
  /// tensor's dtype (float32 for the float types, int32 for the integer types, bool).
  int element_type = 1;
};

/// What `tessera compile` fixes of a model before it is imported (--input-shape, --input-value).
struct ImportOptions {
  /// Dims of graph inputs, for their dynamic (or all) dims: NAME -> dims.
  std::map<std::string, std::vector<std::int64_t>> input_shapes;
  /// Graph inputs frozen to constants: NAME -> values (row-major, in the input's declared dims).
  std::map<std::string, std::vector<double>> input_values;
  /// The options as text ("--input-shape NAME=1x3x640x640", "--input-value NAME=16000"), in the
  /// graph's import_options: a run imports the model again with the same ones.
  std::vector<std::string> texts;
};

/// Parses "NAME=DIMS" (dims joined by 'x') and "NAME=VALUES" (numbers joined by ',', or a .pb
/// or .npy file whose values are taken) into `options`; throws Error naming the option and the fix.
void add_input_shape(ImportOptions& options, const std::string& text);
void add_input_value(ImportOptions& options, const std::string& text);
/// The options a graph's import_options hold (as written by a compile), parsed back.
ImportOptions import_options_of(const std::vector<std::string>& texts);

struct OnnxImport {
  Graph graph;  ///< source_file: the absolute path; source_sha256: the file's sha256
  /// Values of every IR weight tensor, row-major float32 (float16 weights already rounded).
  std::map<std::string, std::vector<float>> weights;
  std::vector<OnnxValue> inputs;  ///< the runtime inputs, in the model's order
  /// The graph inputs --input-value froze, with their values (row-major): ONNX Runtime needs them.
  std::vector<std::pair<OnnxValue, std::vector<double>>> frozen;
  std::vector<OnnxValue> outputs;   ///< in the model's order
  std::int64_t opset = 0;           ///< of the default domain
  std::uint64_t folded_nodes = 0;   ///< nodes computed at import (constants, shapes)
  std::uint64_t frozen_inputs = 0;  ///< graph inputs --input-value made constants
};

/// Whether `path` names an ONNX model: a `.onnx` file, or one that starts like a ModelProto
/// (field 1, ir_version, a varint; no YAML text starts with that byte).
bool is_onnx_model(const std::string& path);

/// Reads, checks (onnx::checker), infers shapes (onnx::shape_inference), folds constants and
/// imports the model. Throws tessera::Error with the file, the node (name and op type) and
/// what is supported when something is not.
/// With `expected_sha256`, the file's bytes must have that sha256, checked before anything is
/// parsed (a run's weights come only from the file the package names).
OnnxImport import_onnx(const std::string& path, const std::string& expected_sha256 = "",
                       const ImportOptions& options = {});

/// A model YAML, or an ONNX model (is_onnx_model) imported with its weights, as the IR graph;
/// an import is logged (path, opset, sha256, sizes) on tessera.build. `options` apply to ONNX
/// models only (a YAML model given them is refused).
Graph load_any_model(const std::string& path, const ImportOptions& options = {});

/// Operators the importer maps onto the IR, and those it folds when their inputs are constant.
const std::vector<std::string>& supported_operators();
const std::vector<std::string>& folded_operators();

/// Lower-case hex sha256 of `bytes` (OpenSSL).
std::string sha256_hex(const std::string& bytes);

}  // namespace tessera::onnx_import
