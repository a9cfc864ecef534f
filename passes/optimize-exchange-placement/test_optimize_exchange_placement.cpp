// Tests of the optimize-exchange-placement pass plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <vector>

#include "tessera/lowering.hpp"
#include "pass_bench.hpp"
#include "tessera/version.hpp"
#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::log_field;
using tessera::testing::PassBench;

namespace {

/// mlp-small planned on t16 as 4 column groups x 4 depth groups (group c on tiles 4c..4c+3,
/// one column), then the first layer's work on tiles `a` and `b` exchanged (buffers whose
/// name starts with `prefix`, and their calls): same memory and compute per tile, but a
/// column group spread over two columns, which a swap of work units can undo.
void plan_with_exchanged_work(PassBench& bench, const std::string& prefix, std::uint32_t a, std::uint32_t b) {
  Options pins;
  pins.values = {{"column_groups", std::int64_t{4}}, {"depth_groups", std::int64_t{4}}};
  REQUIRE(bench.run_through("select-finalist", {{"select-finalist", pins}}).ok);
  Program& program = bench.state.program;
  std::vector<bool> moved(program.buffers.size(), false);
  for (std::size_t i = 0; i < program.buffers.size(); ++i) {
    Buffer& buffer = program.buffers[i];
    if (buffer.name.rfind(prefix, 0) != 0 || (buffer.tile != a && buffer.tile != b)) continue;
    buffer.tile = buffer.tile == a ? b : a;
    moved[i] = true;
  }
  for (Superstep& step : program.supersteps)
    for (CodeletCall& call : step.compute)
      if (moved[call.operands.front().buffer]) call.tile = program.buffers[call.operands.front().buffer].tile;
  REQUIRE(verify_program(program, bench.state.target) == "");
}

/// The sum of the scheduled horizons of every phase, as lower-exchanges will build them.
std::uint64_t scheduled_cycles(PassBench& bench) {
  std::uint64_t total = 0;
  for (const Superstep& step : bench.state.program.supersteps) {
    const ExchangePhase phase = physical_phase(bench.state.program, step, bench.state.target);
    if (phase.transfers.empty()) continue;
    ScheduleReport report;
    (void)bench.scheduler().schedule(phase, bench.state.target, 2000, &report);
    total += report.horizon;
  }
  return total;
}

/// Per tile: sorted (bytes, region, alignment, first, last) of its buffers and, per
/// superstep, its codelet cycles: what a swap must leave as it is.
using TileFootprint = std::vector<std::tuple<std::uint32_t, int, std::uint32_t, std::uint32_t, std::uint32_t>>;
std::pair<std::vector<TileFootprint>, std::vector<std::vector<std::uint64_t>>> footprint(const PassBench& bench) {
  const Program& program = bench.state.program;
  std::vector<TileFootprint> memory(bench.state.target.tiles);
  for (const Buffer& b : program.buffers)
    memory[b.tile].emplace_back(b.bytes, static_cast<int>(b.region), b.alignment, b.first_use, b.last_use);
  for (TileFootprint& tile : memory) std::sort(tile.begin(), tile.end());
  std::vector<std::vector<std::uint64_t>> cycles(program.supersteps.size(),
                                                 std::vector<std::uint64_t>(bench.state.target.tiles, 0));
  for (std::size_t s = 0; s < program.supersteps.size(); ++s)
    for (const CodeletCall& call : program.supersteps[s].compute)
      cycles[s][call.tile] += codelet_cycles(call.codelet, call.params, bench.state.target);
  return {memory, cycles};
}

std::vector<std::string> attempt_lines(const PassBench& bench) {
  return bench.log_lines("optimize exchange placement phase=");
}

bool accepted(const std::string& line) { return line.find(" accepted=true") != std::string::npos; }

}  // namespace

TEST_CASE("optimize-exchange-placement undoes a spread column group, keeping memory and compute per tile",
          "[optimize-exchange-placement]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  plan_with_exchanged_work(bench, "dense0.", 1, 13);
  const std::uint64_t before = scheduled_cycles(bench);
  const auto footprint_before = footprint(bench);
  REQUIRE(bench.run("optimize-exchange-placement").ok);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  CHECK(footprint(bench) == footprint_before);
  for (const Superstep& step : bench.state.program.supersteps)
    for (const Copy& copy : step.copies)
      CHECK(bench.state.program.buffers[copy.source.buffer].tile !=
            bench.state.program.buffers[copy.destination.buffer].tile);

  const auto summary = bench.log_lines("optimized exchange placement ");
  REQUIRE(summary.size() == 1);
  CHECK(log_field(summary[0], "accepted") >= 1);
  CHECK(log_field(summary[0], "baseline_cycles") == before);
  CHECK(log_field(summary[0], "final_cycles") < before);
  CHECK(scheduled_cycles(bench) == log_field(summary[0], "final_cycles"));
  for (const std::string& line : attempt_lines(bench))
    if (accepted(line)) CHECK(log_field(line, "candidate_cycles") < log_field(line, "baseline_cycles"));

  // lower-exchanges schedules the same phases: its total is the pass's final figure.
  REQUIRE(bench.run("place-storage").ok);
  REQUIRE(bench.run("lower-exchanges").ok);
  CHECK(bench.state.estimates.scheduled_exchange_cycles == log_field(summary[0], "final_cycles"));
}

