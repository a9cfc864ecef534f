// Parses the key=value fields that tessera prints on result lines and in its logs.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tessera::ab {

/// The key=value fields of one line; values may be "quoted". Words without '=' are skipped.
std::map<std::string, std::string> parse_key_values(const std::string& line);

/// The fields of the first line of `text` that contains `marker`; empty if there is none.
std::map<std::string, std::string> find_key_values(const std::string& text, const std::string& marker);

/// The field as an unsigned integer, or nothing when absent or not a number.
std::optional<std::uint64_t> field_uint(const std::map<std::string, std::string>& fields, const std::string& key);
std::optional<double> field_number(const std::map<std::string, std::string>& fields, const std::string& key);

}  // namespace tessera::ab
