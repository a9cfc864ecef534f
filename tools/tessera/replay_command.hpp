// `tessera replay`: runs a reproducer bundle (written by a Session when a plugin faults).
#pragma once
#include <string>
#include <vector>

namespace tessera::cli {

/// Runs the bundle's failing plugin alone: a scheduler on the phase (scheduled, then validated
/// by the core), anything else by compiling the model with the pipeline. Prints one result
/// line and returns 0 when it now succeeds; the plugin's failure is thrown as Error (exit 1).
/// No library inside the bundle is loaded unless it is one of `trusted_plugins`.
int replay_command(const std::string& bundle, const std::vector<std::string>& trusted_plugins);

}  // namespace tessera::cli
