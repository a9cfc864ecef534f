// Strict YAML reading for the core's loaders.
#include "tessera/strict_yaml.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include <yaml-cpp/eventhandler.h>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera::yaml {

std::string place(const std::string& file, const YAML::Node& node) {
  if (!node.IsDefined() || node.Mark().is_null()) return file;
  return file + ":" + std::to_string(node.Mark().line + 1) + ":" + std::to_string(node.Mark().column + 1);
}

void fail(const std::string& file, const YAML::Node& node, const std::string& message) {
  throw Error(place(file, node) + ": " + message);
}

namespace {

// Nodes that aliases may add to a file when expanded; real configs share a few small blocks.
constexpr std::uint64_t kMaxAliasExpandedNodes = 100000;

// An alias is one shared node in memory, but every walk over the tree (option layouts, checks)
// expands it, so a kilobyte of nested aliases can stand for billions of nodes. Counts the nodes
// the aliases add while the parser streams its events, and stops at the alias that crosses the cap.
class AliasExpansionCounter : public YAML::EventHandler {
public:
  explicit AliasExpansionCounter(const std::string& file) : file_(file) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t anchor) override { close_node(anchor, 1); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, const std::string&) override {
    close_node(anchor, 1);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open_.push_back({anchor, 1});
  }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t anchor, YAML::EmitterStyle::value) override {
    open_.push_back({anchor, 1});
  }
  void OnSequenceEnd() override { close_collection(); }
  void OnMapEnd() override { close_collection(); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    // Size 0: the anchor is still open, so the alias sits inside the node it repeats.
    const std::uint64_t nodes = anchor < anchor_nodes_.size() ? anchor_nodes_[anchor] : 0;
    if (nodes == 0)
      throw Error(file_, mark.line + 1, mark.column + 1,
                  "an alias inside the node its anchor names would repeat forever; write the value out");
    expanded_ += nodes;
    if (expanded_ > kMaxAliasExpandedNodes)
      throw Error(file_, mark.line + 1, mark.column + 1,
                  fmt::format("YAML aliases here expand to more than {} nodes (an alias bomb?); write the values "
                              "out or use fewer, smaller aliases",
                              kMaxAliasExpandedNodes));
    close_node(0, nodes);
  }

private:
  struct OpenCollection {
    YAML::anchor_t anchor;
    std::uint64_t nodes;
  };
  void close_collection() {
    const OpenCollection done = open_.back();
    open_.pop_back();
    close_node(done.anchor, done.nodes);
  }
  void close_node(YAML::anchor_t anchor, std::uint64_t nodes) {
    if (anchor != 0) {
      if (anchor >= anchor_nodes_.size()) anchor_nodes_.resize(anchor + 1, 0);
      anchor_nodes_[anchor] = nodes;
    }
    if (!open_.empty()) open_.back().nodes += nodes;
  }
  const std::string& file_;
  std::vector<OpenCollection> open_;
  std::vector<std::uint64_t> anchor_nodes_;  // by anchor id; 0 while the anchored node is open
  std::uint64_t expanded_ = 0;
};

}  // namespace

}  // namespace tessera::yaml

namespace tessera {

std::string read_yaml_text(const std::string& path, const std::string& what) {
  // A FIFO or a device is refused before a byte is read; the limit holds while reading.
  std::string content = read_bounded_file(path, what, kMaxYamlFileBytes);
  // A second pass over the events, only for files that may hold an alias at all.
  if (content.find('*') != std::string::npos) {
    try {
      std::istringstream events(content);
      YAML::Parser parser(events);
      yaml::AliasExpansionCounter counter(path);
      // The first document only, as YAML::Load reads: on some malformed input yaml-cpp's parser
      // reports empty documents without end (found by fuzz_model).
      parser.HandleNextDocument(counter);
    } catch (const YAML::ParserException& e) {
      throw Error(path, static_cast<int>(e.mark.line + 1), static_cast<int>(e.mark.column + 1),
                  "YAML syntax error: " + e.msg);
    }
  }
  return content;
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
  return yaml::nearest(name, candidates);
}

std::string echoed_token(const std::string& text) { return yaml::echoed_token(text); }

}  // namespace tessera

