// libFuzzer target: import_onnx() on arbitrary bytes must return or throw tessera::Error, nothing else.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/onnx/import.hpp"

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