TEST_CASE("optimize-exchange-placement never lengthens the scheduled exchange", "[optimize-exchange-placement]") {
  for (const auto& [columns, depth] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 0}, {2, 4}, {4, 2}, {4, 4}, {8, 2}}) {
    INFO("column_groups=" << columns << " depth_groups=" << depth);
    PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    Options pins;
    pins.values = {{"column_groups", columns}, {"depth_groups", depth}};
    REQUIRE(bench.run_through("select-finalist", {{"select-finalist", pins}}).ok);
    const std::uint64_t before = scheduled_cycles(bench);
    REQUIRE(bench.run("optimize-exchange-placement").ok);
    CHECK(scheduled_cycles(bench) <= before);
    const auto summary = bench.log_lines("optimized exchange placement ");
    REQUIRE(summary.size() == 1);
    CHECK(log_field(summary[0], "final_cycles") <= log_field(summary[0], "baseline_cycles"));
    for (const std::string& line : attempt_lines(bench))
      if (accepted(line)) CHECK(log_field(line, "candidate_cycles") < log_field(line, "baseline_cycles"));
  }
}

TEST_CASE("optimize-exchange-placement is deterministic", "[optimize-exchange-placement]") {
  auto optimize = [] {
    auto bench = std::make_unique<PassBench>(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    plan_with_exchanged_work(*bench, "dense0.", 1, 13);
    REQUIRE(bench->run("optimize-exchange-placement").ok);
    return bench;
  };
  const auto first = optimize(), second = optimize();
  std::vector<std::uint32_t> first_tiles, second_tiles;
  for (const Buffer& b : first->state.program.buffers) first_tiles.push_back(b.tile);
  for (const Buffer& b : second->state.program.buffers) second_tiles.push_back(b.tile);
  CHECK(first_tiles == second_tiles);
  CHECK(footprint(*first) == footprint(*second));
  CHECK(attempt_lines(*first) == attempt_lines(*second));
  CHECK_FALSE(attempt_lines(*first).empty());
}

TEST_CASE("optimize-exchange-placement's moved plan passes the numerical test on the simulator",
          "[optimize-exchange-placement][e2e]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  plan_with_exchanged_work(bench, "dense0.", 1, 13);
  REQUIRE(bench.run("optimize-exchange-placement").ok);
  REQUIRE(log_field(bench.log_lines("optimized exchange placement ")[0], "accepted") >= 1);
  for (const char* pass : {"place-storage", "lower-exchanges", "emit-tile-code"}) REQUIRE(bench.run(pass).ok);
  // The package as `tessera compile` finishes it, then run by the real simulator.
  Package& package = bench.state.package;
  package.compiler_version = kCoreVersion;
  package.target = bench.state.target;
  package.target_hash = bench.state.target.hash();
  package.graph = bench.state.model;
  package.superstep_labels.clear();
  for (const Superstep& step : bench.state.program.supersteps) package.superstep_labels.push_back(step.label);
  package.estimates = bench.state.estimates;
  tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "moved.tpkg").string();
  write_package(package, path);
  const auto ran = tessera::testing::run_command(
      {tessera::testing::tessera_binary(), "run", path, "--lock", (dir.path() / "device.lock").string()});
  INFO(ran.out << ran.err);
  CHECK(ran.exit_code == 0);
  CHECK_THAT(ran.out, Catch::Contains("numericalTest=PASS"));
}

TEST_CASE("optimize-exchange-placement refuses to run after place-storage", "[optimize-exchange-placement]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("place-storage").ok);
  const Status status = bench.run("optimize-exchange-placement");
  REQUIRE_FALSE(status.ok);
  CHECK_THAT(status.message, Catch::Contains("before place-storage"));
}

TEST_CASE("optimize-exchange-placement in a pipeline compiles and runs mlp-small on t16",
          "[optimize-exchange-placement][e2e]") {
  using namespace tessera::testing;
  TempDir dir;
  const std::string pipeline =
      pipeline_copy(dir, source_path("configs/pipelines/optimized.yaml"), "target: t1472", "target: t16");
  const std::string package = (dir.path() / "small.tpkg").string();
  const auto compiled = run_command(
      {tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", pipeline, "-o", package, "-v"});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK_THAT(compiled.err, Catch::Contains("optimized exchange placement units="));
  const auto ran = run_command({tessera_binary(), "run", package, "--lock", (dir.path() / "device.lock").string()});
  INFO(ran.out << ran.err);
  CHECK_THAT(ran.out, Catch::Contains("numericalTest=PASS"));
}
