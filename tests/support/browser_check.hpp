// Opens an HTML file in headless Chromium and queries the DOM it leaves, for report page tests.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace tessera::testing {

/// What Chromium made of a page once it had loaded and run its scripts.
struct RenderedPage {
  bool finished = false;  ///< Chromium exited by itself (not killed at the timeout)
  int exit_code = -1;
  std::string dom;                           ///< the serialized DOM after the load event (--dump-dom)
  std::vector<std::string> console;          ///< every console message, as Chromium logs it
  std::vector<std::string> uncaught_errors;  ///< the console messages that are uncaught exceptions
  std::string log;                           ///< Chromium's stderr, to print when a check fails
  double seconds = 0;
};

/// The Chromium binary: $TESSERA_CHROMIUM, else /usr/bin/chromium; "" when neither exists.
/// Debian's `chromium` package (scripts/bootstrap.sh installs it) provides /usr/bin/chromium.
std::string chromium_binary();

/// Loads `html_file` in headless Chromium with a new empty profile, every network name
/// unresolvable (a standalone page needs none), and returns its DOM and console messages.
/// Chromium is killed, with every process it started, after `timeout`. A `window_width` lays
/// the page out for a window that wide (Chromium's default otherwise).
RenderedPage render_page(const std::string& html_file, std::chrono::milliseconds timeout = std::chrono::seconds(30),
                         int window_width = 0);

/// Writes a PNG of the page (to look at it; not used by assertions). Returns true on success.
bool screenshot_page(const std::string& html_file, const std::string& png_file, int width = 1200, int height = 2400,
                     std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Small queries over serialized HTML, enough for the DOM Chromium dumps (which always
// closes its elements and quotes attributes with ").

/// The outer HTML of the element whose id is `id`, or "" when there is none.
std::string element_by_id(const std::string& html, const std::string& id);
/// The outer HTML of every `tag` element carrying `css_class` among its classes.
std::vector<std::string> elements_by_class(const std::string& html, const std::string& tag,
                                           const std::string& css_class);
/// How many `tag` start tags `html` holds; with `css_class`, only those carrying that class.
std::size_t count_elements(const std::string& html, const std::string& tag, const std::string& css_class = "");
/// The value of attribute `name` on the first start tag of `element`, or "" when absent.
std::string attribute(const std::string& element, const std::string& name);
/// Rows of a table's <tbody> (all <tr> when it has none).
std::size_t table_body_rows(const std::string& table);

}  // namespace tessera::testing
