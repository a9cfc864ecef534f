// The `calibrated` cost model: cycles from formulas fitted on simulator microbenchmarks
// (`tessera calibrate`), read from a table file named by the `table` option.
//
// Same structure as the simulator's count: per superstep the slowest tile's codelet cycles,
// the exchange phase's scheduled cycles (fitted against the core's lower bound, so the
// default scheduler's distance from it is part of the formula), and one barrier.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "calibration.hpp"
#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/lowering.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::CostEstimate;
using tessera::ExchangePhase;
using tessera::Program;
using tessera::Target;
namespace calibration = tessera::calibration;

constexpr const char* kTargetPlaceholder = "{target}";

std::uint64_t whole_cycles(double cycles) { return cycles <= 0 ? 0 : static_cast<std::uint64_t>(std::llround(cycles)); }

/// A table checked against one target, with the codelet formulas indexed by codelet id.
struct LoadedTable {
  calibration::Table table;
  std::array<const calibration::Formula*, tessera::kCodeletCount> formulas{};
};

class CalibratedCostModel final : public tessera::CostModel {
public:
  static const tessera::OptionTable<CalibratedCostModel>& option_table() {
    static const tessera::OptionTable<CalibratedCostModel> table{
        tessera::path_option("table", &CalibratedCostModel::table_path_, "",
                             "calibration table from `tessera calibrate` (relative to the pipeline file; {target} is "
                             "replaced by the target's name)"),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override {
    if (tessera::Status status = option_table().assign(options, *this); !status.ok) return status;
    if (table_path_.empty())
      return tessera::refuse_option(
          "table",
          "is not set; give the calibration table `tessera calibrate --target TARGET.yaml -o TABLE.yaml` "
          "writes (e.g. table: ../../build/calibration/{target}.yaml, made by `make calibrate`)");
    return tessera::Status::success();
  }

protected:
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    const LoadedTable& loaded = table_for(target);
    CostEstimate estimate;
    std::vector<double> tile_compute(target.tiles, 0.0);
    std::vector<std::uint32_t> busy_tiles;
    for (const tessera::Superstep& step : program.supersteps) {
      double slowest = 0;
      for (const tessera::CodeletCall& call : step.compute) {
        if (call.tile >= target.tiles)
          throw tessera::Error(fmt::format("a {} call of superstep '{}' is on tile {} but target '{}' has {} tiles",
                                           tessera::codelet_name(call.codelet), step.label, call.tile, target.name,
                                           target.tiles));
        if (tile_compute[call.tile] == 0) busy_tiles.push_back(call.tile);
        tile_compute[call.tile] += call_cycles(loaded, call, step, target);
        slowest = std::max(slowest, tile_compute[call.tile]);
      }
      for (std::uint32_t tile : busy_tiles) tile_compute[tile] = 0;
      busy_tiles.clear();
      estimate.compute_cycles += whole_cycles(slowest);
      if (!step.exchange.transfers.empty()) estimate.exchange_cycles += exchange_cycles(loaded, step.exchange, target);
      else if (!step.copies.empty())
        estimate.exchange_cycles += exchange_cycles(loaded, tessera::physical_phase(program, step, target), target);
      estimate.sync_cycles += whole_cycles(loaded.table.barrier_cycles);
    }
    estimate.peak_tile_bytes = tessera::peak_live_bytes(program);
    return estimate;
  }

  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) override {
    return exchange_cycles(table_for(target), phase, target);
  }

private:
  static std::uint64_t exchange_cycles(const LoadedTable& loaded, const ExchangePhase& phase, const Target& target) {
    if (tessera::endpoint_lower_bound(phase) == 0) return 0;  // nothing crosses: the simulator charges nothing
    return whole_cycles(loaded.table.exchange.cycles(calibration::exchange_features(phase, target)));
  }

