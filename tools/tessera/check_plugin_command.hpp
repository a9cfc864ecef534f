// `tessera check-plugin FILE`: a conformance battery for one plugin library, by its kind.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::cli {

struct CheckPluginRequest {
  std::string file;               ///< the plugin library (.so)
  std::string target;             ///< optional target YAML checked as well as the built-in ones
  std::uint64_t budget_ms = 500;  ///< time budget given to a scheduler per phase
  unsigned timeout_s = 120;       ///< a check still running after this is killed and fails
};

/// Loads `file` alone through PluginHost::load_file and runs the checks for its kind, each in
/// a child process, so a crash or a hang in plugin code fails that check, not the battery.
/// Prints `PASS name  [figures]` or `FAIL name: why` per check, then a summary line.
/// Returns 0 when every check passes, 1 otherwise.
int check_plugin_command(const CheckPluginRequest& request);

}  // namespace tessera::cli
