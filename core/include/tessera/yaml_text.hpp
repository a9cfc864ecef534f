// Bounded YAML reading for loaders outside the core (`tessera ab`, plugins such as calibrated):
// the same file size cap, alias cap and bounded "did you mean" as the core's own loaders.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// yaml-cpp's node tree takes ~70 bytes per byte of text: YAML files are refused past this.
inline constexpr std::uintmax_t kMaxYamlFileBytes = 16u << 20;

/// The text of the YAML file `path` (`what`, e.g. "a suite file", names it in errors), checked
/// before anyone parses it into nodes: at most kMaxYamlFileBytes, and aliases adding at most
/// 100,000 nodes when expanded, none inside its own anchor (the first document, as YAML::Load
/// reads). Throws Error naming the file (and the alias's or syntax error's line:column).
std::string read_yaml_text(const std::string& path, const std::string& what);

/// The candidate nearest `name` within a small edit distance, or "" (always "" for a name over
/// 64 bytes, so a huge unknown name costs nothing).
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

/// `text` in single quotes for an error message: control characters escaped and at most 80
/// bytes shown, so a hostile token can neither add lines nor flood the terminal.
std::string echoed_token(const std::string& text);

}  // namespace tessera