namespace tessera::yaml {

YAML::Node load_file(const std::string& path, const std::string& what, bool empty_allowed) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw Error(path + ": file not found");
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, expected a YAML file");
  const std::string content = read_yaml_text(path, "a " + what + " file");
  try {
    YAML::Node root = YAML::Load(content);
    if (!empty_allowed && (!root.IsDefined() || root.IsNull())) throw Error(path + ": file is empty");
    return root;
  } catch (const YAML::Exception& e) {
    throw Error(path, static_cast<int>(e.mark.line + 1), static_cast<int>(e.mark.column + 1),
                "YAML syntax error: " + e.msg);
  }
}

void require_map(const std::string& file, const YAML::Node& node, const std::string& what) {
  if (!node.IsMap()) fail(file, node, what + " must be a mapping (key: value)");
}

void check_keys(const std::string& file, const YAML::Node& map, std::initializer_list<const char*> allowed) {
  check_keys(file, map, std::vector<std::string>(allowed.begin(), allowed.end()));
}

void check_keys(const std::string& file, const YAML::Node& map, const std::vector<std::string>& allowed,
                const std::string& what) {
  for (const auto& entry : map) {
    // A key may be a list or a map (`[a]: 1`, `? {x: 1}`); as<std::string>() would throw a
    // YAML::BadConversion past our error handling (found by fuzz_model).
    if (!entry.first.IsScalar()) fail(file, entry.first, "a key must be a plain name, not a list or a mapping");
    const std::string key = entry.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string message = "unknown key " + echoed_token(key) + (what.empty() ? "" : " in " + what);
    if (auto near = nearest(key, allowed); !near.empty()) message += "; did you mean '" + near + "'?";
    std::string list;
    for (const auto& name : allowed) list += (list.empty() ? "" : ", ") + name;
    fail(file, entry.first, message + " (allowed: " + list + ")");
  }
}

static YAML::Node scalar_at(const std::string& file, const YAML::Node& map, const char* key) {
  YAML::Node value = map[key];
  if (value.IsDefined() && !value.IsScalar()) fail(file, value, std::string("'") + key + "' must be a single value");
  return value;
}

std::string echoed_token(const std::string& text) {
  std::string out = "'";
  const std::size_t shown = std::min(text.size(), kMaxEchoedBytes);
  for (std::size_t i = 0; i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  out += "'";
  if (shown < text.size()) out += fmt::format(" (first {} of {} bytes)", shown, text.size());
  return out;
}

std::string get_string(const std::string& file, const YAML::Node& map, const char* key) {
  YAML::Node value = scalar_at(file, map, key);
  if (!value.IsDefined()) fail(file, map, std::string("missing required key '") + key + "'");
  return value.Scalar();
}

// Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
static bool valid_utf8(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    std::size_t length = lead < 0x80           ? 1
                         : (lead >> 5) == 0x6  ? 2
                         : (lead >> 4) == 0xe  ? 3
                         : (lead >> 3) == 0x1e ? 4
                                               : 0;
    if (length == 0 || i + length > text.size()) return false;
    std::uint32_t code = length == 1 ? lead : lead & (0x7f >> length);
    for (std::size_t k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += length;
  }
  return true;
}

std::string get_name(const std::string& file, const YAML::Node& map, const char* key) {
  std::string name = get_string(file, map, key);
  const bool control = std::any_of(name.begin(), name.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f;
  });
  if (control || !valid_utf8(name))
    fail(file, map[key],
         std::string("'") + key +
             "' must be printable UTF-8 text without control characters (newlines, "
             "tabs, escapes), got " +
             echoed_token(name) + "; rename it");
  return name;
}

std::uint64_t get_uint(const std::string& file, const YAML::Node& map, const char* key, std::uint64_t max) {
  YAML::Node value = scalar_at(file, map, key);
  if (!value.IsDefined()) fail(file, map, std::string("missing required key '") + key + "'");
  const std::string& text = value.Scalar();
  std::uint64_t parsed = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  const bool digits = !text.empty() && end == text.data() + text.size();
  if (digits && (error == std::errc::result_out_of_range || parsed > max))
    fail(file, value,
         fmt::format("'{}' must be at most {}, got {}: a larger value does not fit", key, max, echoed_token(text)));
  if (!digits || error != std::errc())
    fail(file, value, std::string("'") + key + "' must be a non-negative integer, got " + echoed_token(text));
  return parsed;
}

std::uint64_t get_uint_or(const std::string& file, const YAML::Node& map, const char* key, std::uint64_t fallback,
                          std::uint64_t max) {
  return map[key].IsDefined() ? get_uint(file, map, key, max) : fallback;
}

