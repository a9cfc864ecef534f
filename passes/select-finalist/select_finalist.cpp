// select-finalist: the planner plugin — enumerates, costs and picks an operator plan per op, builds the Program.
#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <charconv>

#include "planner.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Status;
using tessera::select_finalist::OpPin;

/// Parses `plans: {OP: {column_groups: C, depth_groups: D}, ...}`; errors name the pipeline place.
Status parse_plans(const tessera::MapOption& option, std::map<std::string, OpPin>& plans) {
  YAML::Node root;
  try {
    root = YAML::Load(option.yaml);
  } catch (const YAML::Exception& e) {  // the core hands over a mapping; kept for a hand-made one
    return Status::failure(fmt::format("{}: option 'plans' is not YAML: {}", option.place(e.mark.line, e.mark.column), e.msg));
  }
  auto place = [&](const YAML::Node& node) { return option.place(node.Mark().line, node.Mark().column); };
  if (!root.IsMap()) return Status::failure(fmt::format("{}: option 'plans' must map op names to {{column_groups: C, "
                                                        "depth_groups: D}}", place(root)));
  for (const auto& entry : root) {
    const std::string name = entry.first.Scalar();
    const YAML::Node& fields = entry.second;
    if (!fields.IsMap() || fields.size() == 0)
      return Status::failure(fmt::format("{}: plan of op '{}' must be a mapping such as {{column_groups: 64, "
                                         "depth_groups: 23}}", place(fields.IsNull() ? entry.first : fields), name));
    OpPin pin;
    pin.place = place(entry.first);
    for (const auto& field : fields) {
      const std::string key = field.first.Scalar();
      std::uint32_t* target = key == "column_groups"   ? &pin.column_groups
                              : key == "depth_groups"  ? &pin.depth_groups
                              : key == "serial_splits" ? &pin.serial_splits
                              : key == "reduction_blocks" ? &pin.reduction_blocks
                              : key == "row_groups"    ? &pin.row_groups
                                                       : nullptr;
      if (!target)
        return Status::failure(fmt::format("{}: unknown field '{}' in the plan of op '{}' (fields: column_groups, "
                                           "depth_groups, row_groups, serial_splits, reduction_blocks)", place(field.first), key, name));
      const std::string text = field.second.IsScalar() ? field.second.Scalar() : "";
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < 1 || value > 1000000)
        return Status::failure(fmt::format("{}: '{}' of op '{}' must be a positive integer (a count of groups up to "
                                           "1000000), got '{}'", place(field.second.IsNull() ? field.first : field.second),
                                           key, name, text));
      *target = static_cast<std::uint32_t>(value);
    }
    plans[name] = pin;
  }
  return Status::success();
}

constexpr TesseraOptionSpec kOptions[] = {
    {"finalists", "int", "2", "how many of the best costed candidates per op are re-costed and logged"},
    {"max_candidates", "int", "64", "candidates per op kept after enumeration and screening"},
    {"costed_candidates", "int", "4",
     "candidates per op built and costed by the cost model: the best by screening that fit in memory"},
    {"mapping_candidates", "int", "1",
     "tile mappings (group offsets) screened per finalist by the gather's exchange load, latency and on-tile copies"},
    {"available_memory_proportion", "float", "0.6",
     "a plan whose temporary buffers on any tile exceed this share of tile memory is rejected (0 < p <= 1)"},
    {"schedule_finalists", "bool", "false",
     "re-cost finalists with the exchange scheduler's horizons instead of the cost model's exchange figure"},
    {"column_groups", "int", "0",
     "pin every dense op's column groups, for experiments (0: the planner chooses; clamped to the op and tiles)"},
    {"depth_groups", "int", "0",
     "pin every dense op's depth groups, for experiments (0: the planner chooses; clamped to the op and tiles)"},
    {"serial_splits", "int", "0",
     "pin every depth-split dense op's serial splits: its columns in this many slices multiplied one after another, "
     "for less temporary memory (0: the planner chooses, 1 unless nothing else fits; clamped to the narrowest column group)"},
    {"row_groups", "int", "0",
     "pin every dense op's row groups: its rows (m) split over this many groups of tiles, each holding the weights "
     "(0: the planner chooses; clamped to the op's rows and the tiles)"},
    {"reduction_blocks", "int", "0",
     "pin every depth-split dense op's reduction: 1 for one stage, R > 1 for two (the depth groups summed in R blocks "
     "first, then across the blocks; 0: the planner chooses; clamped to depth_groups / 2, and 1 with serial splits)"},
    {"orientation", "string", "auto",
     "matmul orientation: auto (per call the faster by the machine model), as_is (a's rows stream through the AMP "
     "against b) or swapped (b's columns stream against a: poplibs' swapOperands)"},
    {"plans", "map", "{}",
     "pin ops' splits: {OP: {column_groups: C, depth_groups: D, row_groups: G, serial_splits: S, reduction_blocks: R}}, OP the op's output tensor in the "
     "model (or a tensor lower-mid fused into it); clamped to the op and tiles like the global pins"},
};

