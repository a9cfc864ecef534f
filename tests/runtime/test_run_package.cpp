// Tests of run_package: the whole sequence on a hand-built package, from memory and from a file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim_fixture.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/runtime/device_lock.hpp"
#include "tessera/runtime/reference.hpp"
#include "tessera/runtime/run.hpp"
#include "tessera/runtime/sim_device.hpp"
#include "tessera/package.hpp"

using namespace tessera;
using namespace tessera::runtime;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

RunOptions options_in(const testing::TempDir& dir) {
  RunOptions options;
  options.lock_path = (dir.path() / "sim0.lock").string();
  options.lock_timeout_ms = 5000;
  options.profile_path = (dir.path() / "out" / "profile.json").string();
  options.trace_path = (dir.path() / "out" / "trace.json").string();
  return options;
}

}  // namespace

TEST_CASE("run_package runs an in-memory package, checks numerics and writes the profile", "[runtime][run]") {
  testing::TempDir dir;
  const RunOptions options = options_in(dir);
  const RunResult result = run_package(testing::small_mlp_package(), options);

  CHECK(result.numerics_checked);
  CHECK(result.passed());
  CHECK(result.numerics.elements == 8);
  CHECK(result.numerics.max_abs_error <= result.numerics.tolerance);
  CHECK(result.numerics.tolerance == Approx(options.atol + options.rtol * result.numerics.max_abs_reference));
  CHECK(result.cycles.total() == 1867);  // see the sim device test for the sum
  CHECK(result.tiles == 4);
  CHECK(result.profile_samples == 8);
  CHECK(result.words_exchanged == 8 + 12);
  CHECK(result.words_unreceived == 2);
  CHECK(result.host_initialize_bytes == (32 + 4) * 4);   // w and b
  CHECK(result.host_run_bytes == (16 + 8 + 4 + 4) * 4);  // x in, y's three slices out
  CHECK(result.outputs.at("y").size() == 8);

  const nlohmann::json profile = read_json(options.profile_path);
  CHECK(profile["format"] == "tessera-profile");
  CHECK(profile["tiles"] == 4);
  CHECK(profile["samples"] == 8);
  CHECK(profile["totals"]["cycles"] == 1867);
  REQUIRE(profile["supersteps"].size() == 2);
  CHECK(profile["supersteps"][1]["label"] == "reduce-bias-relu");
  CHECK(profile["supersteps"][0]["tile_compute_cycles"] == nlohmann::json({449, 449, 0, 0}));
  CHECK(profile["supersteps"][0]["exchange_horizon"] == 14);

  const nlohmann::json trace = read_json(options.trace_path);
  std::size_t compute_events = 0;
  for (const auto& event : trace["traceEvents"])
    if (event.value("cat", "") == "compute") ++compute_events;
  CHECK(compute_events == 3);  // tiles 0 and 1 in superstep 0, tile 0 in superstep 1

  // Only the two files: the temporaries were renamed.
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path() / "out")) {
    (void)entry;
    ++files;
  }
  CHECK(files == 2);
}

TEST_CASE("run_package reads a written package file and gives the same result", "[runtime][run]") {
  testing::TempDir dir;
  const std::string path = (dir.path() / "small.tpkg").string();
  write_package(testing::small_mlp_package(), path);
  RunOptions options = options_in(dir);
  options.package_path = path;
  const RunResult from_file = run_package(options);
  const RunResult in_memory = run_package(testing::small_mlp_package(), options);
  CHECK(from_file.passed());
  CHECK(from_file.cycles.total() == in_memory.cycles.total());
  CHECK(from_file.outputs == in_memory.outputs);
}

TEST_CASE("run_package reports a wrong result as a failed numerical test", "[runtime][run]") {
  testing::TempDir dir;
  Package package = testing::small_mlp_package();
  // Tile 0 stores tile 1's partial sum over its own: the sum loses half its terms.
  package.tiles[0].supersteps[0].receives[0].address = testing::layout::partials;
  package.tiles[0].buffers.push_back({208, 32});
  package.tiles[0].supersteps[0].compute[0].addresses[2] = 208;
  const RunResult result = run_package(package, options_in(dir));
  CHECK(result.numerics_checked);
  CHECK_FALSE(result.passed());
  CHECK(result.numerics.max_abs_error > result.numerics.tolerance);
}

TEST_CASE("run_package names the package and the place of a conflict", "[runtime][run]") {
  testing::TempDir dir;
  Package package = testing::small_mlp_package();
  package.tiles[0].supersteps[0].receives[0].arrival = 7;
  CHECK_THROWS_WITH(run_package(package, options_in(dir), "bad.tpkg"),
                    Contains("bad.tpkg: superstep 0 ('matmul'), tile 0, cycle 14"));

  RunOptions options = options_in(dir);
  options.package_path = (dir.path() / "missing.tpkg").string();
  CHECK_THROWS_WITH(run_package(options), Contains("missing.tpkg"));
}

TEST_CASE("run_package waits for the device lock and gives up after its timeout", "[runtime][run]") {
  testing::TempDir dir;
  RunOptions options = options_in(dir);
  options.lock_timeout_ms = 50;
  DeviceLock other(options.lock_path);
  REQUIRE(other.try_acquire());
  CHECK_THROWS_WITH(run_package(testing::small_mlp_package(), options), Contains("sim0.lock") && Contains("busy"));
  other.release();
  CHECK(run_package(testing::small_mlp_package(), options).passed());
}

TEST_CASE("run_package reports the device's and the host's bytes; the releasing run frees the tile images",
          "[runtime][run]") {
  testing::TempDir dir;
  RunOptions options = options_in(dir);
  options.trace_path.clear();  // a trace reads the tile images: they would be kept
  const Package package = testing::small_mlp_package();
  const RunResult kept = run_package(package, options);

  SimDevice device;
  device.attach();
  device.load(package);
  CHECK(kept.device_bytes == device.allocated_bytes());  // the simulator holds exactly the buffers' union
  std::uint64_t host = 0;                                // x, w, b and y as float32
  for (const Tensor& tensor : package.graph.tensors)
    if (tensor.kind != TensorKind::intermediate || tensor.name == "y") host += tensor.elements() * 4;
  CHECK(kept.host_tensor_bytes == host);
  std::uint64_t support = 0;  // code, vertex states, exchange descriptors
  for (const TileImage& image : package.tiles) support += tile_support_bytes(image).total();
  CHECK(support > 0);
  CHECK(kept.device_support_bytes == support);

  Package released = package;
  const RunResult result = run_package_releasing_tiles(released, options, "small");
  CHECK(released.tiles.empty());
  CHECK(released.graph.tensors.size() == package.graph.tensors.size());
  CHECK(result.passed());
  CHECK(result.outputs == kept.outputs);
  CHECK(result.cycles.total() == kept.cycles.total());
  CHECK(result.device_bytes == kept.device_bytes);

  // Asked for a trace, the run keeps them: the trace reads each tile's traffic.
  options.trace_path = (dir.path() / "trace.json").string();
  Package traced = package;
  CHECK(run_package_releasing_tiles(traced, options, "small").passed());
  CHECK(traced.tiles.size() == package.tiles.size());
}
