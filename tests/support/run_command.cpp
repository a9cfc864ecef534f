// End-to-end tests' commands: the driver's run_process with both streams captured.
#include "run_command.hpp"

#include "tessera/process.hpp"

namespace tessera::testing {

CommandResult run_command(const std::vector<std::string>& arguments, const std::vector<std::string>& environment) {
  ProcessOptions options;
  options.environment = environment;
  options.stdout_file = options.stderr_file = "";  // both captured
  const ProcessResult ran = run_process(arguments, options);
  return {ran.exit_code, ran.signal, ran.out, ran.err};
}

std::string tessera_binary() { return std::string(TESSERA_BINARY_DIR) + "/tools/tessera"; }

}  // namespace tessera::testing
