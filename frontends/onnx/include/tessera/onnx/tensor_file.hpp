// Tensor files for `tessera run`: ONNX TensorProto (.pb) and NumPy (.npy), read and written.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::onnx_import {

struct TensorFile {
  std::string name;  ///< TensorProto's name (.pb), or "" (.npy)
  std::vector<std::int64_t> dims;
  std::vector<float> values;  ///< row-major; float16 and float64 files converted
};

/// Reads a .pb (TensorProto) or .npy (little-endian float32/float16/float64, C order) file,
/// chosen by extension. Throws Error naming the file and what is wrong with it.
TensorFile read_tensor_file(const std::string& path);

/// Writes `tensor` as float32 .pb or .npy (by extension), atomically.
void write_tensor_file(const std::string& path, const TensorFile& tensor);

}  // namespace tessera::onnx_import
