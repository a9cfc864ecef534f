// YAML places and name suggestions for pipeline overlays and the A/B driver's suite files.
#include "tessera/yaml_places.hpp"

#include <algorithm>
#include <filesystem>

#include "tessera/diagnostic.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera::overlay {

std::string yaml_place(const std::string& file, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

YAML::Node load_yaml_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": " + what + " file not found");
  const std::string text = read_yaml_text(path, "a " + what + " file");  // bounded size and aliases
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

void check_yaml_keys(const std::string& file, const YAML::Node& map, const std::vector<std::string>& allowed,
                     const std::string& what) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string message = yaml_place(file, entry.first) + ": unknown key " + echoed_token(key) + " in " + what;
    if (std::string near = tessera::nearest_name(key, allowed); !near.empty()) message += "; did you mean '" + near + "'?";
    std::string list;
    for (const std::string& name : allowed) list += (list.empty() ? "" : ", ") + name;
    throw Error(message + " (allowed: " + list + ")");
  }
}

}  // namespace tessera::overlay
