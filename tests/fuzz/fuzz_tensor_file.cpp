// libFuzzer target: read_tensor_file() on arbitrary .pb bytes must return or throw tessera::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/onnx/tensor_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The first byte picks the reader, so both formats are explored from one corpus.
  if (size == 0) return 0;
  static const std::string pb = tessera::fuzz::input_path("tensor.pb");
  static const std::string npy = tessera::fuzz::input_path("tensor.npy");
  const std::string& path = data[0] & 1 ? npy : pb;
  tessera::fuzz::write_input(path, data + 1, size - 1);
  try {
    (void)tessera::onnx_import::read_tensor_file(path);
  } catch (const tessera::Error&) {}
  return 0;
}
