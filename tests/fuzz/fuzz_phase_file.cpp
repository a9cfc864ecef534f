// libFuzzer target: read_phase_file() on arbitrary bytes must return or throw tessera::Error, nothing else.
#include <cstddef>
#include <cstdint>

#include "fuzz_input_file.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = tessera::fuzz::input_path("phase.txt");
  tessera::fuzz::write_input(path, data, size);
  try {
    (void)tessera::read_phase_file(path);
  } catch (const tessera::Error&) {
    // The documented way to refuse bad input. Any other exception escapes and libFuzzer
    // reports it as a crash: a reader must not leak YAML::Exception or std::out_of_range.
  }
  return 0;
}
