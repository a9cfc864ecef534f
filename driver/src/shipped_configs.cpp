// The configs shipped with tessera, found by name from the build tree or the install prefix.
#include "tessera/shipped_configs.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/diagnostic.hpp"
#include "tessera/yaml_text.hpp"

namespace fs = std::filesystem;

namespace tessera {

std::string shipped_config_directory() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  // Installed: <prefix>/bin/tessera beside <prefix>/share/tessera.
  if (!ec)
    if (const fs::path installed = exe.parent_path().parent_path() / "share/tessera";
        fs::is_directory(installed / "targets", ec))
      return installed.string();
  if (fs::is_directory(TESSERA_SOURCE_CONFIG_DIR, ec)) return TESSERA_SOURCE_CONFIG_DIR;
  return "";
}

bool is_config_name(const std::string& text) {
  const std::string extension = fs::path(text).extension().string();
  return !text.empty() && text.find('/') == std::string::npos && extension != ".yaml" && extension != ".onnx";
}

std::string find_config(const std::string& name_or_path, const std::string& kind, const std::string& what) {
  std::error_code ec;
  if (fs::exists(name_or_path, ec) || !is_config_name(name_or_path)) return name_or_path;
  const std::string root = shipped_config_directory();
  const fs::path folder = fs::path(root) / kind;
  if (!root.empty() && fs::is_regular_file(folder / (name_or_path + ".yaml"), ec))
    return (folder / (name_or_path + ".yaml")).string();
  std::vector<std::string> names;
  if (!root.empty())
    for (const auto& entry : fs::directory_iterator(folder, ec))
      if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  std::string message =
      what + " " + echoed_token(name_or_path) + ": no such file, nor a shipped " + kind.substr(0, kind.size() - 1);
  if (const std::string near = nearest_name(name_or_path, names); !near.empty())
    message += "; did you mean '" + near + "'?";
  if (names.empty()) throw Error(message + " (no shipped configs found beside this tessera; give a file)");
  throw Error(message + fmt::format(" (shipped in {}: {})", folder.string(), fmt::join(names, ", ")));
}

}  // namespace tessera
