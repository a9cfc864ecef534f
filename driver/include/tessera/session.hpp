// A compile session, the one way the commands, calibrate and the tests drive the compiler:
// it finds the plugins, loads and resolves a pipeline (an overlay merged onto it), creates and
// configures every plugin, runs the passes on a state (verifying, timing and dumping each, and
// capturing a plugin's fault as a reproducer bundle) and fills in the package's header.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/pass.hpp"
#include "tessera/pass_manager.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"

namespace tessera {

/// The folder of plugins shipped beside this executable (build/plugins, or
/// <prefix>/lib/tessera/plugins when installed), or "" if there is none.
std::string bundled_plugin_directory();

/// Loads the plugins a command names outside a pipeline: the bundled folder, the folders of
/// TESSERA_PLUGIN_PATH, then `extra_paths` (--plugin-path), in that order.
void find_plugins(PluginHost& host, const std::vector<std::string>& extra_paths);

struct SessionOptions {
  std::string pipeline;         ///< the pipeline file
  std::string overlay;          ///< when set, merged onto `pipeline` first (an A/B arm)
  std::string target;           ///< when set, overrides the pipeline's target
  PluginQuarantine quarantine;  ///< libraries that must not be loaded (a replayed bundle's)
  PassManagerOptions passes;    ///< dumps, the schedule budget, threads
  /// False for `tessera replay`: a scheduler's fallback would hide the failure it replays.
  bool scheduler_fallback = true;
};

/// Where a plugin fault's reproducer bundle goes; an empty `folder` writes none.
struct FaultCapture {
  std::string folder;      ///< the bundle is <folder>/<plugin>-<N>/
  std::string model_path;  ///< copied into the bundle when the fault was not a scheduler's
};

/// Fills the package's header (versions, target, graph, superstep labels, estimates) from a
/// state whose passes emitted its tile images: what a compile writes.
Package& fill_package_header(CompilationState& state);

class Session {
public:
  /// Loads and resolves the pipeline. Throws Error with the file, line and column; with an
  /// overlay, the error also names the overlay and the base.
  explicit Session(const SessionOptions& options);
  /// A pipeline built in code (calibrate): `spec` is already resolved against `host`.
  Session(PipelineSpec spec, std::unique_ptr<PluginHost> host, const PassManagerOptions& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const PipelineSpec& spec() const;
  const PluginHost& host() const;
  /// The resolved pipeline as YAML (every path absolute).
  std::string resolved_yaml() const;

  /// Creates and configures every plugin of the pipeline now (otherwise the first run does):
  /// a plugin's refusal of its options or tables surfaces before any work is done.
  void create_plugins();
  CostModel& cost_model();
  ExchangeScheduler& scheduler();

  /// A state ready for the first pass: the pipeline's target and `model`.
  CompilationState initial_state(Graph model) const;

  /// Runs every pass, verifying the program after each. On failure the message names the pass;
  /// on a plugin fault with `capture.folder` set, a reproducer bundle is written first and the
  /// message says how to replay it (a bundle that cannot be written is only warned about). A
  /// pass's bundle holds its input state, made again from the model by the passes before it.
  Status run(CompilationState& state, const FaultCapture& capture = {});
  /// The plugin fault that stopped the last run, or null.
  const PluginFault* fault() const;

  /// The use of pass `name` for run_passes: the pipeline's own (its options) when it has one,
  /// else the pass with its defaults; then each "KEY=VALUE" of `overrides` set, typed and checked
  /// as the pipeline loader checks options. Throws Error naming an unknown pass or option.
  PluginUse pass_use(const std::string& name, const std::vector<std::string>& overrides = {}) const;
  /// Runs `passes` alone on a saved state (`tessera opt`, a pass fault's replay), with this
  /// pipeline's cost model and scheduler, verifying as run does. Throws Error first when the
  /// state lacks a fact a pass requires, naming the pass that provides it.
  Status run_passes(CompilationState& state, const std::vector<PluginUse>& passes, const FaultCapture& capture = {});

  /// Fills the package's header (versions, target, graph, labels, estimates) from a state
  /// whose passes emitted its tile images. Throws Error when no pass provides 'tile-images'.
  Package& finish(CompilationState& state) const;

private:
  void capture_fault(Status& status, const PassManager& manager, const FaultCapture& capture,
                     const CompilationState* failed = nullptr) const;
  std::optional<CompilationState> pass_input(const CompilationState& failed, std::size_t index) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
