// Runs a command (no shell), capturing its exit status, stdout and stderr, for end-to-end tests.
#pragma once
#include <string>
#include <vector>

namespace tessera::testing {

struct CommandResult {
  int exit_code = -1;  ///< exit status, or -1 when killed by a signal
  int signal = 0;      ///< the signal that killed it, or 0
  std::string out;
  std::string err;
};

CommandResult run_command(const std::vector<std::string>& arguments, const std::vector<std::string>& environment = {});

/// The built `tessera` binary.
std::string tessera_binary();

}  // namespace tessera::testing
