// Benchmark: how good the plans are and how well the cost models predict them. For every model
// of a suite: simulated cycles against the roofline, the analytic and calibrated cost models'
// errors, compile time and peak tile memory (docs/planning-benchmark.md explains each figure).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "measure.hpp"
#include "tessera/package.hpp"

namespace fs = std::filesystem;
using tessera::bench::field;
using tessera::bench::measure;

namespace {

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }

// MACs of a call and whether they run at the float16 rate; 0 for codelets that are not matmuls.
std::uint64_t matmul_macs(const tessera::TileCodeletCall& call, bool& fp16) {
  using tessera::Codelet;
  fp16 = call.codelet == Codelet::matmul_half;
  const bool matmul = call.codelet == Codelet::matmul || call.codelet == Codelet::matmul_transposed || fp16;
  if (matmul && call.params.size() == 3) return std::uint64_t{call.params[0]} * call.params[1] * call.params[2];
  return 0;
}

// Lower bounds of a compiled package, per superstep s (docs/cost-models.md): the roofline,
//   C_s = ceil(fp32 MACs / (tiles * fp32_macs_per_cycle)) + ceil(fp16 MACs / (tiles * fp16_macs_per_cycle))
//   X_s = endpoint words (max over tiles of words sent or received, from the tile images'
//         send and receive lists) + exchange_phase_overhead + exchange_base_latency, 0 without exchange
//   roofline = sum over s of max(C_s, X_s) + sync_cycles.
// A superstep's compute and exchange never overlap on this machine (bulk-synchronous), so
//   bsp_bound = sum over s of C_s + X_s + sync_cycles
// bounds the package too, more tightly: what no schedule of these supersteps can beat.
struct Bounds {
  std::uint64_t roofline = 0, bsp = 0;
};

Bounds lower_bounds(const tessera::Package& package) {
  const tessera::Target& target = package.target;
  const std::size_t steps = package.tiles.empty() ? 0 : package.tiles.front().supersteps.size();
  Bounds bounds;
  for (std::size_t s = 0; s < steps; ++s) {
    std::uint64_t fp32_macs = 0, fp16_macs = 0, endpoint = 0;
    for (const tessera::TileImage& tile : package.tiles) {
      const tessera::TileSuperstep& step = tile.supersteps.at(s);
      for (const tessera::TileCodeletCall& call : step.compute) {
        bool fp16 = false;
        const std::uint64_t macs = matmul_macs(call, fp16);
        (fp16 ? fp16_macs : fp32_macs) += macs;
      }
      std::uint64_t sent = 0, received = 0;
      for (const tessera::TileSend& send : step.sends) sent += send.words;
      for (const tessera::TileReceive& receive : step.receives) received += receive.words;
      endpoint = std::max({endpoint, sent, received});
    }
    const std::uint64_t compute = ceil_div(fp32_macs, std::uint64_t{target.tiles} * target.fp32_macs_per_cycle) +
                                  ceil_div(fp16_macs, std::uint64_t{target.tiles} * target.fp16_macs_per_cycle);
    const std::uint64_t exchange =
        endpoint == 0 ? 0 : endpoint + target.exchange_phase_overhead + target.exchange_base_latency;
    bounds.roofline += std::max(compute, exchange) + target.sync_cycles;
    bounds.bsp += compute + exchange + target.sync_cycles;
  }
  return bounds;
}

// The chip's floor for a model, independent of any plan: its MACs over all tiles at the peak
// rates, or its weight bytes over all tiles at load_bytes_per_cycle (every weight is read at
// least once a run), whichever is larger, plus one barrier per matmul layer.
std::uint64_t chip_floor(const tessera::Package& package) {
  const tessera::Target& target = package.target;
  const tessera::Graph& graph = package.graph;
  std::uint64_t fp32_macs = 0, fp16_macs = 0, weight_bytes = 0, layers = 0;
  for (const tessera::Op& op : graph.ops) {
    if (op.kind != tessera::OpKind::matmul && op.kind != tessera::OpKind::dense) continue;
    const tessera::Tensor& a = graph.tensors[op.inputs[0]];
    const tessera::Tensor& b = graph.tensors[op.inputs[1]];
    const std::uint64_t macs = std::uint64_t(a.rows()) * a.cols() * graph.tensors[op.output].cols();
    (b.dtype == tessera::DType::float16 ? fp16_macs : fp32_macs) += macs;
    ++layers;
  }
  for (const tessera::Tensor& tensor : graph.tensors)
    if (tensor.kind == tessera::TensorKind::weight)
      weight_bytes += std::uint64_t(tensor.elements()) * tessera::dtype_bytes(tensor.dtype);
  const std::uint64_t tiles = target.tiles;
  const std::uint64_t compute =
      ceil_div(fp32_macs, tiles * target.fp32_macs_per_cycle) + ceil_div(fp16_macs, tiles * target.fp16_macs_per_cycle);
  const std::uint64_t loads = ceil_div(weight_bytes, tiles * target.load_bytes_per_cycle);
  return std::max(compute, loads) + layers * target.sync_cycles;
}

