// select-finalist: the planner plugin — enumerates, costs and picks an operator plan per op, builds the Program.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>

#include "planner.hpp"
#include "tessera/option_table.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Status;
using tessera::select_finalist::OpPin;

/// Parses `plans: {OP: {column_groups: C, depth_groups: D}, ...}`; errors name the pipeline place.
Status parse_plans(const tessera::MapOption& option, std::map<std::string, OpPin>& plans) {
  plans.clear();
  YAML::Node root;
  try {
    root = YAML::Load(option.yaml);
  } catch (const YAML::Exception& e) {  // the core hands over a mapping; kept for a hand-made one
    return Status::failure(
        fmt::format("{}: option 'plans' is not YAML: {}", option.place(e.mark.line, e.mark.column), e.msg));
  }
  auto place = [&](const YAML::Node& node) { return option.place(node.Mark().line, node.Mark().column); };
  if (!root.IsMap())
    return Status::failure(
        fmt::format("{}: option 'plans' must map op names to {{column_groups: C, "
                    "depth_groups: D}}",
                    place(root)));
  for (const auto& entry : root) {
    const std::string name = entry.first.Scalar();
    const YAML::Node& fields = entry.second;
    if (!fields.IsMap() || fields.size() == 0)
      return Status::failure(
          fmt::format("{}: plan of op '{}' must be a mapping such as {{column_groups: 64, "
                      "depth_groups: 23}}",
                      place(fields.IsNull() ? entry.first : fields), name));
    OpPin pin;
    pin.place = place(entry.first);
    for (const auto& field : fields) {
      const std::string key = field.first.Scalar();
      std::uint32_t* target = key == "column_groups"       ? &pin.column_groups
                              : key == "depth_groups"      ? &pin.depth_groups
                              : key == "serial_splits"     ? &pin.serial_splits
                              : key == "reduction_blocks"  ? &pin.reduction_blocks
                              : key == "row_groups"        ? &pin.row_groups
                              : key == "serial_row_splits" ? &pin.serial_row_splits
                                                           : nullptr;
      if (!target)
        return Status::failure(
            fmt::format("{}: unknown field '{}' in the plan of op '{}' (fields: column_groups, "
                        "depth_groups, row_groups, serial_splits, reduction_blocks, serial_row_splits)",
                        place(field.first), key, name));
      const std::string text = field.second.IsScalar() ? field.second.Scalar() : "";
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 1 || value > 1000000)
        return Status::failure(
            fmt::format("{}: '{}' of op '{}' must be a positive integer (a count of groups up to "
                        "1000000), got '{}'",
                        place(field.second.IsNull() ? field.first : field.second), key, name, text));
      *target = static_cast<std::uint32_t>(value);
    }
    plans[name] = pin;
  }
  return Status::success();
}

using tessera::select_finalist::OrientationChoice;
using tessera::select_finalist::PlannerOptions;

const tessera::OptionTable<PlannerOptions>& option_table() {
  static const tessera::OptionTable<PlannerOptions> table{
      tessera::option("finalists", &PlannerOptions::finalists, 2,
                      "how many of the best costed candidates per op are re-costed and logged")
          .range(1, 100000),
      tessera::option("max_candidates", &PlannerOptions::max_candidates, 64,
                      "candidates per op kept after enumeration and screening")
          .range(1, 100000),
      tessera::option("costed_candidates", &PlannerOptions::costed_candidates, 4,
                      "candidates per op built and costed by the cost model: the best by screening that fit in memory")
          .range(1, 100000),
      tessera::option("mapping_candidates", &PlannerOptions::mapping_candidates, 1,
                      "tile mappings (group offsets) screened per finalist by the gather's exchange load, latency and "
                      "on-tile copies")
          .range(1, 100000),
      tessera::option("available_memory_proportion", &PlannerOptions::available_memory_proportion, 0.6,
                      "a plan whose temporary buffers on any tile exceed this share of tile memory is rejected")
          .above(0.0)
          .at_most(1.0),
      tessera::option("schedule_finalists", &PlannerOptions::schedule_finalists, false,
                      "re-cost finalists with the exchange scheduler's horizons instead of the cost model's exchange "
                      "figure"),
      tessera::option("column_groups", &PlannerOptions::column_groups, 0,
                      "pin every dense op's column groups, for experiments (0: the planner chooses; clamped to the op "
                      "and tiles)")
          .range(0, 1000000),
      tessera::option("depth_groups", &PlannerOptions::depth_groups, 0,
                      "pin every dense op's depth groups, for experiments (0: the planner chooses; clamped to the op "
                      "and tiles)")
          .range(0, 1000000),
      tessera::option("serial_splits", &PlannerOptions::serial_splits, 0,
                      "pin every depth-split dense op's serial splits: its columns in this many slices multiplied one "
                      "after another, for less temporary memory (0: the planner chooses, 1 unless nothing else fits; "
                      "clamped to the narrowest column group)")
          .range(0, 1000000),
      tessera::option("row_groups", &PlannerOptions::row_groups, 0,
                      "pin every dense op's row groups: its rows (m) split over this many groups of tiles, each "
                      "holding the weights (0: the planner chooses; clamped to the op's rows and the tiles)")
          .range(0, 1000000),
      tessera::option("reduction_blocks", &PlannerOptions::reduction_blocks, 0,
                      "pin every depth-split dense op's reduction: 1 for one stage, R > 1 for two (the depth groups "
                      "summed in R blocks first, then across the blocks; 0: the planner chooses; clamped to "
                      "depth_groups / 2, and 1 with serial splits)")
          .range(0, 1000000),
      tessera::option("serial_row_splits", &PlannerOptions::serial_row_splits, 0,
                      "pin every depth-split dense op's serial row splits: its rows (the batch) in this many chunks "
                      "multiplied and reduced one after another on the same tiles and buffers, for less memory (0: "
                      "the planner chooses, 1 unless nothing else fits; 1 with serial splits, two-stage reductions or "
                      "host slices; clamped to the rows)")
          .range(0, 1000000),
      tessera::option("orientation", &PlannerOptions::orientation, OrientationChoice::automatic,
                      {{"auto", OrientationChoice::automatic},
                       {"as_is", OrientationChoice::as_is},
                       {"swapped", OrientationChoice::swapped}},
                      "matmul orientation: auto (per call the faster by the machine model), as_is (a's rows stream "
                      "through the AMP against b) or swapped (b's columns stream against a: poplibs' swapOperands)"),
      tessera::map_option("plans", &PlannerOptions::plans, parse_plans,
                          "pin ops' splits: {OP: {column_groups: C, depth_groups: D, row_groups: G, serial_splits: S, "
                          "reduction_blocks: R, serial_row_splits: B}}, OP the op's output tensor in the model (or a "
                          "tensor lower-mid fused "
                          "into it); clamped to the op and tiles like the global pins"),
  };
  return table;
}

class SelectFinalist final : public tessera::Pass {
public:
  Status configure(const tessera::Options& options) override { return option_table().assign(options, options_); }

protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    return tessera::select_finalist::plan_program(state.graph, state.model, context, options_, state.program,
                                                  state.estimates);
  }

private:
  tessera::select_finalist::PlannerOptions options_;
};

}  // namespace

extern "C" const TesseraPluginManifest* select_finalist_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "select-finalist", "0.1.0",
      "plans every op over the tiles: enumerates column x depth (x serial) splits, costs them, keeps the best",
      option_table(), tessera::facts::canonical, tessera::facts::plan, &tessera::create_plugin_object<SelectFinalist>);
  return &manifest;
}
TESSERA_PLUGIN(select_finalist_manifest)
