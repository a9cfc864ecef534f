// Tensor files for `tessera run`: ONNX TensorProto (.pb) and NumPy (.npy), read and written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/graph.hpp"

namespace tessera::onnx_import {

/// onnx::TensorProto::FLOAT, the element type of a file unless it says otherwise.
inline constexpr int kFloatElements = 1;

struct TensorFile {
  std::string name;  ///< TensorProto's name (.pb), or "" (.npy)
  std::vector<std::int64_t> dims;
  std::vector<double> values;  ///< row-major, exactly as the file holds them (bools 0 or 1)
  /// The file's element type (onnx::TensorProto::DataType): float, double, float16, an integer type or bool.
  int element_type = kFloatElements;
};

/// Reads a .pb (TensorProto) or .npy (little-endian, C order: float32/16/64, int8/16/32/64,
/// uint8/16/32/64, bool) file, chosen by extension. Throws Error naming the file and what is wrong.
TensorFile read_tensor_file(const std::string& path);

/// Writes `tensor` as .pb or .npy (by extension) of its element type, atomically.
void write_tensor_file(const std::string& path, const TensorFile& tensor);

/// `file`'s values as the device holds a tensor of `dtype`: float32 values from a float file,
/// int32 words (int_word) from an integer file, bool words from a bool file. Throws Error
/// naming `what` (e.g. "--input x=in.pb") and the element when the kinds differ or an integer
/// lies outside int32, the device's integer type.
std::vector<float> device_words(const TensorFile& file, DType dtype, const std::string& what);

/// The values of a `dtype` tensor the device holds as `words` (int32 and bool words decoded).
std::vector<double> host_values(const std::vector<float>& words, DType dtype);

/// Whether an ONNX element type is one of the integer types, bool, or a float type.
bool is_integer_elements(int element_type);
bool is_bool_elements(int element_type);

}  // namespace tessera::onnx_import
