// Errors a user can cause, carrying the file and place, and the Status returned by plugins.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tessera {

struct ExchangePhase;

/// A user-facing error: "FILE:LINE:COLUMN: message". Line and column are 1-based; 0 = unknown.
class Error : public std::runtime_error {
public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const std::string& file, int line, int column, const std::string& message);
};

/// An error raised by (or caught from) plugin code, named by the plugin.
class PluginError : public Error {
public:
  PluginError(const std::string& plugin, const std::string& message)
      : Error("plugin '" + plugin + "': " + message), plugin_name(plugin) {}
  std::string plugin_name;
  /// The phase a scheduler failed on (set by ExchangeScheduler::schedule), so the driver
  /// can write a reproducer; null for other plugin failures.
  std::shared_ptr<const ExchangePhase> failing_phase;
};

/// An error message as a tool prints it after "error: ": control characters escaped, except
/// a newline that starts an indented detail line (so no text can forge a line of its own),
/// and cut to about 16 KiB (a message may echo a huge token from a hostile file).
std::string printable_error(std::string_view message);

/// The result of a plugin call that can fail for a reason the user must hear.
struct [[nodiscard]] Status {
  bool ok = true;
  std::string message;
  static Status success() { return {}; }
  static Status failure(std::string why) { return {false, std::move(why)}; }
};

}  // namespace tessera
