// Test support for the pass plugins: passes run through the driver's Session (as a compile and
// `tessera opt` run them: facts checked, the program verified), their log lines kept, and the
// state's package run on the simulator against the float64 reference.
#pragma once
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/pass.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/session.hpp"

namespace tessera::testing {

/// The shipped config at `relative` under configs/.
std::string config_path(const std::string& relative);

/// The default pipeline's passes, in order.
const std::vector<std::string>& default_passes();

/// One compilation: the model and target loaded, and a Session whose pipeline is the default
/// passes with the cost model and exchange scheduler named, plugins from TESSERA_PLUGIN_DIR.
class PassBench {
public:
  PassBench(const std::string& model_path, const std::string& target_path, const std::string& cost_model = "analytic",
            const std::string& scheduler = "greedy");
  ~PassBench();

  /// Runs the pass plugin `name` with `options` (defaults filled in by the host) through
  /// Session::run_passes. Throws Error for an unknown pass or option, or a missing fact.
  Status run(const std::string& name, const Options& options = {});
  /// Runs the default passes up to and including `last`, each with its entry in `options`
  /// if any; stops at the first failure.
  Status run_through(const std::string& last, const std::map<std::string, Options>& options = {});

  /// Runs the default passes the state has not had yet, makes the package as a compile does,
  /// runs it on the simulator and compares its outputs with the runtime's float64 reference
  /// (`passed`: within the run's tolerances). The state and the log are left as they were.
  runtime::NumericalReport simulate();

  /// What the runs logged on tessera.build: the passes' lines and the pass manager's.
  std::string log() const { return log_.str(); }
  /// Log lines containing `text`.
  std::vector<std::string> log_lines(const std::string& text) const;

  /// The session's cost model and scheduler, configured as the passes' are.
  CostModel& cost_model();
  ExchangeScheduler& scheduler();

  CompilationState state;
  // Read when the session is made, at the first run or cost_model()/scheduler() call:
  unsigned threads = 1;             ///< PassContext::threads of the passes run
  bool isolate_cost_model = false;  ///< run it in a tessera-plugin-host child: no PassContext::new_cost_model

private:
  Session& session();

  std::string target_path_, cost_model_name_, scheduler_name_;
  std::unique_ptr<Session> session_;
  std::ostringstream log_;
};

/// The integer value of `key=` in a key=value log line (throws if absent).
std::uint64_t log_field(const std::string& line, const std::string& key);

}  // namespace tessera::testing
