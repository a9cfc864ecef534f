// `tessera schedule`: run one exchange-scheduler plugin on one phase file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::cli {

struct ScheduleRequest {
  std::string phase;
  std::string target;
  std::string scheduler;
  std::vector<std::string> options;       ///< "key=value"
  std::vector<std::string> plugin_paths;  ///< besides the bundled plugins and TESSERA_PLUGIN_PATH
  std::string emit;                       ///< schedule file to write, or ""
  std::uint64_t budget_ms = 2000;
  std::string json_path;  ///< the result as JSON, or ""
};

/// Schedules, validates and prints the one-line summary. Returns the exit code.
int schedule_command(const ScheduleRequest& request);

}  // namespace tessera::cli