class SelectFinalist final : public tessera::Pass {
public:
  Status configure(const tessera::Options& options) override {
    const std::int64_t finalists = options.get_int("finalists");
    const std::int64_t max_candidates = options.get_int("max_candidates");
    const std::int64_t costed = options.get_int("costed_candidates");
    auto out_of_range = [](const char* name, std::int64_t value) {
      return Status::failure(fmt::format("option '{}' is {}; it must be between 1 and 100000", name, value));
    };
    if (finalists < 1 || finalists > 100000) return out_of_range("finalists", finalists);
    if (max_candidates < 1 || max_candidates > 100000) return out_of_range("max_candidates", max_candidates);
    if (costed < 1 || costed > 100000) return out_of_range("costed_candidates", costed);
    const std::int64_t mappings = options.get_int("mapping_candidates");
    if (mappings < 1 || mappings > 100000) return out_of_range("mapping_candidates", mappings);
    options_.mapping_candidates = static_cast<std::uint32_t>(mappings);
    const double proportion = options.get_number("available_memory_proportion");
    if (!(proportion > 0.0 && proportion <= 1.0))
      return Status::failure(fmt::format("option 'available_memory_proportion' is {}; it must be in (0, 1], e.g. 0.6",
                                         proportion));
    options_.available_memory_proportion = proportion;
    const std::int64_t column_groups = options.get_int("column_groups");
    const std::int64_t depth_groups = options.get_int("depth_groups");
    auto pin_out_of_range = [](const char* name, std::int64_t value) {
      return Status::failure(fmt::format("option '{}' is {}; use 0 to let the planner choose, or a count of "
                                         "groups up to 1000000", name, value));
    };
    if (column_groups < 0 || column_groups > 1000000) return pin_out_of_range("column_groups", column_groups);
    if (depth_groups < 0 || depth_groups > 1000000) return pin_out_of_range("depth_groups", depth_groups);
    const std::int64_t serial_splits = options.get_int("serial_splits");
    if (serial_splits < 0 || serial_splits > 1000000) return pin_out_of_range("serial_splits", serial_splits);
    options_.serial_splits = static_cast<std::uint32_t>(serial_splits);
    const std::int64_t reduction_blocks = options.get_int("reduction_blocks");
    if (reduction_blocks < 0 || reduction_blocks > 1000000) return pin_out_of_range("reduction_blocks", reduction_blocks);
    options_.reduction_blocks = static_cast<std::uint32_t>(reduction_blocks);
    const std::int64_t row_groups = options.get_int("row_groups");
    if (row_groups < 0 || row_groups > 1000000) return pin_out_of_range("row_groups", row_groups);
    options_.row_groups = static_cast<std::uint32_t>(row_groups);
    options_.column_groups = static_cast<std::uint32_t>(column_groups);
    options_.depth_groups = static_cast<std::uint32_t>(depth_groups);
    options_.finalists = static_cast<std::uint32_t>(finalists);
    options_.max_candidates = static_cast<std::uint32_t>(max_candidates);
    options_.costed_candidates = static_cast<std::uint32_t>(costed);
    options_.schedule_finalists = options.get_bool("schedule_finalists");
    const std::string orientation = options.get_string("orientation");
    if (orientation != "auto" && orientation != "as_is" && orientation != "swapped")
      return Status::failure(fmt::format("option 'orientation' is '{}'; it must be auto, as_is or swapped", orientation));
    options_.orientation = orientation == "auto"    ? tessera::select_finalist::OrientationChoice::automatic
                           : orientation == "as_is" ? tessera::select_finalist::OrientationChoice::as_is
                                                    : tessera::select_finalist::OrientationChoice::swapped;
    options_.plans.clear();
    if (Status status = parse_plans(options.get_map("plans"), options_.plans); !status.ok) return status;
    return Status::success();
  }

protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    return tessera::select_finalist::plan_program(state.graph, state.model, context, options_, state.program, state.estimates);
  }

private:
  tessera::select_finalist::PlannerOptions options_;
};

}  // namespace

extern "C" const TesseraPluginManifest* select_finalist_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "select-finalist", "0.1.0",
      "plans every op over the tiles: enumerates column x depth (x serial) splits, costs them, keeps the best",
      kOptions, tessera::facts::canonical, tessera::facts::plan,
      &tessera::create_plugin_object<SelectFinalist>);
  return &manifest;
}
TESSERA_PLUGIN(select_finalist_manifest)
