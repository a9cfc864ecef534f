// Reproducer bundles: written by `tessera compile` when a plugin faults, run by `tessera replay`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
struct PipelineSpec;
struct PluginFault;
class PluginHost;
}  // namespace tessera

namespace tessera::cli {

/// Writes a bundle for `fault` into a new folder `<parent>/<plugin>-<N>/` and returns its path:
/// manifest.json (failing plugin, error, every pipeline plugin's name, kind, version, path and
/// sha256), pipeline.yaml (the resolved pipeline, its target pointing at the copy beside it),
/// target.yaml, and phase.txt (a scheduler fault: the phase it failed on) or model.yaml (any
/// other fault: the model being compiled). Throws on an I/O failure.
std::string write_reproducer(const std::string& parent, const PipelineSpec& spec, const PluginHost& host,
                             const PluginFault& fault, const std::string& model_path, std::uint64_t schedule_budget_ms);

/// Runs the bundle's failing plugin alone: a scheduler on the phase (scheduled, then validated
/// by the core), anything else by compiling the model with the pipeline. Prints one result
/// line and returns 0 when it now succeeds; the plugin's failure is thrown as Error (exit 1).
/// No library inside the bundle is loaded unless it is one of `trusted_plugins`.
int replay_command(const std::string& bundle, const std::vector<std::string>& trusted_plugins);

}  // namespace tessera::cli
