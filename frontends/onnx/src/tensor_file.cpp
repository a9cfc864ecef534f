// Tensor files: ONNX TensorProto (.pb, as in ONNX's test data) and NumPy .npy, read and written.
#include "tessera/onnx/tensor_file.hpp"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>

#include "constants.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/graph.hpp"

namespace fs = std::filesystem;

namespace tessera::onnx_import {

namespace {

constexpr std::size_t kMaxFileBytes = (std::size_t{1} << 31) - 1;

std::string read_bytes(const std::string& path) { return read_bounded_file(path, "the tensor file", kMaxFileBytes); }

TensorFile read_pb(const std::string& path) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(read_bytes(path)))
    throw Error(
        path + ": not an ONNX TensorProto (.pb); write one with onnx.numpy_helper.from_array(...).SerializeToString()");
  const int dtype = proto.data_type();
  if (dtype != onnx::TensorProto::FLOAT && dtype != onnx::TensorProto::FLOAT16 && dtype != onnx::TensorProto::DOUBLE)
    throw Error(fmt::format("{}: tensor '{}' is {}; inputs and expected outputs must be float, float16 or double", path,
                            proto.name(), dtype_text(dtype)));
  const Constant c = read_tensor(proto, path);
  TensorFile tensor;
  tensor.name = proto.name();
  tensor.dims = c.dims;
  tensor.values.reserve(c.values.size());
  for (double v : c.values) tensor.values.push_back(static_cast<float>(v));
  return tensor;
}

TensorFile read_npy(const std::string& path) {
  const std::string bytes = read_bytes(path);
  auto fail = [&](const std::string& why) -> TensorFile {
    throw Error(path + ": not a .npy file NumPy writes: " + why);
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return fail("no \\x93NUMPY magic");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length =
        static_cast<unsigned char>(bytes[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return fail("truncated header");
    for (int i = 3; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    return fail(fmt::format("format version {}", major));
  }
  if (header_length > bytes.size() - header_start) return fail("truncated header");
  const std::string header = bytes.substr(header_start, header_length);
  std::smatch descr, order, shape;
  if (!std::regex_search(header, descr, std::regex("'descr'\\s*:\\s*'([^']*)'")) ||
      !std::regex_search(header, order, std::regex("'fortran_order'\\s*:\\s*(True|False)")) ||
      !std::regex_search(header, shape, std::regex("'shape'\\s*:\\s*\\(([0-9,\\s]*)\\)")))
    return fail("its header lacks descr, fortran_order or shape");
  if (order[1] == "True") return fail("Fortran order; save a C-ordered array (np.ascontiguousarray)");
  const std::string type = descr[1];
  const std::size_t width = type == "<f4" ? 4 : type == "<f2" ? 2 : type == "<f8" ? 8 : 0;
  if (width == 0) return fail("dtype '" + type + "'; use little-endian float32 ('<f4'), float16 or float64");
  TensorFile tensor;
  const std::string dims_text = shape[1];
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dims_text.begin(), dims_text.end(), number), end; it != end; ++it) {
    if (it->str().size() > 12) return fail("a dim too large");
    tensor.dims.push_back(std::stoll(it->str()));
  }
  const auto count = static_cast<std::size_t>(element_count(tensor.dims, path));
  const std::size_t data_start = header_start + header_length;
  if (bytes.size() - data_start != count * width)
    return fail(fmt::format("{} data bytes for {} elements of {} bytes", bytes.size() - data_start, count, width));
  tensor.values.resize(count);
  const char* data = bytes.data() + data_start;
  for (std::size_t i = 0; i < count; ++i) {
    if (width == 4) {
      std::memcpy(&tensor.values[i], data + 4 * i, 4);
    } else if (width == 2) {
      std::uint16_t half = 0;
      std::memcpy(&half, data + 2 * i, 2);
      tensor.values[i] = half_to_float(half);
    } else {
      double wide = 0;
      std::memcpy(&wide, data + 8 * i, 8);
      tensor.values[i] = static_cast<float>(wide);
    }
  }
  return tensor;
}

std::string extension_of(const std::string& path) { return fs::path(path).extension().string(); }

}  // namespace

TensorFile read_tensor_file(const std::string& path) {
  const std::string extension = extension_of(path);
  if (extension == ".pb") return read_pb(path);
  if (extension == ".npy") return read_npy(path);
  throw Error(path + ": unknown tensor file type '" + extension +
              "'; give an ONNX TensorProto (.pb) or a NumPy array (.npy)");
}

void write_tensor_file(const std::string& path, const TensorFile& tensor) {
  const std::string extension = extension_of(path);
  const std::string_view raw(reinterpret_cast<const char*>(tensor.values.data()), tensor.values.size() * sizeof(float));
  if (extension == ".pb") {
    onnx::TensorProto proto;
    proto.set_name(tensor.name);
    proto.set_data_type(onnx::TensorProto::FLOAT);
    for (std::int64_t d : tensor.dims) proto.add_dims(d);
    proto.set_raw_data(std::string(raw));
    write_file_atomically(path, proto.SerializeAsString(), "the output tensor");
    return;
  }
  if (extension == ".npy") {
    std::string shape;
    for (std::int64_t d : tensor.dims) shape += fmt::format("{}, ", d);
    if (tensor.dims.size() > 1) shape.erase(shape.size() - 2);
    if (tensor.dims.size() == 1) shape.pop_back();
    std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", shape);
    // Magic, version 1.0, a 2-byte length, then the header padded with spaces to a multiple of 64 ending in '\n'.
    const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
    header.append(total - 10 - header.size() - 1, ' ');
    header += '\n';
    std::string bytes = "\x93NUMPY\x01";
    bytes += '\0';
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    bytes.append(raw);
    write_file_atomically(path, bytes, "the output tensor");
    return;
  }
  throw Error(path + ": unknown tensor file type '" + extension + "'; name outputs .pb or .npy");
}

}  // namespace tessera::onnx_import
