// The pass-plugin interface and the compilation state passes read and change.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "tessera/cost_model.hpp"
#include "tessera/graph.hpp"
#include "tessera/package.hpp"
#include "tessera/plugin.hpp"
#include "tessera/program.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace tessera {

/// Facts passes require and provide (QBE style): the pipeline loader checks the order.
namespace facts {
inline constexpr const char* graph = "graph";                  ///< the model, loaded
inline constexpr const char* canonical = "canonical-graph";    ///< shapes inferred, ops fused
inline constexpr const char* plan = "plan";                    ///< buffers, compute, copies
inline constexpr const char* storage = "storage";              ///< buffer offsets
inline constexpr const char* exchange = "exchange";            ///< transfers, schedules
inline constexpr const char* tile_images = "tile-images";      ///< package tiles and streams
}  // namespace facts

struct CompilationState {
  Target target;
  Graph model;    ///< as loaded; never changed (the reference executes this)
  Graph graph;    ///< rewritten by passes
  Program program;
  Package package;                 ///< tiles and streams filled by the emitting pass
  PackageEstimates estimates;      ///< figures passes record for reports
  std::set<std::string> facts;
};

/// What a pass may use besides the state. Owned by the pass manager.
struct PassContext {
  const Target& target;
  CostModel& cost_model;
  ExchangeScheduler& scheduler;
  spdlog::logger& logger;
  std::string span;             ///< log prefix: tessera.build{...}:phase{phase="..."}
  std::uint64_t schedule_budget_ms = 2000;
  unsigned threads = 1;
  /// Set by Pass::run when the pass failed through a plugin fault (an exception from the
  /// pass or from the scheduler it called, or an invalid schedule); the pass manager reads it.
  std::shared_ptr<const PluginError> fault;
  /// Makes another object of the pipeline's cost model (same plugin, same options), so that
  /// a pass using threads can give each its own: plugins need not be thread-safe. Empty when
  /// the model cannot be duplicated (an isolated one): then call `cost_model` (and `scheduler`,
  /// which may be isolated too) from the pass's own thread only, since an isolated plugin's
  /// child process is tied to the thread that started it.
  std::function<std::unique_ptr<CostModel>()> new_cost_model;

  /// Logs "span: message" at info level; messages are key=value fields.
  template <typename... Args>
  void info(fmt::format_string<Args...> format, Args&&... args) const {
    logger.info("{}: {}", span, fmt::format(format, std::forward<Args>(args)...));
  }
};

class Pass : public PluginObject {
public:
  /// Runs the pass; an exception escaping plugin code comes back as a failed Status
  /// naming the plugin.
  Status run(CompilationState& state, PassContext& context);

protected:
  virtual Status run_impl(CompilationState& state, PassContext& context) = 0;
};

}  // namespace tessera
