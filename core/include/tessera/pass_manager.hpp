// Runs a resolved pipeline's passes in order, timing, logging and verifying each.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tessera/pass.hpp"
#include "tessera/pipeline.hpp"

namespace tessera {

class PluginHost;

struct PassManagerOptions {
  std::vector<std::string> dump_after;  ///< pass names (kebab) or phase names (snake)
  std::string dump_directory = ".";     ///< files: <directory>/<phase>.dump
  std::uint64_t schedule_budget_ms = 2000;
  unsigned threads = 1;
};

class PassManager {
public:
  /// Creates the cost model, the scheduler and every pass of a resolved spec.
  PassManager(const PipelineSpec& spec, const PluginHost& host, PassManagerOptions options);
  ~PassManager();

  /// Runs every pass; after each, verifies the program. Logs one line per phase:
  /// `package build phase finished phase="lower_mid" elapsed_ms=3 success=true`.
  /// Returns the first failure, naming the pass.
  Status run(CompilationState& state);

  CostModel& cost_model();
  ExchangeScheduler& scheduler();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// "lower-mid" -> "lower_mid".
std::string phase_name(const std::string& plugin_name);

/// A readable text dump of the state (graph, buffers, supersteps, schedules).
std::string dump_state(const CompilationState& state);

}  // namespace tessera
