// Reproducer bundles: written by a Session when a plugin faults, read back by `tessera replay`.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/plugin_host.hpp"

namespace tessera {

struct PipelineSpec;
struct PluginFault;
struct CompilationState;

/// What `replay` runs: the scheduler alone on phase.txt, the failing pass alone on state.tstate
/// (the state it was given), or the pipeline on model.yaml (bundles of older builds).
inline constexpr const char* kReplaySchedule = "schedule";
inline constexpr const char* kReplayPass = "pass";
inline constexpr const char* kReplayCompile = "compile";

/// Writes a bundle for `fault` into a new folder `<parent>/<plugin>-<N>/` and returns its path:
/// manifest.json (failing plugin, error, every pipeline plugin's name, kind, version, path and
/// sha256), pipeline.yaml (the resolved pipeline, its target pointing at the copy beside it),
/// target.yaml, and phase.txt (a scheduler fault: the phase it failed on), else state.tstate
/// (`pass_input`, the failing pass's input, when given) or model.yaml. Throws on an I/O failure.
std::string write_reproducer(const std::string& parent, const PipelineSpec& spec, const PluginHost& host,
                             const PluginFault& fault, const std::string& model_path, std::uint64_t schedule_budget_ms,
                             const CompilationState* pass_input = nullptr);

/// A bundle's manifest.json, every field type-checked.
struct ReproducerManifest {
  std::string replay;  ///< kReplaySchedule, kReplayPass or kReplayCompile
  std::string plugin;  ///< the plugin that faulted
  std::string pass;    ///< the pass that was running (kReplayPass replays it)
  std::uint64_t schedule_budget_ms = 0;
  struct Plugin {
    std::string name, sha256;  ///< sha256 empty when the plugin was not loaded
  };
  std::vector<Plugin> plugins;
};

/// Reads `<bundle>/manifest.json`; a missing, damaged or newer-format manifest is an Error
/// naming the file and the field.
ReproducerManifest read_reproducer_manifest(const std::string& bundle);

/// Logs a warning for each plugin whose library changed since the bundle was written.
void warn_about_changed_plugins(const ReproducerManifest& manifest, const PluginHost& host);

/// A bundle may come from another user or machine: no library inside it is loaded unless it is
/// one of `trusted_plugins` (the files the user named on the command line).
PluginQuarantine bundle_quarantine(const std::string& bundle, const std::vector<std::string>& trusted_plugins);

}  // namespace tessera
