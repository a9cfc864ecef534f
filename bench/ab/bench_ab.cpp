// Benchmark: the time and memory `tessera ab` costs on top of the compiles and runs it starts,
// measured by replaying the very same `tessera compile` / `tessera run` commands bare.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using tessera::bench::measure;
using tessera::bench::Measured;

namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// The records `tessera ab` stored, in the order it finished them.
std::vector<json> stored_records(const fs::path& results) {
  std::vector<json> records;
  for (const auto& file : fs::recursive_directory_iterator(results / "records"))
    if (file.path().extension() == ".json") records.push_back(read_json(file.path()));
  std::sort(records.begin(), records.end(), [](const json& a, const json& b) {
    return std::make_tuple(a["repeat"].get<int>(), a["finished_at"].get<std::string>()) <
           std::make_tuple(b["repeat"].get<int>(), b["finished_at"].get<std::string>());
  });
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const std::string suite = argc > 1 ? argv[1] : (source / "configs/suites/ab-bench.yaml").string();
  const int repeat = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  const std::string tessera = (build / "tools/tessera").string();
  const fs::path work = build / "artifacts/bench-ab";
  fs::create_directories(work);

  // The default pipeline, pointing at this build's plugins; arms greedy (base) and in-order.
  const fs::path base = work / "base.yaml";
  tessera::bench::write_pipeline_copy(source, build, "default.yaml", base);
  const std::string overlay = (source / "configs/suites/arms/in-order.yaml").string();

  std::printf("# tessera ab overhead: suite=%s arms=greedy,in-order (+ the baseline's twin) repeat=%d rounds=%d\n",
              fs::path(suite).stem().c_str(), repeat, rounds);
  std::printf("# bare = the same tessera compile/run commands, read from ab's records, run one by one without ab\n");
  std::vector<double> time_overheads_ms, time_overheads_pct, driver_rss_mib, driver_own_ms, driver_own_pct;
  int failures = 0;
  const fs::path results = work / "results";
  // Replays every compile and run ab made, bare, in the same order.
  struct Bare {
    double wall_ms = 0, peak_mib = 0;
    std::size_t compiles = 0, runs = 0;
  };
  auto replay = [&](const std::vector<json>& records) {
    Bare bare;
    for (const json& record : records) {
      const Measured compile = measure(record["compile"]["process"]["command"].get<std::vector<std::string>>());
      bare.wall_ms += compile.wall_ms;
      bare.peak_mib = std::max(bare.peak_mib, compile.peak_rss_mib);
      failures += compile.exit_code != 0;
      ++bare.compiles;
      if (record["run"]["performed"].get<bool>()) {
        const Measured run = measure(record["run"]["process"]["command"].get<std::vector<std::string>>());
        bare.wall_ms += run.wall_ms;
        bare.peak_mib = std::max(bare.peak_mib, run.peak_rss_mib);
        failures += run.exit_code != 0;
        ++bare.runs;
      }
    }
    return bare;
  };
  auto run_ab = [&] {
    fs::remove_all(results);
    return measure({tessera, "ab", "--base", base.string(), "--arm", "greedy=", "--arm", "in-order=" + overlay,
                    "--suite", suite, "--repeat", std::to_string(repeat), "--results", results.string(), "--json",
                    (work / "report.json").string(), "--quiet"});
  };
  std::vector<json> records;
  for (int round = 0; round < rounds; ++round) {
    // Odd rounds replay the previous round's commands before ab, so a drift in machine load
    // does not always fall on the same side.
    Bare bare;
    const bool bare_first = round % 2 == 1;
    if (bare_first) bare = replay(records);
    const Measured ab = run_ab();
    if (ab.exit_code != 0) {
      std::printf("round=%d tessera ab failed with exit code %d\n", round, ab.exit_code);
      return 1;
    }
    records = stored_records(results);
    if (!bare_first) bare = replay(records);
    const json report = read_json(work / "report.json");
    const json& driver = report["driver"];
    const double bare_ms = bare.wall_ms, bare_peak_mib = bare.peak_mib;
    const std::size_t compiles = bare.compiles, runs = bare.runs;
    const double self_mib = driver["self_peak_rss_kib"].get<double>() / 1024.0;
    const double overhead_ms = ab.wall_ms - bare_ms;
    // The driver's own time: its wall time outside the children it waited for. Unlike the
    // ab-vs-bare difference it does not depend on the two passes seeing the same machine load.
    const double own_ms = ab.wall_ms - driver["child_wall_ms"].get<double>();
    driver_own_ms.push_back(own_ms);
    driver_own_pct.push_back(100 * own_ms / driver["child_wall_ms"].get<double>());
    time_overheads_ms.push_back(overhead_ms);
    time_overheads_pct.push_back(100 * overhead_ms / bare_ms);
    driver_rss_mib.push_back(self_mib);
    std::printf(
        "round=%d order=%s compiles=%zu runs=%zu ab_wall_ms=%.0f ab_children_wall_ms=%.0f bare_wall_ms=%.0f "
        "time_overhead_ms=%.0f time_overhead_pct=%.2f driver_own_ms=%.0f driver_own_pct=%.2f "
        "ab_driver_peak_rss_mib=%.1f ab_tree_peak_rss_mib=%.1f bare_peak_rss_mib=%.1f memory_overhead_pct=%.1f\n",
        round, bare_first ? "bare,ab" : "ab,bare", compiles, runs, ab.wall_ms, driver["child_wall_ms"].get<double>(),
        bare_ms, overhead_ms, 100 * overhead_ms / bare_ms, own_ms, driver_own_pct.back(), self_mib, ab.peak_rss_mib,
        bare_peak_mib, 100 * self_mib / bare_peak_mib);
  }
  std::printf(
      "median time_overhead_ms=%.0f time_overhead_pct=%.2f driver_own_ms=%.0f driver_own_pct=%.2f "
      "ab_driver_peak_rss_mib=%.1f (the driver's own memory, resident beside each compile it starts)\n",
      median(time_overheads_ms), median(time_overheads_pct), median(driver_own_ms), median(driver_own_pct),
      median(driver_rss_mib));
  return failures ? 1 : 0;
}
