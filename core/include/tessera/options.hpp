// Typed plugin options: the schema a plugin declares and the values a pipeline gives.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace tessera {

/// `path` holds a string; the pipeline loader makes a relative one absolute against the
/// pipeline file's folder, as it does for `target:` and `plugin_paths:`.
enum class OptionType : std::uint8_t { boolean, integer, number, string, path };
const char* option_type_name(OptionType);

using OptionValue = std::variant<bool, std::int64_t, double, std::string>;
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

private:
  const OptionValue& at(const std::string& name) const;
};

}  // namespace tessera
