// User-facing errors with a file and place.
#include "tessera/diagnostic.hpp"

#include <algorithm>

namespace tessera {

static std::string with_place(const std::string& file, int line, int column, const std::string& message) {
  std::string where = file;
  if (line > 0) where += ":" + std::to_string(line);
  if (line > 0 && column > 0) where += ":" + std::to_string(column);
  return where + ": " + message;
}

Error::Error(const std::string& file, int line, int column, const std::string& message)
    : std::runtime_error(with_place(file, line, column, message)) {}

std::string printable_error(std::string_view message) {
  constexpr std::size_t kMaxBytes = 16 * 1024;
  constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const std::size_t shown = std::min(message.size(), kMaxBytes);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(message[i]);
    const bool detail_line = c == '\n' && i + 1 < shown && message[i + 1] == ' ';
    if ((c >= 0x20 && c != 0x7f) || detail_line) {
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (shown < message.size()) out += " ... (" + std::to_string(message.size() - shown) + " more bytes)";
  return out;
}

}  // namespace tessera
