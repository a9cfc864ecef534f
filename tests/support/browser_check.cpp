// Runs headless Chromium on a page (with a timeout that kills its whole process group) and
// queries the DOM it dumps.
#include "browser_check.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "temp_dir.hpp"
#include "tessera/process.hpp"

namespace fs = std::filesystem;

namespace tessera::testing {

namespace {

// Chromium starts helper processes (zygote, GPU, renderer): it gets a process group of its own,
// killed at the timeout and when the browser exits (helpers would keep the profile busy).
ProcessResult run_browser(const std::vector<std::string>& arguments, std::chrono::milliseconds timeout) {
  ProcessOptions options;
  options.stdout_file = options.stderr_file = "";  // both captured
  options.timeout_ms = timeout.count();
  options.own_process_group = true;
  return run_process(arguments, options);
}

std::vector<std::string> headless_arguments(const std::string& profile_directory) {
  return {chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-default-apps",
          "--disable-extensions", "--mute-audio", "--hide-scrollbars",
          // No name resolves: a page that tries to reach the network fails visibly here.
          "--host-resolver-rules=MAP * ~NOTFOUND", "--user-data-dir=" + profile_directory, "--enable-logging=stderr",
          "--v=0"};
}

std::string file_url(const std::string& html_file) {
  return "file://" + fs::absolute(html_file).lexically_normal().string();
}

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':'; }

// The position just past the end of the element whose start tag begins at `start`.
std::size_t element_end(const std::string& html, std::size_t start) {
  std::size_t name_end = start + 1;
  while (name_end < html.size() && is_name_char(html[name_end])) ++name_end;
  const std::string name = html.substr(start + 1, name_end - start - 1);
  const std::size_t tag_close = html.find('>', start);
  if (tag_close == std::string::npos) return html.size();
  if (html[tag_close - 1] == '/') return tag_close + 1;  // <rect ... />
  int depth = 1;
  std::size_t at = tag_close + 1;
  while (depth > 0) {
    const std::size_t next = html.find('<', at);
    if (next == std::string::npos) return html.size();
    const bool closing = html.compare(next + 1, 1, "/") == 0;
    const std::size_t name_at = next + (closing ? 2 : 1);
    std::size_t e = name_at;
    while (e < html.size() && is_name_char(html[e])) ++e;
    const std::size_t close = html.find('>', next);
    if (close == std::string::npos) return html.size();
    if (html.compare(name_at, e - name_at, name) == 0 && e - name_at == name.size()) {
      if (closing) --depth;
      else if (html[close - 1] != '/') ++depth;
    }
    at = close + 1;
  }
  return at;
}

bool has_class(const std::string& start_tag, const std::string& css_class) {
  std::istringstream classes(attribute(start_tag, "class"));
  std::string one;
  while (classes >> one)
    if (one == css_class) return true;
  return false;
}

// Every start tag of `tag` in `html`: (position, the start tag's text).
template <typename Visit>
void for_each_start_tag(const std::string& html, const std::string& tag, Visit visit) {
  const std::string open = "<" + tag;
  for (std::size_t at = html.find(open); at != std::string::npos; at = html.find(open, at + 1)) {
    const std::size_t after = at + open.size();
    if (after < html.size() && is_name_char(html[after])) continue;  // <rectangle is not <rect
    const std::size_t close = html.find('>', at);
    if (close == std::string::npos) return;
    visit(at, html.substr(at, close - at + 1));
  }
}

}  // namespace

std::string chromium_binary() {
  if (const char* configured = std::getenv("TESSERA_CHROMIUM"); configured && *configured) return configured;
  std::error_code ec;
  return fs::exists("/usr/bin/chromium", ec) ? "/usr/bin/chromium" : "";
}