double signed_error(const std::string& estimate, const std::string& simulated) {
  try {
    return (std::stod(estimate) - std::stod(simulated)) / std::stod(simulated);
  } catch (const std::exception&) {
    return NAN;
  }
}

// Selection regret: compile and simulate the plans the planner could have picked (every dense
// op pinned to the same column, depth and row groups, serial splits, reduction blocks and
// orientation, from its candidate space; with `ops`, also each op pinned alone while the planner
// picks the others: mixed plans) beside the one it picks; two plans are the same when their
// packages run and weigh the same (device cycles, exchange cycles, supersteps, peak tile bytes).
struct RegretModel {
  const char* model;
  const char* target;
  std::vector<std::uint32_t> column_groups, depth_groups, row_groups, reduction_blocks, serial_splits;
  std::vector<const char*> orientations;
  std::vector<const char*> ops;  ///< dense ops (output tensors) also pinned one at a time
};

int regret(const fs::path& source, const fs::path& build, const std::string& tessera, const fs::path& work,
           const std::string& lock, const std::string& only) {
  const std::vector<RegretModel> models = {
      // At batch 2 both orientations charge the same (the workers win), so one is enough.
      {"mlp-b2-n3", "t1472", {23, 46, 64, 92, 184, 368}, {2, 4, 8, 16, 32}, {1, 2}, {1, 2}, {1}, {"as_is"}, {}},
      // On 16 tiles few uniform splits fit: serial splits (the planner's answer to short memory)
      // and mixed plans widen them.
      {"mlp-b4-n3-w512",
       "t16",
       {1, 2, 4, 8, 16},
       {1, 2, 4, 8, 16},
       {1, 2, 4},
       {1, 2},
       {1, 2, 4},
       {"as_is", "swapped"},
       {"y0", "y1", "y2"}},
      {"mlp-b16-n8-w256",
       "t16",
       {1, 2, 4, 8, 16},
       {1, 2, 4, 8, 16},
       {1, 2, 4},
       {1, 2},
       {1, 2},
       {"as_is", "swapped"},
       {}},
  };
  std::printf(
      "# selection regret: the planner's pick (default pipeline) beside plans pinned from its candidate "
      "space, all compiled and simulated\n");
  int failures = 0;
  for (const RegretModel& entry : models) {
    if (!only.empty() && only != entry.model) continue;  // `--regret MODEL`: that model alone
    const std::string model = (source / "configs/models" / (std::string(entry.model) + ".yaml")).string();
    const std::string target = (source / "configs/targets" / (std::string(entry.target) + ".yaml")).string();
    struct Plan {
      std::string name;
      double cycles = 0;
    };
    std::vector<Plan> plans;
    std::vector<std::string> signatures;
    double picked = 0;
    auto try_plan = [&](const std::string& name, const std::string& options) {
      const fs::path pipeline = work / "regret.yaml";
      const std::string package = (work / "regret.tpkg").string();
      tessera::bench::write_pipeline_copy(source, build, "default.yaml", pipeline,
                                          {{"mapping_candidates: 8}", "mapping_candidates: 8" + options + "}"}});
      const auto compile = measure(
          {tessera, "compile", model, "-p", pipeline.string(), "-t", target, "-o", package, "--threads", "2"}, true);
      if (compile.exit_code != 0) return;  // does not fit, or the pins clamp to nothing that fits
      const auto run = measure({tessera, "run", package, "--lock", lock}, true);
      if (run.exit_code != 0) {
        std::printf("model=%s plan=%s run_failed=%d\n", entry.model, name.c_str(), run.exit_code);
        ++failures;
        return;
      }
      const std::string cycles = field(run.out, "device_cycles");
      const std::string signature = cycles + "/" + field(run.out, "exchange_cycles") + "/" +
                                    field(compile.out, "supersteps") + "/" + field(compile.out, "peak_tile_bytes");
      if (name == "planner") picked = std::stod(cycles);
      if (std::find(signatures.begin(), signatures.end(), signature) != signatures.end()) return;
      signatures.push_back(signature);
      plans.push_back({name, std::stod(cycles)});
      std::printf("model=%s plan=%s device_cycles=%s peak_tile_bytes=%s\n", entry.model, name.c_str(), cycles.c_str(),
                  field(compile.out, "peak_tile_bytes").c_str());
      std::fflush(stdout);
    };
    try_plan("planner", "");
    auto split = [](std::uint32_t columns, std::uint32_t depth, std::uint32_t rows, std::uint32_t blocks,
                    std::uint32_t serial) {
      return "column_groups: " + std::to_string(columns) + ", depth_groups: " + std::to_string(depth) +
             ", row_groups: " + std::to_string(rows) + ", reduction_blocks: " + std::to_string(blocks) +
             ", serial_splits: " + std::to_string(serial);
    };
    auto split_name = [](std::uint32_t columns, std::uint32_t depth, std::uint32_t rows, std::uint32_t blocks,
                         std::uint32_t serial) {
      return "C" + std::to_string(columns) + "xD" + std::to_string(depth) + "xG" + std::to_string(rows) + "xR" +
             std::to_string(blocks) + "xS" + std::to_string(serial);
    };
    for (std::uint32_t rows : entry.row_groups)
      for (std::uint32_t columns : entry.column_groups)
        for (std::uint32_t depth : entry.depth_groups)
          for (std::uint32_t blocks : entry.reduction_blocks)
            for (std::uint32_t serial : entry.serial_splits) {
              if (blocks > 1 && depth < 2 * blocks) continue;  // clamps to one stage: a plan already tried
              // Serial splits need a one-stage depth split: otherwise the plan is one already tried.
              if (serial > 1 && (depth == 1 || blocks > 1)) continue;
              for (const char* orientation : entry.orientations)
                try_plan(split_name(columns, depth, rows, blocks, serial) + "/" + orientation,
                         ", " + split(columns, depth, rows, blocks, serial) + ", orientation: " + orientation);
              // Mixed: this op pinned, the others (and every orientation) the planner's choice.
              for (const char* op : entry.ops)
                try_plan(std::string(op) + "=" + split_name(columns, depth, rows, blocks, serial),
                         ", plans: {" + std::string(op) + ": {" + split(columns, depth, rows, blocks, serial) + "}}");
            }
    const auto best =
        std::min_element(plans.begin(), plans.end(), [](const Plan& a, const Plan& b) { return a.cycles < b.cycles; });
    if (best == plans.end() || picked == 0) {
      std::printf("model=%s regret=failed plans=%zu\n", entry.model, plans.size());
      ++failures;
      continue;
    }
    std::printf(
        "summary model=%s distinct_plans=%zu picked_cycles=%.0f best_plan=%s best_cycles=%.0f regret=%.3f "
        "within_1.10x=%s\n",
        entry.model, plans.size(), picked, best->name.c_str(), best->cycles, picked / best->cycles,
        picked / best->cycles <= 1.10 ? "yes" : "no");
  }
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const bool regret_mode = argc > 1 && std::string(argv[1]) == "--regret";
  const fs::path suite = argc > 1 && !regret_mode ? fs::path(argv[1]) : source / "configs/suites/default.yaml";
  const std::string tessera = (build / "tools/tessera").string();
  const fs::path work = build / "artifacts/bench-planning";
  fs::create_directories(work);
  if (regret_mode)
    return regret(source, build, tessera, work, (work / "device.lock").string(), argc > 2 ? argv[2] : "");
  const fs::path analytic_pipeline = work / "default.yaml", calibrated_pipeline = work / "calibrated.yaml";
  tessera::bench::write_pipeline_copy(source, build, "default.yaml", analytic_pipeline);
  tessera::bench::write_pipeline_copy(source, build, "calibrated.yaml", calibrated_pipeline);
  const std::string lock = (work / "device.lock").string();

  const YAML::Node models = YAML::LoadFile(suite.string())["models"];
  std::printf(
      "# planning benchmark: suite=%s; pipelines default (analytic) and calibrated; "
      "cost-model errors = (estimate - simulated) / simulated of each pipeline's own package\n",
      suite.stem().c_str());
  double max_analytic = 0, max_calibrated = 0;
  std::string b2n3_ratio = "?", b2n3_bsp_ratio = "?", b2n3_compile = "?", b2n3_floor = "?";
  bool b2n3_meets = false, b2n3_fast = false;
  int failures = 0;
  for (const YAML::Node& entry : models) {
    const fs::path model = fs::weakly_canonical(suite.parent_path() / entry["model"].as<std::string>());
    const fs::path target = fs::weakly_canonical(suite.parent_path() / entry["target"].as<std::string>());
    // A suite entry's `name:` when it has one (an ONNX model is often a folder's model.onnx).
    const std::string name = entry["name"] ? entry["name"].as<std::string>() : model.stem().string();
    const std::string package = (work / (name + ".tpkg")).string();
    const std::string calibrated_package = (work / (name + "-calibrated.tpkg")).string();

    const auto compile = measure({tessera, "compile", model.string(), "-p", analytic_pipeline.string(), "-t",
                                  target.string(), "-o", package, "--threads", "2"},
                                 true);
    const auto run = measure({tessera, "run", package, "--lock", lock}, true);
    const auto calibrated_compile = measure({tessera, "compile", model.string(), "-p", calibrated_pipeline.string(),
                                             "-t", target.string(), "-o", calibrated_package, "--threads", "2"},
                                            true);
    const auto calibrated_run = measure({tessera, "run", calibrated_package, "--lock", lock}, true);
    if (compile.exit_code != 0 || run.exit_code != 0 || calibrated_compile.exit_code != 0 ||
        calibrated_run.exit_code != 0) {
      std::printf("model=%s target=%s failed compile=%d run=%d calibrated_compile=%d calibrated_run=%d\n", name.c_str(),
                  target.stem().c_str(), compile.exit_code, run.exit_code, calibrated_compile.exit_code,
                  calibrated_run.exit_code);
      ++failures;
      continue;
    }
    const std::string simulated = field(run.out, "device_cycles");
    const tessera::Package built = tessera::read_package(package);
    const Bounds bounds = lower_bounds(built);
    const std::uint64_t floor = chip_floor(built);
    const double floor_ratio = std::stod(simulated) / double(floor);
    const double ratio = std::stod(simulated) / double(bounds.roofline);
    const double bsp_ratio = std::stod(simulated) / double(bounds.bsp);
    const double analytic_error = signed_error(field(compile.out, "estimated_cycles"), simulated);
    const double calibrated_error =
        signed_error(field(calibrated_compile.out, "estimated_cycles"), field(calibrated_run.out, "device_cycles"));
    max_analytic = std::max(max_analytic, std::abs(analytic_error));
    max_calibrated = std::max(max_calibrated, std::abs(calibrated_error));
    std::printf(
        "model=%s target=%s device_cycles=%s roofline_cycles=%llu roofline_ratio=%.3f analytic_error=%+.4f "
        "calibrated_error=%+.4f compile_ms=%.0f peak_tile_bytes=%s bsp_bound_cycles=%llu bsp_ratio=%.3f "
        "end_to_end_cycles=%s chip_floor_cycles=%llu floor_ratio=%.3f\n",
        name.c_str(), target.stem().c_str(), simulated.c_str(), static_cast<unsigned long long>(bounds.roofline), ratio,
        analytic_error, calibrated_error, compile.wall_ms, field(compile.out, "peak_tile_bytes").c_str(),
        static_cast<unsigned long long>(bounds.bsp), bsp_ratio, field(run.out, "end_to_end_cycles").c_str(),
        static_cast<unsigned long long>(floor), floor_ratio);
    if (name == "mlp-b2-n3" && target.stem() == "t1472") {
      char text[32];
      std::snprintf(text, sizeof text, "%.3f", ratio);
      b2n3_ratio = text;
      std::snprintf(text, sizeof text, "%.3f", bsp_ratio);
      b2n3_bsp_ratio = text;
      std::snprintf(text, sizeof text, "%.3f", floor_ratio);
      b2n3_floor = text;
      b2n3_meets = ratio <= 1.25;
      b2n3_compile = std::to_string(static_cast<long long>(compile.wall_ms));
      b2n3_fast = compile.wall_ms <= 5000;
    }
  }
  std::printf(
      "summary models=%zu failures=%d max_abs_analytic_error=%.4f max_abs_calibrated_error=%.4f "
      "calibrated_within_10pct=%s mlp_b2_n3_roofline_ratio=%s mlp_b2_n3_meets_1.25x=%s "
      "mlp_b2_n3_compile_ms=%s mlp_b2_n3_compile_within_5s=%s mlp_b2_n3_bsp_ratio=%s mlp_b2_n3_floor_ratio=%s\n",
      models.size(), failures, max_analytic, max_calibrated, max_calibrated <= 0.10 ? "yes" : "no", b2n3_ratio.c_str(),
      b2n3_meets ? "yes" : "no", b2n3_compile.c_str(), b2n3_fast ? "yes" : "no", b2n3_bsp_ratio.c_str(),
      b2n3_floor.c_str());
  return failures ? 1 : 0;
}
