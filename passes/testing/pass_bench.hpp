// Test support for the pass plugins: plugins loaded through the real PluginHost, a state, captured
// logs, and the state's package run on the simulator against the float64 reference.
#pragma once
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "tessera/plugin_host.hpp"
#include "tessera/pass.hpp"
#include "tessera/runtime/reference.hpp"

namespace tessera::testing {

/// The shipped config at `relative` under configs/.
std::string config_path(const std::string& relative);

/// The default pipeline's passes, in order.
const std::vector<std::string>& default_passes();

/// One compilation: the model and target loaded, the cost model and exchange scheduler
/// created from TESSERA_PLUGIN_DIR by name, and passes run one by one as the pass manager
/// would (facts recorded on success, the program verified), with their log lines kept.
class PassBench {
public:
  PassBench(const std::string& model_path, const std::string& target_path, const std::string& cost_model = "analytic",
            const std::string& scheduler = "greedy");

  /// Runs the pass plugin `name` with `options` (defaults filled in by the host).
  Status run(const std::string& name, const Options& options = {});
  /// Runs the default passes up to and including `last`, each with its entry in `options`
  /// if any; stops at the first failure.
  Status run_through(const std::string& last, const std::map<std::string, Options>& options = {});

  /// Runs the default passes the state has not had yet, makes the package as a compile does,
  /// runs it on the simulator and compares its outputs with the runtime's float64 reference
  /// (`passed`: within the run's tolerances). The state and the log are left as they were.
  runtime::NumericalReport simulate();

  std::string log() const { return log_.str(); }
  /// Log lines containing `text`.
  std::vector<std::string> log_lines(const std::string& text) const;

  PluginHost host;
  CompilationState state;
  std::unique_ptr<CostModel> cost_model;
  unsigned threads = 1;              ///< PassContext::threads of the passes run
  bool duplicate_cost_model = true;  ///< false: PassContext::new_cost_model is left empty
  std::unique_ptr<ExchangeScheduler> scheduler;

private:
  const PluginInfo* cost_info_ = nullptr;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> logger_;
};

/// The integer value of `key=` in a key=value log line (throws if absent).
std::uint64_t log_field(const std::string& line, const std::string& key);

}  // namespace tessera::testing
