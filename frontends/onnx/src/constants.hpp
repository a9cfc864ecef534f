// Values the ONNX importer knows at import time (initializers, Constant nodes, folded shapes) and the folding of nodes
// on them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace tessera::onnx_import {

using Dims = std::vector<std::int64_t>;

/// The most elements a tensor of a model may have (the IR's limit too).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 31;
/// The most elements a folded constant may have: folding must not turn a small hostile file
/// (a ConstantOfShape, a broadcast, repeated Concats) into gigabytes of host memory.
inline constexpr std::int64_t kMaxFoldedElements = std::int64_t{1} << 26;

/// A constant tensor: its ONNX element type, dims and values (row-major, each exactly
/// representable in the element type: float values are floats, float16 values halves).
struct Constant {
  int dtype = onnx::TensorProto::FLOAT;
  Dims dims;
  std::vector<double> values;
};

/// Elements of `dims`; throws Error (with `where`) on a negative dim or more than kMaxElements.
std::int64_t element_count(const Dims& dims, const std::string& where);

/// The name of an ONNX element type ("float", "int64", ...).
std::string dtype_text(int dtype);

/// Bytes per element of `dtype` in raw_data (0 for the types the importer does not read).
std::size_t raw_bytes(int dtype);

/// `value` rounded to what `dtype` holds (float, half, integer truncation, bool).
double round_to(int dtype, double value);

/// A TensorProto's values; throws Error (with `where`) on external data, a type the importer
/// does not read, or a data field whose size disagrees with the dims.
Constant read_tensor(const onnx::TensorProto& tensor, const std::string& where);

/// Whether fold_node folds `op_type` when every input is a constant.
bool is_foldable(const std::string& op_type);

/// Computes a foldable node from its constant inputs (absent optional inputs are null).
/// Throws Error (with `where`) on attributes or inputs it cannot fold.
std::vector<Constant> fold_node(const onnx::NodeProto& node, const std::vector<const Constant*>& inputs,
                                std::int64_t opset, const std::string& where);

/// Numpy broadcasting of two dims; throws Error (with `where`) when they do not broadcast.
Dims broadcast_dims(const Dims& a, const Dims& b, const std::string& where);

/// `c` broadcast to `dims` (which it must broadcast to), row-major.
std::vector<double> expand_to(const Constant& c, const Dims& dims);

/// Normalises a possibly negative axis of a rank-`rank` tensor; throws Error when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank, const std::string& where);
/// normalize_axis of every axis of a list; throws Error (with `where`) when one is out of range
/// or two name the same axis.
std::vector<std::int64_t> normalize_axes(const std::vector<std::int64_t>& axes, std::int64_t rank,
                                         const std::string& where);

/// Throws Error (with `where`) unless `c` holds exactly product(dims) values: every constant is
/// checked before its values are indexed, so a hostile file cannot make a read past them.
void check_values(const Constant& c, const std::string& where);

/// Reshape's target dims: 0 copies the input's dim (unless allowzero), -1 is inferred.
Dims reshape_dims(const Dims& input, const Constant& shape, bool allow_zero, const std::string& where);

/// `in` with its axes permuted (reversed when `perm` is empty), as ONNX Transpose.
Constant transpose(const Constant& in, std::vector<std::int64_t> perm, const std::string& where);

/// Integer and float attributes with defaults.
std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback);
/// An INTS attribute's values (empty when absent).
std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name);
float float_attribute(const onnx::NodeProto& node, const std::string& name, float fallback);
const onnx::AttributeProto* find_attribute(const onnx::NodeProto& node, const std::string& name);

}  // namespace tessera::onnx_import
