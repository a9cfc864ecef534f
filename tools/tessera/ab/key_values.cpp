// key=value parsing of tessera's result lines (stdout) and log lines (stderr).
#include "key_values.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace tessera::ab {

std::map<std::string, std::string> parse_key_values(const std::string& line) {
  std::map<std::string, std::string> fields;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const std::size_t word = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])) && line[i] != '=') ++i;
    if (i >= line.size() || line[i] != '=' || i == word) {
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;  // not a field
      continue;
    }
    const std::string key = line.substr(word, i - word);
    ++i;
    std::string value;
    if (i < line.size() && line[i] == '"') {
      const std::size_t close = line.find('"', i + 1);
      const std::size_t end = close == std::string::npos ? line.size() : close;
      value = line.substr(i + 1, end - i - 1);
      i = close == std::string::npos ? line.size() : close + 1;
    } else {
      const std::size_t start = i;
      while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
      value = line.substr(start, i - start);
    }
    fields[key] = value;
  }
  return fields;
}

std::map<std::string, std::string> find_key_values(const std::string& text, const std::string& marker) {
  const std::size_t at = text.find(marker);
  if (at == std::string::npos) return {};
  const std::size_t newline = text.rfind('\n', at);
  const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
  const std::size_t end = text.find('\n', at);
  return parse_key_values(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
}

std::optional<std::uint64_t> field_uint(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto found = fields.find(key);
  if (found == fields.end()) return std::nullopt;
  std::uint64_t value = 0;
  const std::string& text = found->second;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<double> field_number(const std::map<std::string, std::string>& fields, const std::string& key) {
  auto found = fields.find(key);
  if (found == fields.end() || found->second.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(found->second.c_str(), &end);
  if (end != found->second.c_str() + found->second.size()) return std::nullopt;
  return value;
}

}  // namespace tessera::ab
