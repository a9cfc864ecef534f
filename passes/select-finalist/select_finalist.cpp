// select-finalist: the planner plugin — enumerates, costs and picks an operator plan per op, builds the Program.
#include <fmt/format.h>

#include "planner.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Status;

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
    options_.column_groups = static_cast<std::uint32_t>(column_groups);
    options_.depth_groups = static_cast<std::uint32_t>(depth_groups);
    options_.finalists = static_cast<std::uint32_t>(finalists);
    options_.max_candidates = static_cast<std::uint32_t>(max_candidates);
    options_.costed_candidates = static_cast<std::uint32_t>(costed);
    options_.schedule_finalists = options.get_bool("schedule_finalists");
    return Status::success();
  }

protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    return tessera::select_finalist::plan_program(state.graph, context, options_, state.program, state.estimates);
  }

private:
  tessera::select_finalist::PlannerOptions options_;
};

}  // namespace

extern "C" const TesseraPluginManifest* select_finalist_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "select-finalist", "0.1.0",
      "plans every op over the tiles: enumerates column x depth splits, costs them, keeps the best",
      kOptions, tessera::facts::canonical, tessera::facts::plan,
      &tessera::create_plugin_object<SelectFinalist>);
  return &manifest;
}
TESSERA_PLUGIN(select_finalist_manifest)
