// Strict YAML reading (places, unknown keys, typed scalars) for the SDK's loaders and for
// plugins' own files. Including it needs yaml-cpp.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace tessera::yaml {

/// "file:line:column" of a node (1-based), or just "file" when the node has no mark.
std::string place(const std::string& file, const YAML::Node& node);

[[noreturn]] void fail(const std::string& file, const YAML::Node& node, const std::string& message);

/// Type tests that are safe on a missing key of a const node (yaml-cpp throws for those).
inline bool is_scalar(const YAML::Node& node) { return node.IsDefined() && node.IsScalar(); }
inline bool is_map(const YAML::Node& node) { return node.IsDefined() && node.IsMap(); }
inline bool is_sequence(const YAML::Node& node) { return node.IsDefined() && node.IsSequence(); }

/// Parses a YAML file of bounded size and alias expansion (`what`, e.g. "suite", names it in
/// errors); a missing file, a syntax error or (unless `empty_allowed`: then a null node) an
/// empty file is an Error with file:line:column.
YAML::Node load_file(const std::string& path, const std::string& what = "model, pipeline or target",
                     bool empty_allowed = false);

/// Fails on a key of `map` not in `allowed` (`what`, when given, names the map: "a suite
/// entry"), suggesting the nearest allowed key and listing them all.
void check_keys(const std::string& file, const YAML::Node& map, std::initializer_list<const char*> allowed);
void check_keys(const std::string& file, const YAML::Node& map, const std::vector<std::string>& allowed,
                const std::string& what = "");
void require_map(const std::string& file, const YAML::Node& node, const std::string& what);

/// `text` in single quotes for an error message: control characters escaped and at most
/// kMaxEchoedBytes shown, so a hostile token can neither add lines nor flood the terminal.
std::string echoed_token(const std::string& text);
constexpr std::size_t kMaxEchoedBytes = 80;

/// Required or optional typed scalars; a wrong type fails naming the key and its place.
std::string get_string(const std::string& file, const YAML::Node& map, const char* key);
/// A name (model, tensor, target, pipeline): get_string, refusing control characters and
/// invalid UTF-8, which would forge lines in logs and errors or break JSON reports.
std::string get_name(const std::string& file, const YAML::Node& map, const char* key);
/// Non-negative integers up to `max` (the largest value the field's type holds); a larger
/// one fails with its place instead of being truncated.
std::uint64_t get_uint(const std::string& file, const YAML::Node& map, const char* key, std::uint64_t max = UINT64_MAX);
std::uint64_t get_uint_or(const std::string& file, const YAML::Node& map, const char* key, std::uint64_t fallback,
                          std::uint64_t max = UINT64_MAX);
/// get_uint for a 32-bit field.
std::uint32_t get_uint32(const std::string& file, const YAML::Node& map, const char* key);
std::uint32_t get_uint32_or(const std::string& file, const YAML::Node& map, const char* key, std::uint32_t fallback);
double get_number_or(const std::string& file, const YAML::Node& map, const char* key, double fallback);
bool get_bool_or(const std::string& file, const YAML::Node& map, const char* key, bool fallback);

/// `node` as YAML flow text in which every node starts at its own mark: line relative to
/// node's line, column as written (so places found in the text map back to the file).
std::string flow_layout(const YAML::Node& node);

/// Scalar parsing helpers shared with option parsing.
bool parse_int(const std::string& text, std::int64_t& value);
bool parse_number(const std::string& text, double& value);
bool parse_bool(const std::string& text, bool& value);

/// Names longer than this get no "did you mean" suggestion, so a huge unknown name costs nothing.
inline constexpr std::size_t kMaxSuggestedNameBytes = 64;

/// Levenshtein distance, and the nearest candidate within a small distance (or "", and always
/// "" for a name longer than kMaxSuggestedNameBytes).
std::size_t edit_distance(const std::string& a, const std::string& b);
std::string nearest(const std::string& name, const std::vector<std::string>& candidates);

}  // namespace tessera::yaml
