// Typed option values and their accessors.
#include "tessera/options.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace tessera {

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::boolean:
      return "bool";
    case OptionType::integer:
      return "int";
    case OptionType::number:
      return "float";
    case OptionType::string:
      return "string";
    case OptionType::path:
      return "path";
    case OptionType::map:
      return "map";
    case OptionType::choice:
      return "enum";
  }
  return "?";
}

std::string option_value_text(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return v; }
    std::string operator()(const MapOption& v) const {  // one line: the layout's spaces and breaks squeezed
      std::string text;
      bool quoted = false, escaped = false;
      for (char c : v.yaml) {
        const bool space = !quoted && (c == ' ' || c == '\n');
        if (space && (text.empty() || text.back() == ' ' || text.back() == '{' || text.back() == '[')) continue;
        if (!quoted && (c == '}' || c == ']') && !text.empty() && text.back() == ' ') text.pop_back();
        text += space ? ' ' : c;
        if (quoted && !escaped && c == '"') quoted = false;
        else if (!quoted && c == '"') quoted = true;
        escaped = quoted && !escaped && c == '\\';
      }
      return text;
    }
  };
  return std::visit(Visitor{}, value);
}

namespace {

// Whether `value` lies beyond `bound` on `side` (-1: below a minimum, 1: above a maximum). int
// bounds compare as integers (exact to 2^63), float ones as doubles; NaN is beyond every bound.
bool outside(const OptionValue& value, const OptionValue& bound, bool excluded, int side) {
  int order = 0;  // -1, 0, 1: value below, at, above the bound
  const auto* v = std::get_if<std::int64_t>(&value);
  const auto* b = std::get_if<std::int64_t>(&bound);
  if (v && b) {
    order = (*v > *b) - (*v < *b);
  } else {
    const double x = v ? double(*v) : std::get<double>(value);
    const double y = b ? double(*b) : std::get<double>(bound);
    if (std::isnan(x) || std::isnan(y)) return true;
    order = (x > y) - (x < y);
  }
  return order == side || (order == 0 && excluded);
}

}  // namespace

std::string option_limits_text(const OptionSpec& spec) {
  if (!spec.choices.empty()) return fmt::format("one of: {}", fmt::join(spec.choices, ", "));
  if (spec.minimum && spec.maximum)
    return fmt::format("{}{}, {}{}", spec.minimum_excluded ? '(' : '[', option_value_text(*spec.minimum),
                       option_value_text(*spec.maximum), spec.maximum_excluded ? ')' : ']');
  if (spec.minimum) return fmt::format("{} {}", spec.minimum_excluded ? ">" : ">=", option_value_text(*spec.minimum));
  if (spec.maximum) return fmt::format("{} {}", spec.maximum_excluded ? "<" : "<=", option_value_text(*spec.maximum));
  return "";
}

std::string option_limits_problem(const OptionSpec& spec, const OptionValue& value) {
  if (!spec.choices.empty()) {
    const auto* name = std::get_if<std::string>(&value);
    if (name && std::find(spec.choices.begin(), spec.choices.end(), *name) != spec.choices.end()) return "";
    return fmt::format("must be {}, got '{}'", option_limits_text(spec), option_value_text(value));
  }
  const bool too_low = spec.minimum && outside(value, *spec.minimum, spec.minimum_excluded, -1);
  const bool too_high = spec.maximum && outside(value, *spec.maximum, spec.maximum_excluded, 1);
  if (too_low || too_high)
    return fmt::format("must be {}{}, got {}", spec.minimum && spec.maximum ? "in " : "", option_limits_text(spec),
                       option_value_text(value));
  return "";
}

std::string MapOption::place(std::int64_t line, std::int64_t column) const {
  if (file.empty()) return fmt::format("(default):{}:{}", line + 1, column + 1);
  return fmt::format("{}:{}:{}", file, first_line + line + 1, column + 1);
}

bool MapOption::operator==(const MapOption& other) const {
  return option_value_text(*this) == option_value_text(other);
}

const OptionValue& Options::at(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) throw std::logic_error("option '" + name + "' was not declared");
  return it->second;
}

bool Options::get_bool(const std::string& name) const {
  if (auto v = std::get_if<bool>(&at(name))) return *v;
  throw std::logic_error("option '" + name + "' is not a bool");
}

std::int64_t Options::get_int(const std::string& name) const {
  if (auto v = std::get_if<std::int64_t>(&at(name))) return *v;
  throw std::logic_error("option '" + name + "' is not an int");
}

double Options::get_number(const std::string& name) const {
  const OptionValue& value = at(name);
  if (auto v = std::get_if<double>(&value)) return *v;
  if (auto v = std::get_if<std::int64_t>(&value)) return static_cast<double>(*v);
  throw std::logic_error("option '" + name + "' is not a number");
}

const std::string& Options::get_string(const std::string& name) const {
  if (auto v = std::get_if<std::string>(&at(name))) return *v;
  throw std::logic_error("option '" + name + "' is not a string");
}

const MapOption& Options::get_map(const std::string& name) const {
  if (auto v = std::get_if<MapOption>(&at(name))) return *v;
  throw std::logic_error("option '" + name + "' is not a map");
}

}  // namespace tessera
