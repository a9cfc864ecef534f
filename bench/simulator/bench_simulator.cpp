// Benchmark: what `tessera run` costs the host beside what the package puts on the device: wall
// time and peak RSS against the device's bytes plus the host's tensors, and the 1.25x target.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "measure.hpp"
#include "tessera/package.hpp"

namespace fs = std::filesystem;
using tessera::bench::field;
using tessera::bench::measure;
using tessera::bench::Measured;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kRssTargetFactor = 1.25;

struct Case {
  std::string model;     ///< under configs/models/
  std::string pipeline;  ///< under configs/pipelines/
  std::string target;    ///< under configs/targets/
};

/// The bytes the package places on the device: per tile, the union of its buffer-table entries.
std::uint64_t device_bytes(const tessera::Package& package) {
  std::uint64_t total = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const tessera::TileImage& tile : package.tiles) {
    ranges.clear();
    for (const tessera::TileBufferEntry& buffer : tile.buffers)
      ranges.emplace_back(buffer.offset, std::uint64_t{buffer.offset} + buffer.bytes);
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered_to = 0;
    for (const auto& [begin, end] : ranges) {
      if (end > std::max(begin, covered_to)) total += end - std::max(begin, covered_to);
      covered_to = std::max(covered_to, end);
    }
  }
  return total;
}

/// Each tile's address space up to its highest buffer byte: what a simulator mapping tile
/// addresses one to one would hold.
std::uint64_t address_extent_bytes(const tessera::Package& package) {
  std::uint64_t total = 0;
  for (const tessera::TileImage& tile : package.tiles) {
    std::uint64_t extent = 0;
    for (const tessera::TileBufferEntry& buffer : tile.buffers)
      extent = std::max<std::uint64_t>(extent, std::uint64_t{buffer.offset} + buffer.bytes);
    total += extent;
  }
  return total;
}

/// What the host must hold: float32 values of every weight and input it streams in and every
/// output it reads back.
std::uint64_t host_tensor_bytes(const tessera::Package& package) {
  const tessera::Graph& graph = package.graph;
  std::uint64_t total = 0;
  for (std::uint32_t index = 0; index < graph.tensors.size(); ++index) {
    const tessera::Tensor& tensor = graph.tensors[index];
    const bool is_output = std::find(graph.outputs.begin(), graph.outputs.end(), index) != graph.outputs.end();
    if (tensor.kind != tessera::TensorKind::intermediate || is_output)
      total += static_cast<std::uint64_t>(tensor.elements()) * sizeof(float);
  }
  return total;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const fs::path build = fs::canonical("/proc/self/exe").parent_path().parent_path().parent_path();
  const fs::path source = TESSERA_SOURCE_DIR;
  const int repeat = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string tessera = (build / "tools/tessera").string();
  const fs::path work = build / "artifacts/bench-simulator";
  fs::create_directories(work);

  // The process alone (libraries, plugin-free start-up): the floor under every run's RSS.
  const Measured idle = measure({tessera, "--version"});
  std::printf(
      "# tessera run: wall (median of %d) and peak RSS (max, wait4) against device bytes + host tensor bytes;\n"
      "# target: peak RSS <= %.2fx (device + host); process_floor_rss_mib=%.1f (tessera --version), which is\n"
      "# most of a small model's RSS\n",
      repeat, kRssTargetFactor, idle.peak_rss_mib);
  int failures = 0;
  for (const Case& c : {Case{"mlp-b2-n3", "default.yaml", "t1472"}, Case{"mlp-small", "small.yaml", "t16"}}) {
    const fs::path pipeline = work / ("pipeline-" + c.model + ".yaml");
    tessera::bench::write_pipeline_copy(source, build, c.pipeline, pipeline);
    const std::string package_path = (work / (c.model + "-" + c.target + ".tpkg")).string();
    const Measured compile = measure(
        {tessera, "compile", (source / "configs/models" / (c.model + ".yaml")).string(), "-p", pipeline.string(), "-t",
         (source / "configs/targets" / (c.target + ".yaml")).string(), "-o", package_path});
    if (compile.exit_code != 0) {
      std::printf("model=%s target=%s compile failed (exit %d)\n", c.model.c_str(), c.target.c_str(),
                  compile.exit_code);
      ++failures;
      continue;
    }
    const tessera::Package package = tessera::read_package(package_path);
    const double device_mib = static_cast<double>(device_bytes(package)) / kMiB;
    const double host_mib = static_cast<double>(host_tensor_bytes(package)) / kMiB;
    const double extent_mib = static_cast<double>(address_extent_bytes(package)) / kMiB;
    const double package_mib = static_cast<double>(fs::file_size(package_path)) / kMiB;

    std::vector<double> walls;
    double peak_rss_mib = 0;
    Measured last;
    for (int i = 0; i < repeat; ++i) {
      last = measure({tessera, "run", package_path, "--lock", (work / "device.lock").string()}, true);
      failures += last.exit_code != 0;
      walls.push_back(last.wall_ms);
      peak_rss_mib = std::max(peak_rss_mib, last.peak_rss_mib);
    }
    const double data_mib = device_mib + host_mib;
    std::printf(
        "model=%s target=%s run_wall_ms=%.0f run_peak_rss_mib=%.1f device_mib=%.1f host_tensor_mib=%.1f "
        "rss_target_mib=%.1f rss_over_data=%.2f meets_rss_target=%s address_extent_mib=%.1f package_mib=%.1f "
        "device_cycles=%s numericalTest=%s\n",
        c.model.c_str(), c.target.c_str(), median(walls), peak_rss_mib, device_mib, host_mib,
        kRssTargetFactor * data_mib, data_mib > 0 ? peak_rss_mib / data_mib : 0.0,
        peak_rss_mib <= kRssTargetFactor * data_mib ? "yes" : "no", extent_mib, package_mib,
        field(last.out, "device_cycles").c_str(), field(last.out, "numericalTest").c_str());
  }
  // Before the simulator held only the buffers' bytes (commit c6c8fa1, same machine): each tile
  // held its address space up to its highest buffer byte, zero-filled at load.
  std::printf(
      "baseline=c6c8fa1 model=mlp-b2-n3 target=t1472 run_wall_ms=3551..7010 run_peak_rss_mib=978.0 "
      "held_mib=760.0 (address extent)\n");
  return failures ? 1 : 0;
}