RenderedPage render_page(const std::string& html_file, std::chrono::milliseconds timeout, int window_width) {
  RenderedPage page;
  if (chromium_binary().empty()) {
    page.log = "no Chromium: install Debian's chromium package (scripts/bootstrap.sh) or set TESSERA_CHROMIUM";
    return page;
  }
  TempDir dir;
  std::vector<std::string> arguments = headless_arguments((dir.path() / "profile").string());
  if (window_width > 0) arguments.push_back("--window-size=" + std::to_string(window_width) + ",1000");
  arguments.push_back("--dump-dom");
  arguments.push_back(file_url(html_file));
  const ProcessResult ran = run_browser(arguments, timeout);
  page.seconds = ran.wall_ms / 1e3;
  page.finished = !ran.timed_out;
  page.exit_code = ran.exit_code;
  page.dom = ran.out;
  page.log = ran.err;
  // Console lines look like: [pid:tid:date:INFO:CONSOLE:12] "message", source: file:///... (12)
  std::istringstream lines(page.log);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t marker = line.find(":CONSOLE");
    if (marker == std::string::npos) continue;
    const std::size_t message = line.find("] ", marker);
    const std::string text = message == std::string::npos ? line : line.substr(message + 2);
    page.console.push_back(text);
    if (text.find("Uncaught") != std::string::npos) page.uncaught_errors.push_back(text);
  }
  return page;
}

bool screenshot_page(const std::string& html_file, const std::string& png_file, int width, int height,
                     std::chrono::milliseconds timeout) {
  if (chromium_binary().empty()) return false;
  TempDir dir;
  std::vector<std::string> arguments = headless_arguments((dir.path() / "profile").string());
  arguments.push_back("--window-size=" + std::to_string(width) + "," + std::to_string(height));
  arguments.push_back("--screenshot=" + fs::absolute(png_file).string());
  arguments.push_back(file_url(html_file));
  const ProcessResult ran = run_browser(arguments, timeout);
  std::error_code ec;
  return !ran.timed_out && ran.exit_code == 0 && fs::file_size(png_file, ec) > 0;
}

std::string element_by_id(const std::string& html, const std::string& id) {
  const std::string needle = "id=\"" + id + "\"";
  for (std::size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1)) {
    if (at == 0 || !std::isspace(static_cast<unsigned char>(html[at - 1]))) continue;  // not data-id="..."
    const std::size_t start = html.rfind('<', at);
    if (start == std::string::npos || html.find('>', start) < at) continue;  // not inside a start tag
    return html.substr(start, element_end(html, start) - start);
  }
  return "";
}

std::vector<std::string> elements_by_class(const std::string& html, const std::string& tag,
                                           const std::string& css_class) {
  std::vector<std::string> found;
  for_each_start_tag(html, tag, [&](std::size_t at, const std::string& start_tag) {
    if (has_class(start_tag, css_class)) found.push_back(html.substr(at, element_end(html, at) - at));
  });
  return found;
}

std::size_t count_elements(const std::string& html, const std::string& tag, const std::string& css_class) {
  std::size_t count = 0;
  for_each_start_tag(html, tag, [&](std::size_t, const std::string& start_tag) {
    if (css_class.empty() || has_class(start_tag, css_class)) ++count;
  });
  return count;
}

std::string attribute(const std::string& element, const std::string& name) {
  const std::size_t tag_end = element.find('>');
  const std::string start_tag = element.substr(0, tag_end);
  const std::string needle = name + "=\"";
  for (std::size_t at = start_tag.find(needle); at != std::string::npos; at = start_tag.find(needle, at + 1)) {
    if (at == 0 || !std::isspace(static_cast<unsigned char>(start_tag[at - 1]))) continue;
    const std::size_t value = at + needle.size();
    return start_tag.substr(value, start_tag.find('"', value) - value);
  }
  return "";
}

std::size_t table_body_rows(const std::string& table) {
  const std::size_t body = table.find("<tbody");
  return count_elements(body == std::string::npos ? table : table.substr(body, element_end(table, body) - body), "tr");
}

}  // namespace tessera::testing