  double call_cycles(const LoadedTable& loaded, const tessera::CodeletCall& call, const tessera::Superstep& step,
                     const Target& target) const {
    const auto id = static_cast<std::uint32_t>(call.codelet);
    if (id >= tessera::kCodeletCount || call.params.size() != tessera::codelet_param_count(call.codelet))
      throw tessera::Error(
          fmt::format("a call of superstep '{}' on tile {} has codelet id {} with {} params, which "
                      "the codelet set does not define",
                      step.label, call.tile, id, call.params.size()));
    const calibration::Formula* formula = loaded.formulas[id];
    const calibration::CodeletLine* line = calibration::codelet_line(call.codelet);
    if (!formula || !line)
      throw tessera::Error(fmt::format(
          "calibration table {} has no formula for codelet '{}' (used in superstep '{}'); "
          "re-run `{}` with this build",
          loaded.table.file, tessera::codelet_name(call.codelet), step.label, make_command(target, loaded.table.file)));
    return formula->cycles(line->features(call.params, target));
  }

  static std::string make_command(const Target& target, const std::string& path) {
    return fmt::format("tessera calibrate --target {} -o {}",
                       target.source_file.empty() ? target.name + ".yaml" : target.source_file, path);
  }

  // Tables are read once per target; `{target}` in the path stands for the target's name.
  const LoadedTable& table_for(const Target& target) {
    const auto found = tables_.find(target.name);
    if (found != tables_.end()) return found->second;
    std::string path = table_path_;
    if (const auto at = path.find(kTargetPlaceholder); at != std::string::npos)
      path.replace(at, std::string(kTargetPlaceholder).size(), target.name);
    calibration::Table table = calibration::read_table(path, make_command(target, path));
    if (table.target != target.name || table.target_hash != target.hash())
      throw tessera::Error(fmt::format(
          "calibration table {} was measured on target '{}' (hash {:016x}) but this compile is for target '{}' (hash "
          "{:016x}); calibrate for it with `{}` and point the 'table' option at that file",
          path, table.target, table.target_hash, target.name, target.hash(), make_command(target, path)));
    if (table.codelet_set_version != tessera::kCodeletSetVersion)
      throw tessera::Error(
          fmt::format("calibration table {} was measured with codelet set version {} but this build "
                      "has version {}; re-run `{}`",
                      path, table.codelet_set_version, tessera::kCodeletSetVersion, make_command(target, path)));
    check_features(table.exchange, calibration::exchange_feature_names(), "the exchange formula", path, target);
    for (const auto& [name, formula] : table.codelets)
      for (std::uint32_t id = 0; id < tessera::kCodeletCount; ++id)
        if (const auto* line = calibration::codelet_line(static_cast<tessera::Codelet>(id));
            line && name == tessera::codelet_name(line->codelet))
          check_features(formula, line->feature_names, fmt::format("codelet '{}'", name), path, target);

    LoadedTable& loaded = tables_[target.name];
    loaded.table = std::move(table);
    // A codelet without a formula is an error only when a program calls it.
    for (std::uint32_t id = 0; id < tessera::kCodeletCount; ++id) {
      const auto formula = loaded.table.codelets.find(tessera::codelet_name(static_cast<tessera::Codelet>(id)));
      if (formula != loaded.table.codelets.end()) loaded.formulas[id] = &formula->second;
    }
    return loaded;
  }

  static void check_features(const calibration::Formula& formula, const char* expected, const std::string& what,
                             const std::string& path, const Target& target) {
    if (formula.features != calibration::split_names(expected))
      throw tessera::Error(
          fmt::format("calibration table {}: {} was fitted on features [{}] but this plugin computes "
                      "[{}]; re-run `{}`",
                      path, what, fmt::join(formula.features, ", "), expected, make_command(target, path)));
  }

  std::string table_path_;
  std::map<std::string, LoadedTable> tables_;
};

}  // namespace

extern "C" const TesseraPluginManifest* calibrated_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_COST_MODEL, "calibrated", "0.1.0",
      "cycle formulas fitted on simulator microbenchmarks (tessera calibrate), read from a table file",
      CalibratedCostModel::option_table(), "", "", &tessera::create_plugin_object<CalibratedCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(calibrated_manifest)
