// Benchmark: wall time and peak memory of `tessera compile` and `tessera run` for one model,
// side by side for each exchange scheduler, with the simulated and estimated cycles.
#include <cstdio>
#include <filesystem>
#include <string>

#include "measure.hpp"

namespace fs = std::filesystem;
using tessera::bench::field;
using tessera::bench::measure;
using tessera::bench::Measured;

int main(int argc, char** argv) {
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const std::string model = argc > 1 ? argv[1] : (source / "configs/models/mlp-b2-n3.yaml").string();
  const std::string target = argc > 2 ? argv[2] : (source / "configs/targets/t1472.yaml").string();
  const std::string tessera = (build / "tools/tessera").string();
  const fs::path work = build / "artifacts/bench";
  fs::create_directories(work);

  std::printf("# tessera compile + run, model=%s target=%s (one process each, peak RSS from wait4)\n",
              fs::path(model).stem().c_str(), fs::path(target).stem().c_str());
  int failures = 0;
  for (const std::string scheduler : {"in-order", "greedy"}) {
    // A pipeline identical to the default but for the scheduler.
    const fs::path pipeline = work / ("pipeline-" + scheduler + ".yaml");
    tessera::bench::write_pipeline_copy(source, build, "default.yaml", pipeline,
                                        {{"plugin: greedy", "plugin: " + scheduler}});
    const std::string package = (work / ("model-" + scheduler + ".tpkg")).string();

    Measured compile = measure({tessera, "compile", model, "-p", pipeline.string(), "-t", target, "-o", package}, true);
    Measured run = measure({tessera, "run", package, "--lock", (work / "device.lock").string()}, true);
    failures += compile.exit_code != 0 || run.exit_code != 0;
    std::printf(
        "scheduler=%-8s compile_wall_ms=%.0f compile_peak_rss_mib=%.1f run_wall_ms=%.0f run_peak_rss_mib=%.1f "
        "estimated_cycles=%s device_cycles=%s exchange_cycles=%s scheduled_exchange_cycles=%s "
        "exchange_lower_bound=%s numericalTest=%s\n",
        scheduler.c_str(), compile.wall_ms, compile.peak_rss_mib, run.wall_ms, run.peak_rss_mib,
        field(compile.out, "estimated_cycles").c_str(), field(run.out, "device_cycles").c_str(),
        field(run.out, "exchange_cycles").c_str(), field(compile.out, "scheduled_exchange_cycles").c_str(),
        field(compile.out, "exchange_lower_bound").c_str(), field(run.out, "numericalTest").c_str());
  }
  // The production compiler's log (shared/reference) for the same model: ~456 s from the first
  // finalist to the written package, refined_cycles=975171, final_cycles=946626.
  std::printf(
      "baseline=reference-log compile_wall_ms=456000 final_cycles=946626 (production IPU compiler, mlp-b2-n3)\n");
  return failures ? 1 : 0;
}
