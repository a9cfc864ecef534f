// Tensor files: ONNX TensorProto (.pb, as in ONNX's test data) and NumPy .npy, read and written.
#include "tessera/onnx/tensor_file.hpp"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
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

static_assert(kFloatElements == onnx::TensorProto::FLOAT);

/// The numpy descr of each element type a file may hold (little-endian; one byte has no order).
struct NumpyType {
  int element_type;
  const char* descr;
};
constexpr NumpyType kNumpyTypes[] = {
    {onnx::TensorProto::FLOAT, "<f4"},  {onnx::TensorProto::DOUBLE, "<f8"}, {onnx::TensorProto::FLOAT16, "<f2"},
    {onnx::TensorProto::INT64, "<i8"},  {onnx::TensorProto::INT32, "<i4"},  {onnx::TensorProto::INT16, "<i2"},
    {onnx::TensorProto::INT8, "|i1"},   {onnx::TensorProto::UINT8, "|u1"},  {onnx::TensorProto::UINT16, "<u2"},
    {onnx::TensorProto::UINT32, "<u4"}, {onnx::TensorProto::UINT64, "<u8"}, {onnx::TensorProto::BOOL, "|b1"}};

TensorFile read_pb(const std::string& path) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(read_bytes(path)))
    throw Error(
        path + ": not an ONNX TensorProto (.pb); write one with onnx.numpy_helper.from_array(...).SerializeToString()");
  const int dtype = proto.data_type();
  const bool known = std::any_of(std::begin(kNumpyTypes), std::end(kNumpyTypes),
                                 [&](const NumpyType& t) { return t.element_type == dtype; });
  if (!known)
    throw Error(
        fmt::format("{}: tensor '{}' is {}; tensor files hold float, double, float16, int8 to int64, uint8 "
                    "to uint64 or bool values",
                    path, proto.name(), dtype_text(dtype)));
  Constant c = read_tensor(proto, path);
  TensorFile tensor;
  tensor.name = proto.name();
  tensor.dims = c.dims;
  tensor.element_type = dtype;
  tensor.values = std::move(c.values);
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
  std::string type = descr[1];
  if (type == "<b1" || type == "?") type = "|b1";  // spellings numpy accepts for one byte
  if (type == "<u1") type = "|u1";
  if (type == "<i1") type = "|i1";
  const auto found =
      std::find_if(std::begin(kNumpyTypes), std::end(kNumpyTypes), [&](const NumpyType& t) { return type == t.descr; });
  if (found == std::end(kNumpyTypes))
    return fail("dtype '" + type +
                "'; use little-endian float32 ('<f4'), float16, float64, int8 to int64, uint8 to uint64 or bool");
  const std::size_t width = raw_bytes(found->element_type);
  TensorFile tensor;
  tensor.element_type = found->element_type;
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
  // The data is read as a TensorProto's raw data of the same type, which it is.
  onnx::TensorProto proto;
  proto.set_data_type(tensor.element_type);
  for (std::int64_t d : tensor.dims) proto.add_dims(d);
  proto.set_raw_data(bytes.substr(data_start));
  tensor.values = read_tensor(proto, path).values;
  if (tensor.element_type == onnx::TensorProto::BOOL)
    for (double& v : tensor.values) v = v != 0 ? 1.0 : 0.0;
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

