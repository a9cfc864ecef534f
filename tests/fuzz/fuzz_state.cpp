// libFuzzer target: parse_state() on arbitrary bytes must return or throw tessera::Error, nothing
// else (states are as untrusted as packages: `tessera opt` and replay read them).
#include <cstddef>
#include <cstdint>
#include <string>

#include "tessera/diagnostic.hpp"
#include "tessera/state_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    (void)tessera::parse_state(std::string(reinterpret_cast<const char*>(data), size), "fuzz.tstate");
  } catch (const tessera::Error&) {
    // The documented refusal; a nlohmann exception or std::out_of_range escaping is a crash.
  }
  return 0;
}
