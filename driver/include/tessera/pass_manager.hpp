// Runs a resolved pipeline's passes in order, timing, logging and verifying each.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/pass.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/state_file.hpp"

namespace tessera {

class PluginHost;

struct PassManagerOptions {
  /// Pass names (kebab), phase names (snake) or "all"; a name no pass has is an Error.
  std::vector<std::string> dump_after;
  /// Files: <directory>/<phase>.tstate (the state, loadable) and <phase>.dump (text, filtered).
  std::string dump_directory = ".";
  DumpFilter dump_filter;      ///< what the text dumps and print_changed show
  bool print_changed = false;  ///< print the text dump after each pass that changed the state
  std::uint64_t schedule_budget_ms = 2000;
  unsigned threads = 1;
  /// Called before each pass with its position, the pass count and its plugin name, and after
  /// the last one with index == count: `tessera compile` draws its progress line with it.
  std::function<void(std::size_t index, std::size_t count, const std::string& pass)> on_pass;
  /// Given to each pass as PassContext::on_progress: how far the running pass is.
  std::function<void(std::uint64_t done, std::uint64_t total, std::string_view unit)> on_pass_progress;
};

/// A plugin fault that stopped PassManager::run: which plugin, and what it was given.
struct PluginFault {
  std::string plugin;  ///< the faulty plugin: the scheduler when a schedule failed
  std::string pass;    ///< the pass that was running
  std::string message;
  std::shared_ptr<const ExchangePhase> phase;  ///< the scheduler's input when it failed, else null
  std::size_t pass_index = 0;                  ///< the pass's position in the spec's passes
};

class PassManager {
public:
  /// Creates the cost model, the scheduler and every pass of a resolved spec. `host` must
  /// outlive the manager (passes may ask it for more cost-model objects). Throws Error on a
  /// dump_after name that no pass of the spec has.
  PassManager(const PipelineSpec& spec, const PluginHost& host, PassManagerOptions options);
  ~PassManager();

  /// Runs every pass; after each, verifies the program. Logs one line per phase:
  /// `package build phase finished phase="lower_mid" elapsed_ms=3 success=true`.
  /// Returns the first failure, naming the pass.
  Status run(CompilationState& state);

  /// The plugin fault that stopped the last run() (an exception, an invalid schedule or an
  /// invalid program), or null when it succeeded or failed for a reason the user caused.
  const PluginFault* fault() const;

  CostModel& cost_model();
  ExchangeScheduler& scheduler();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The table `tessera compile --time-report` prints: wall per pass, cost-model and scheduler
/// time split out, and a total line.
std::string time_report(const std::vector<PassTiming>& timings);

/// "lower-mid" -> "lower_mid".
std::string phase_name(const std::string& plugin_name);

}  // namespace tessera
