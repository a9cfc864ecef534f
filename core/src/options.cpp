// Typed option values and their accessors.
#include "tessera/options.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace tessera {

const char* option_type_name(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "bool";
    case OptionType::integer: return "int";
    case OptionType::number: return "float";
    case OptionType::string: return "string";
    case OptionType::path: return "path";
  }
  return "?";
}

std::string option_value_text(const OptionValue& value) {
  struct Visitor {
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return v; }
  };
  return std::visit(Visitor{}, value);
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

}  // namespace tessera
