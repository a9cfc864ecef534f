// Test support for the pass plugins: plugins loaded through the real PluginHost, a state, captured logs.
#pragma once
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/logger.h>

#include "tessera/plugin_host.hpp"
#include "tessera/pass.hpp"

namespace tessera::testing {

/// The shipped config at `relative` under configs/.
std::string config_path(const std::string& relative);

/// The default pipeline's passes, in order.
const std::vector<std::string>& default_passes();

/// One compilation: the model and target loaded, the cost model and exchange scheduler
/// created from TESSERA_PLUGIN_DIR by name, and passes run one by one as the pass manager
/// would (facts recorded on success), with their log lines kept for inspection.
class PassBench {
public:
  PassBench(const std::string& model_path, const std::string& target_path,
            const std::string& cost_model = "analytic", const std::string& scheduler = "greedy");

  /// Runs the pass plugin `name` with `options` (defaults filled in by the host).
  Status run(const std::string& name, const Options& options = {});
  /// Runs the default passes up to and including `last`, each with its entry in `options`
  /// if any; stops at the first failure.
  Status run_through(const std::string& last, const std::map<std::string, Options>& options = {});

  std::string log() const { return log_.str(); }
  /// Log lines containing `text`.
  std::vector<std::string> log_lines(const std::string& text) const;

  PluginHost host;
  CompilationState state;
  std::unique_ptr<CostModel> cost_model;
  unsigned threads = 1;           ///< PassContext::threads of the passes run
  bool duplicate_cost_model = true;  ///< false: PassContext::new_cost_model is left empty
  std::unique_ptr<ExchangeScheduler> scheduler;

private:
  const PluginInfo* cost_info_ = nullptr;
  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> logger_;
};

/// The integer value of `key=` in a key=value log line (throws if absent).
std::uint64_t log_field(const std::string& line, const std::string& key);

using TensorValues = std::map<std::string, std::vector<double>>;

/// The model's outputs computed in float64 from its initial values: the reference.
TensorValues reference_outputs(const Graph& model);

/// The outputs of executing a planned program word by word: host streams fill buffers with
/// the model's initial values, codelets run in order, then each superstep's copies move
/// (all reads before any write, as in an exchange). Throws std::runtime_error on a read of
/// a word never written.
TensorValues execute_program(const Program& program, const Graph& model);

/// The outputs of executing a package at the byte level: one memory per tile, codelets on
/// byte addresses, and exchange words moved only as the tiles' send and receive lists say
/// (a receive must meet a send of its sender `latency` cycles earlier). Throws
/// std::runtime_error describing the first inconsistency.
TensorValues execute_package(const Package& package, const Graph& model, const Target& target);

/// The largest |a - b| / (1 + |b|) over all outputs; throws if the sets of outputs differ.
double max_relative_error(const TensorValues& actual, const TensorValues& expected);

}  // namespace tessera::testing
