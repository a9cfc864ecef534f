// A temporary directory for a test, removed at the end of its scope.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tessera::testing {

class TempDir {
public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  /// Writes `text` to `name` inside the directory and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    auto file = path_ / name;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

private:
  std::filesystem::path path_;
};

inline std::string source_path(const std::string& relative) { return std::string(TESSERA_SOURCE_DIR) + "/" + relative; }

/// A copy of a shipped pipeline in `dir` naming this build's plugin folder: the `tessera`
/// binary loads it anyway (the shipped plugins), a test resolving the pipeline in its own
/// process needs it. The target stays a name. The text `from` is replaced by `to`.
inline std::string pipeline_copy(const TempDir& dir, const std::string& pipeline, const std::string& from = "",
                                 const std::string& to = "") {
  std::ifstream in(pipeline);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (const auto at = text.find("plugin_paths: []"); at != std::string::npos)
    text.replace(at, 16, std::string("plugin_paths: [") + TESSERA_PLUGIN_DIR + "]");
  if (from.empty()) return dir.write("pipeline.yaml", text);
  if (text.find(from) == std::string::npos)
    throw std::runtime_error("pipeline_copy: '" + from + "' not in " + pipeline);
  text.replace(text.find(from), from.size(), to);
  return dir.write("pipeline.yaml", text);
}

}  // namespace tessera::testing
