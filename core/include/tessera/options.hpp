// Typed plugin options: the schema a plugin declares and the values a pipeline gives.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tessera {

/// `path` holds a string; the pipeline loader makes a relative one absolute against the
/// pipeline file's folder, as it does for `target:` and `plugin_paths:`. `map` holds a
/// nested YAML mapping (MapOption) that the plugin parses itself. `choice` (written "enum",
/// API 2.1) holds one of the names the plugin declares, as a string.
enum class OptionType : std::uint8_t { boolean, integer, number, string, path, map, choice };
const char* option_type_name(OptionType);

/// A nested mapping given to a `map` option, as YAML flow text laid out so that a node the
/// plugin parses at 0-based (line, column) of `yaml` was written at place(line, column).
struct MapOption {
  std::string yaml = "{}";
  std::string file;             ///< the pipeline file ("" for a manifest default)
  std::int64_t first_line = 0;  ///< 0-based line in `file` of the text's first line

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
  /// API 2.1: bounds of an int (std::int64_t) or float (double) option; none = unbounded.
  std::optional<OptionValue> minimum, maximum;
  bool minimum_excluded = false, maximum_excluded = false;
  std::vector<std::string> choices;  ///< an enum option's names, in declared order
};

/// What an option accepts beyond its type, as `tessera plugins info` and errors show it:
/// "[1, 100000]", "(0, 1]", ">= 0", "one of: auto, as_is, swapped"; "" if anything of its type.
std::string option_limits_text(const OptionSpec& spec);

/// "" if `value` (already of the spec's type) is within its range or among its choices;
/// otherwise what is wrong and what to write instead.
std::string option_limits_problem(const OptionSpec& spec, const OptionValue& value);

/// Validated option values, defaults filled in. Getters throw std::logic_error on a name
/// or type the plugin did not declare (a plugin bug, not a user error).
class Options {
public:
  std::map<std::string, OptionValue> values;
  /// Option name -> "file:line:column" the pipeline gave it at (a default: where the plugin is
  /// named), so a plugin's refusal of an option can be reported there. Filled by the loader.
  std::map<std::string, std::string> places;

  bool get_bool(const std::string& name) const;
  std::int64_t get_int(const std::string& name) const;
  double get_number(const std::string& name) const;  ///< accepts integers too
  const std::string& get_string(const std::string& name) const;
  const MapOption& get_map(const std::string& name) const;

private:
  const OptionValue& at(const std::string& name) const;
};

}  // namespace tessera
