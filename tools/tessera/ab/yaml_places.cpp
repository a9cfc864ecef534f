// YAML places and name suggestions for the A/B driver's suite and overlay files.
#include "yaml_places.hpp"

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "tessera/diagnostic.hpp"

namespace tessera::ab {

std::string yaml_place(const std::string& file, const YAML::Node& node) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return file;
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

YAML::Node load_yaml_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) throw Error(path + ": " + what + " file not found");
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw Error(path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

static std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(name, candidate);
    if (distance < best_distance) best_distance = distance, best = candidate;
  }
  return best;
}

void check_yaml_keys(const std::string& file, const YAML::Node& map, const std::vector<std::string>& allowed,
                     const std::string& what) {
  for (const auto& entry : map) {
    const std::string key = entry.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string message = yaml_place(file, entry.first) + ": unknown key '" + key + "' in " + what;
    if (std::string near = nearest_name(key, allowed); !near.empty()) message += "; did you mean '" + near + "'?";
    std::string list;
    for (const std::string& name : allowed) list += (list.empty() ? "" : ", ") + name;
    throw Error(message + " (allowed: " + list + ")");
  }
}

}  // namespace tessera::ab