std::uint32_t get_uint32(const std::string& file, const YAML::Node& map, const char* key) {
  return static_cast<std::uint32_t>(get_uint(file, map, key, UINT32_MAX));
}

std::uint32_t get_uint32_or(const std::string& file, const YAML::Node& map, const char* key, std::uint32_t fallback) {
  return static_cast<std::uint32_t>(get_uint_or(file, map, key, fallback, UINT32_MAX));
}

double get_number_or(const std::string& file, const YAML::Node& map, const char* key, double fallback) {
  YAML::Node value = scalar_at(file, map, key);
  if (!value.IsDefined()) return fallback;
  double parsed = 0;
  if (!parse_number(value.Scalar(), parsed))
    fail(file, value, std::string("'") + key + "' must be a number, got " + echoed_token(value.Scalar()));
  return parsed;
}

bool get_bool_or(const std::string& file, const YAML::Node& map, const char* key, bool fallback) {
  YAML::Node value = scalar_at(file, map, key);
  if (!value.IsDefined()) return fallback;
  bool parsed = false;
  if (!parse_bool(value.Scalar(), parsed))
    fail(file, value, std::string("'") + key + "' must be true or false, got " + echoed_token(value.Scalar()));
  return parsed;
}

bool parse_int(const std::string& text, std::int64_t& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool parse_number(const std::string& text, double& value) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && !text.empty() && std::isfinite(value);
}

bool parse_bool(const std::string& text, bool& value) {
  if (text == "true" || text == "True" || text == "yes" || text == "on") return value = true, true;
  if (text == "false" || text == "False" || text == "no" || text == "off") return value = false, true;
  return false;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& name, const std::vector<std::string>& candidates) {
  // The distance costs length times length: a suggestion for a name this long is no help anyway.
  if (name.size() > kMaxSuggestedNameBytes) return "";
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, name.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    std::size_t d = edit_distance(name, candidate);
    if (d < best_distance) best_distance = d, best = candidate;
  }
  return best;
}

namespace {

struct FlowWriter {
  std::string out;
  int origin = 0, line = 0, column = 0;

  void put(const std::string& text) {
    out += text;
    column += static_cast<int>(text.size());
  }
  // Moves to a mark when it is still ahead; otherwise a space keeps tokens apart.
  void move_to(const YAML::Mark& mark, int column_shift = 0) {
    const int target_line = mark.line - origin, target_column = mark.column + column_shift;
    if (mark.is_null() || target_line < line || (target_line == line && target_column <= column)) {
      if (!out.empty() && out.back() != '{' && out.back() != '[') put(" ");
      return;
    }
    if (target_line > line)
      out.append(static_cast<std::size_t>(target_line - line), '\n'), line = target_line, column = 0;
    put(std::string(static_cast<std::size_t>(target_column - column), ' '));
  }
  void scalar(const YAML::Node& node) {
    const std::string& text = node.Scalar();
    const bool plain = node.Tag() == "?" && !text.empty() &&
                       text.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-/") ==
                           std::string::npos;
    if (plain) return put(text);
    std::string quoted = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') quoted += '\\', quoted += c;
      else if (c == '\n') quoted += "\\n";
      else if (static_cast<unsigned char>(c) < 0x20) quoted += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      else quoted += c;
    }
    put(quoted + "\"");
  }
  // Block collections start at their first child: the bracket goes one column before it.
  static bool starts_at_child(const YAML::Node& node) {
    if (node.size() == 0) return false;
    const YAML::Mark child = node.IsMap() ? node.begin()->first.Mark() : node.begin()->Mark();
    return child.line == node.Mark().line && child.column == node.Mark().column;
  }
  void write(const YAML::Node& node) {
    if (!node.IsMap() && !node.IsSequence()) {
      move_to(node.Mark());
      if (node.IsNull()) return put("null");
      return scalar(node);
    }
    move_to(node.Mark(), starts_at_child(node) ? -1 : 0);
    put(node.IsMap() ? "{" : "[");
    bool first = true;
    for (const auto& entry : node) {
      if (!first) put(",");
      first = false;
      if (node.IsMap()) {
        write(entry.first);
        put(":");
        write(entry.second);
      } else {
        write(entry);
      }
    }
    put(node.IsMap() ? "}" : "]");
  }
};

}  // namespace

std::string flow_layout(const YAML::Node& node) {
  FlowWriter writer;
  writer.origin = node.Mark().is_null() ? 0 : node.Mark().line;
  writer.write(node);
  return writer.out;
}

}  // namespace tessera::yaml
