// The select-finalist planner: turns the canonical graph into a Program, op by op.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "fragment.hpp"
#include "tessera/pass.hpp"

namespace tessera::select_finalist {

/// One op's pinned split from the `plans` option (0: not pinned, the global pin or the planner decides).
struct OpPin {
  std::uint32_t column_groups = 0, depth_groups = 0, serial_splits = 0, reduction_blocks = 0, row_groups = 0;
  std::uint32_t serial_row_splits = 0;
  std::string place;  ///< pipeline file:line:column of the op's name
};

struct PlannerOptions {
  std::uint32_t finalists = 2;           ///< best costed candidates per op, re-costed and logged
  std::uint32_t max_candidates = 64;     ///< candidates kept after enumeration and screening
  std::uint32_t costed_candidates = 4;   ///< fitting candidates built and costed per op
  std::uint32_t mapping_candidates = 1;  ///< tile mappings screened per finalist (1: c * depth + g only)
  bool schedule_finalists = false;       ///< re-cost finalists with the scheduler's horizons
  /// A candidate whose temporaries on any tile exceed this share of tile memory is rejected.
  double available_memory_proportion = 0.6;
  std::uint32_t column_groups = 0;      ///< pins every dense op's column groups (0: free)
  std::uint32_t depth_groups = 0;       ///< pins every dense op's depth groups (0: free)
  std::uint32_t serial_splits = 0;      ///< pins every dense op's serial splits (0: free)
  std::uint32_t reduction_blocks = 0;   ///< pins every dense op's reduction blocks (0: free, 1: one stage)
  std::uint32_t row_groups = 0;         ///< pins every dense op's row groups (0: free)
  std::uint32_t serial_row_splits = 0;  ///< pins every dense op's serial row chunks (0: free)
  OrientationChoice orientation = OrientationChoice::automatic;  ///< matmul orientation: pinned or per call
  std::uint32_t max_row_groups = 0;  ///< candidates with more row groups are dropped (0: none); set when re-planning
  /// Per op index, the most row groups its candidates may have; set when re-planning the ops
  /// whose buffers are live where some tile's memory overflowed.
  std::map<std::uint32_t, std::uint32_t> row_group_caps;
  /// Per-op pins by a tensor name the dense op produces in the model as written.
  std::map<std::string, OpPin> plans;
};

/// Plans every op of `graph` (canonical) into `program` (which must be empty) and records the cost
/// model's estimate of the whole program in `estimates`. A graph the planner cannot map
/// yet returns a failed Status naming the op's place. `model` (as written) names the
/// tensors lower-mid fused away, which `plans` may use.
Status plan_program(const Graph& graph, const Graph& model, PassContext& context, const PlannerOptions& options,
                    Program& program, PackageEstimates& estimates);

}  // namespace tessera::select_finalist
