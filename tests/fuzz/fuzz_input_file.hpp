// Fuzz-target helper: the readers under test take a path, so each input is written to a file first.
#pragma once
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace tessera::fuzz {

/// A per-process scratch folder under $TMPDIR holding `name`; `targets` beside it links to
/// configs/targets so a pipeline's `target: ../targets/t16.yaml` resolves as it does in configs/.
inline std::string input_path(const std::string& name) {
  namespace fs = std::filesystem;
  static const fs::path root = [] {
    fs::path dir = fs::temp_directory_path() / ("tessera-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(dir / "inputs");
    std::error_code ec;
    fs::create_directory_symlink(fs::path(TESSERA_SOURCE_DIR) / "configs" / "targets", dir / "targets", ec);
    return dir;
  }();
  return (root / "inputs" / name).string();
}

/// Writes the fuzzer's bytes to `path` (truncating), so the reader sees exactly them.
inline void write_input(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace tessera::fuzz
