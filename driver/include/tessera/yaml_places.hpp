// Small helpers for pipeline overlays and suite files: places for diagnostics and "did you mean".
#pragma once
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tessera::overlay {

/// Type tests that are safe on a missing key of a const node (yaml-cpp throws for those).
inline bool is_scalar(const YAML::Node& node) { return node.IsDefined() && node.IsScalar(); }
inline bool is_map(const YAML::Node& node) { return node.IsDefined() && node.IsMap(); }
inline bool is_sequence(const YAML::Node& node) { return node.IsDefined() && node.IsSequence(); }

/// "file:line:column" (1-based) of a node, or "file" when yaml-cpp has no mark for it.
std::string yaml_place(const std::string& file, const YAML::Node& node);

/// Parses a YAML file; a missing file or a syntax error is an Error naming the file and place.
YAML::Node load_yaml_file(const std::string& path, const std::string& what);

/// Throws Error at `map`'s place for a key not in `allowed`, suggesting the nearest one.
void check_yaml_keys(const std::string& file, const YAML::Node& map, const std::vector<std::string>& allowed,
                     const std::string& what);

}  // namespace tessera::overlay
