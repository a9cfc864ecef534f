// The pass-plugin interface and the compilation state passes read and change.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
inline constexpr const char* graph = "graph";                ///< the model, loaded
inline constexpr const char* canonical = "canonical-graph";  ///< shapes inferred, ops fused
inline constexpr const char* plan = "plan";                  ///< buffers, compute, copies
inline constexpr const char* storage = "storage";            ///< buffer offsets
inline constexpr const char* exchange = "exchange";          ///< transfers, schedules
inline constexpr const char* tile_images = "tile-images";    ///< package tiles and streams
}  // namespace facts

/// A figure a pass measured (MLIR's Pass::Statistic), kept for `--json` and reports.
struct Statistic {
  std::string pass;  ///< the plugin that recorded it
  std::string name;
  double value = 0;
};

/// The plan select-finalist chose for one operator.
struct PlanRemark {
  std::uint32_t op = 0;  ///< index in the rewritten graph
  std::string op_kind;   ///< "dense", "softmax", ...
  std::string plan;      ///< "operator" (tiled and costed), "block" or "elementwise"
  std::uint32_t column_groups = 0, depth_groups = 0, row_groups = 0;  ///< 0 when the plan has none
  std::uint64_t candidates = 0;                                       ///< plans the choice was made among
  std::uint64_t estimated_cycles = 0;  ///< the cost model's estimate of the chosen plan (0: not costed)
};

/// The schedule lower-exchanges chose for one superstep's exchange phase.
struct ScheduleRemark {
  std::uint32_t phase = 0;                 ///< superstep index
  std::string scheduler;                   ///< the plugin that made it
  std::uint64_t transfers = 0, words = 0;  ///< words sent (a multicast word once)
  std::uint64_t widest_multicast = 0;      ///< most destinations of one transfer
  std::uint64_t segments = 0;
  std::uint64_t horizon = 0, endpoint_lower_bound = 0, lower_bound = 0;
  std::uint64_t elapsed_ms = 0;  ///< the scheduler call, validation included
};

/// One pass's wall time, and the part of it spent in plugin calls.
struct PassTiming {
  std::string pass;
  double wall_ms = 0;        ///< the pass's run, verification excluded
  double verify_ms = 0;      ///< verify_program after it
  double cost_model_ms = 0;  ///< inside cost-model calls, summed over the pass's threads
  std::uint64_t cost_model_calls = 0;
  double scheduler_ms = 0;  ///< inside scheduler calls, summed over the pass's threads
  std::uint64_t scheduler_calls = 0;
};

/// What a compile measured and decided, as data: logs are rendered from it, `--json` writes it.
struct CompileRecord {
  std::vector<Statistic> statistics;
  std::vector<PlanRemark> plans;
  std::vector<ScheduleRemark> schedules;
  std::vector<PassTiming> timings;  ///< filled by the pass manager
};

struct CompilationState {
  Target target;
  Graph model;  ///< as loaded; never changed (the reference executes this)
  Graph graph;  ///< rewritten by passes
  Program program;
  Package package;             ///< tiles and streams filled by the emitting pass
  PackageEstimates estimates;  ///< figures passes record for reports
  std::set<std::string> facts;
  CompileRecord record;
};

/// What a pass may use besides the state. Owned by the pass manager.
struct PassContext {
  const Target& target;
  CostModel& cost_model;
  ExchangeScheduler& scheduler;
  spdlog::logger& logger;
  std::string span;  ///< log prefix: tessera.build{...}:phase{phase="..."}
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
  /// Where statistics and remarks go (the state's record); null keeps none. Record them from
  /// the pass's own thread: the record is not locked.
  CompileRecord* record = nullptr;
  std::string pass;  ///< the running pass's plugin name, for its statistics
  /// Told how far a long pass is (API 2.2); empty when nothing listens. Call through progress().
  std::function<void(std::uint64_t done, std::uint64_t total, std::string_view unit)> on_progress;

  /// Says the pass has done `done` of `total` units ("ops", "phases"), so `tessera compile` can
  /// show it on its progress line. Cheap and thread-safe when nothing listens; call it per unit.
  void progress(std::uint64_t done, std::uint64_t total, std::string_view unit) const;

  /// Records a figure the pass measured (not logged: a pass logs its own summary line).
  void statistic(std::string name, double value);
  /// Records the plan chosen for one operator.
  void remark(PlanRemark plan);
  /// Records the schedule of one phase and logs it as
  /// `optimized physical exchange schedule phase=K transfers=... horizon=... lower_bound=...`.
  void remark(ScheduleRemark schedule);

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
