// `tessera tune`: successive halving over a space of plugin options, then an A/B of the best.
#pragma once
#include <memory>

namespace CLI {
class App;
}

namespace tessera::cli {

class TuneCommand;

/// Adds the `tune` subcommand to `app`; keep the returned object alive until run_tune_command.
std::shared_ptr<TuneCommand> add_tune_command(CLI::App& app);

bool tune_command_chosen(const TuneCommand& command);

/// Runs it; returns the exit code. User errors are thrown as tessera::Error.
int run_tune_command(TuneCommand& command);

}  // namespace tessera::cli
