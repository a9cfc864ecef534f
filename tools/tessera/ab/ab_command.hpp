// `tessera ab` and `tessera ab merge`: the command-line side of the A/B driver.
#pragma once
#include <memory>

namespace CLI {
class App;
}

namespace tessera::cli {

class AbCommand;

/// Adds the `ab` subcommand (and its `merge` subcommand) to `app`. The returned object holds
/// the parsed options; keep it alive until run_ab_command.
std::shared_ptr<AbCommand> add_ab_command(CLI::App& app);

/// True when the command line chose `tessera ab` or `tessera ab merge`.
bool ab_command_chosen(const AbCommand& command);

/// Runs the chosen command; returns the exit code. User errors are thrown as tessera::Error.
int run_ab_command(AbCommand& command);

}  // namespace tessera::cli
