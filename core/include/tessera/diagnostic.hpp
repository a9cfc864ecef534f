// Errors a user can cause, carrying the file and place, and the Status returned by plugins.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>

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

/// The result of a plugin call that can fail for a reason the user must hear.
struct [[nodiscard]] Status {
  bool ok = true;
  std::string message;
  static Status success() { return {}; }
  static Status failure(std::string why) { return {false, std::move(why)}; }
};

}  // namespace tessera
