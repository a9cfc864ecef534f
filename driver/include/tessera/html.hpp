// HTML escaping for the reports `tessera report` and `tessera ab` write.
#pragma once
#include <string>
#include <string_view>

namespace tessera {

/// `text` safe as HTML element content and as a quoted attribute value.
inline std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace tessera
