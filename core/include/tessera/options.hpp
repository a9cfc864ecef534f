// Typed plugin options: the schema a plugin declares and the values a pipeline gives.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace tessera {

/// `path` holds a string; the pipeline loader makes a relative one absolute against the
/// pipeline file's folder, as it does for `target:` and `plugin_paths:`. `map` holds a
/// nested YAML mapping (MapOption) that the plugin parses itself.
enum class OptionType : std::uint8_t { boolean, integer, number, string, path, map };
const char* option_type_name(OptionType);

/// A nested mapping given to a `map` option, as YAML flow text laid out so that a node the
/// plugin parses at 0-based (line, column) of `yaml` was written at place(line, column).
struct MapOption {
  std::string yaml = "{}";
  std::string file;               ///< the pipeline file ("" for a manifest default)
  std::int64_t first_line = 0;    ///< 0-based line in `file` of the text's first line

  /// "file:line:column" (1-based) of a node at 0-based (line, column) of `yaml`.
  std::string place(std::int64_t line, std::int64_t column) const;
  bool operator==(const MapOption&) const;  ///< the same YAML content; places and layout ignored
};

using OptionValue = std::variant<bool, std::int64_t, double, std::string, MapOption>;
std::string option_value_text(const OptionValue&);

struct OptionSpec {
  std::string name;
  OptionType type = OptionType::string;
  OptionValue default_value;
  std::string doc;
};

/// Validated option values, defaults filled in. Getters throw std::logic_error on a name
/// or type the plugin did not declare (a plugin bug, not a user error).
class Options {
public:
  std::map<std::string, OptionValue> values;

  bool get_bool(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  double get_number(const std::string& name) const;  ///< accepts integers too
  const std::string& get_string(const std::string& name) const;
  const MapOption& get_map(const std::string& name) const;

private:
  const OptionValue& at(const std::string& name) const;
};

}  // namespace tessera