namespace {

template <typename T>
void append_values(std::string& raw, const std::vector<double>& values) {
  for (double v : values) {
    const T value = static_cast<T>(v);
    raw.append(reinterpret_cast<const char*>(&value), sizeof value);  // little-endian, as ONNX and numpy want
  }
}

/// The values as little-endian raw data of `element_type`.
std::string raw_data(int element_type, const std::vector<double>& values) {
  std::string raw;
  switch (element_type) {
    case onnx::TensorProto::DOUBLE:
      append_values<double>(raw, values);
      break;
    case onnx::TensorProto::FLOAT16:
      for (double v : values) {
        const std::uint16_t half = float_to_half(static_cast<float>(v));
        raw.append(reinterpret_cast<const char*>(&half), sizeof half);
      }
      break;
    case onnx::TensorProto::INT64:
      append_values<std::int64_t>(raw, values);
      break;
    case onnx::TensorProto::INT32:
      append_values<std::int32_t>(raw, values);
      break;
    case onnx::TensorProto::INT16:
      append_values<std::int16_t>(raw, values);
      break;
    case onnx::TensorProto::INT8:
      append_values<std::int8_t>(raw, values);
      break;
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      append_values<std::uint8_t>(raw, values);
      break;
    case onnx::TensorProto::UINT16:
      append_values<std::uint16_t>(raw, values);
      break;
    case onnx::TensorProto::UINT32:
      append_values<std::uint32_t>(raw, values);
      break;
    case onnx::TensorProto::UINT64:
      append_values<std::uint64_t>(raw, values);
      break;
    default:
      append_values<float>(raw, values);
  }
  return raw;
}

}  // namespace

void write_tensor_file(const std::string& path, const TensorFile& tensor) {
  const std::string extension = extension_of(path);
  const auto type = std::find_if(std::begin(kNumpyTypes), std::end(kNumpyTypes),
                                 [&](const NumpyType& t) { return t.element_type == tensor.element_type; });
  if (type == std::end(kNumpyTypes))
    throw Error(fmt::format("{}: cannot write elements of type {}", path, dtype_text(tensor.element_type)));
  const std::string raw = raw_data(tensor.element_type, tensor.values);
  if (extension == ".pb") {
    onnx::TensorProto proto;
    proto.set_name(tensor.name);
    proto.set_data_type(tensor.element_type);
    for (std::int64_t d : tensor.dims) proto.add_dims(d);
    proto.set_raw_data(raw);
    write_file_atomically(path, proto.SerializeAsString(), "the output tensor");
    return;
  }
  if (extension == ".npy") {
    std::string shape;
    for (std::int64_t d : tensor.dims) shape += fmt::format("{}, ", d);
    if (tensor.dims.size() > 1) shape.erase(shape.size() - 2);
    if (tensor.dims.size() == 1) shape.pop_back();
    std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", type->descr, shape);
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

bool is_bool_elements(int element_type) { return element_type == onnx::TensorProto::BOOL; }

bool is_integer_elements(int element_type) {
  switch (element_type) {
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT64:
    case onnx::TensorProto::UINT32:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::UINT8:
      return true;
    default:
      return false;
  }
}

std::vector<float> device_words(const TensorFile& file, DType dtype, const std::string& what) {
  const bool wants_integers = dtype == DType::int32, wants_bools = dtype == DType::boolean;
  if (wants_integers != is_integer_elements(file.element_type) || wants_bools != is_bool_elements(file.element_type))
    throw Error(fmt::format("{}: the file holds {} values but the tensor is {} on the device ({}); give {} values",
                            what, dtype_text(file.element_type), dtype_name(dtype),
                            wants_integers ? "the model's integer type"
                            : wants_bools  ? "bool"
                                           : "float, double or float16",
                            wants_integers ? "integer"
                            : wants_bools  ? "bool"
                                           : "float"));
  std::vector<float> words;
  words.reserve(file.values.size());
  for (std::size_t i = 0; i < file.values.size(); ++i) {
    const double v = file.values[i];
    if (!is_integer_word(dtype)) {
      words.push_back(static_cast<float>(v));
      continue;
    }
    if (!(v >= -2147483648.0 && v <= 2147483647.0))
      throw Error(
          fmt::format("{}: element {} is {}, outside int32 ([-2147483648, 2147483647]), the type the device "
                      "holds integers in; give values in that range",
                      what, i, v));
    words.push_back(int_word(static_cast<std::int32_t>(v)));
  }
  return words;
}

std::vector<double> host_values(const std::vector<float>& words, DType dtype) {
  std::vector<double> values;
  values.reserve(words.size());
  for (float word : words)
    values.push_back(is_integer_word(dtype) ? static_cast<double>(word_int(word)) : static_cast<double>(word));
  return values;
}

}  // namespace tessera::onnx_import
