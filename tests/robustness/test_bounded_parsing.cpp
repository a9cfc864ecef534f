// Inputs built to exhaust: YAML alias bombs, huge unknown names, one phase line listing every tile.
// Each must end in a clean error or result; the ctest timeout, not a timer, catches a regression.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

// A flow mapping of 1.2 KB that stands for 10^10 nodes: each level lists the one before ten times.
std::string alias_bomb() {
  std::string bomb = "{l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]";
  for (int level = 1; level < 10; ++level) {
    bomb += ", l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int copy = 0; copy < 10; ++copy) bomb += (copy ? ", *l" : "*l") + std::to_string(level - 1);
    bomb += "]";
  }
  return bomb + "}";
}

}  // namespace

TEST_CASE("bounded parsing refuses a YAML alias bomb in pipeline, model and target files", "[robustness][bounded]") {
  TempDir dir;
  const std::string bomb = alias_bomb();
  REQUIRE(bomb.size() < 1300);
  const std::string package = (dir.path() / "p.tpkg").string();
  // In a map-valued option, where the option's layout would walk every expanded node.
  const std::string pipeline =
      pipeline_with(dir, "options: {finalists: 2}", "options: {finalists: 2, bomb: " + bomb + "}");
  check_clean_failure(compile(kSmallModel, pipeline, package), {pipeline + ":9:", "alias bomb"}, dir.path(), "p.tpkg");
  count_bad_input_case();
  const std::string model = model_with(dir, "seed: 7", "seed: 7\nextra: " + bomb);
  check_clean_failure(compile(model, kSmallPipeline, package), {model + ":4:", "alias bomb"}, dir.path(), "p.tpkg");
  count_bad_input_case();
  const std::string target = target_with(dir, "tiles: 16", "tiles: 16\nextra: " + bomb);
  check_clean_failure(compile(kSmallModel, kSmallPipeline, package, {"--target", target}),
                      {target + ":4:", "alias bomb"}, dir.path(), "p.tpkg");
  count_bad_input_case();
  // An alias inside the node its anchor names would repeat forever.
  const std::string endless = model_with(dir, "seed: 7", "seed: 7\nextra: &loop [a, *loop]");
  check_clean_failure(compile(endless, kSmallPipeline, package), {endless + ":4:"}, dir.path(), "p.tpkg");
  count_bad_input_case();
  // A few small aliases stay allowed: the shared block is written once and used twice.
  const std::string shared =
      pipeline_with(dir, "options: {finalists: 2}", "options: &two {finalists: 2}", "shared.yaml");
  const CommandResult with_alias = compile(kSmallModel, shared, package);
  INFO(with_alias.err);
  CHECK(with_alias.exit_code == 0);
}

TEST_CASE("bounded parsing gives no suggestion for a huge unknown name", "[robustness][bounded]") {
  TempDir dir;
  const std::string package = (dir.path() / "p.tpkg").string();
  const std::string huge_name(150 * 1024, 'g');
  const std::string pipeline = pipeline_with(dir, "{plugin: greedy}", "{plugin: " + huge_name + "}");
  const CommandResult huge = compile(kSmallModel, pipeline, package);
  check_clean_failure(huge, {pipeline + ":6:", "unknown exchange scheduler"}, dir.path(), "p.tpkg");
  CHECK_THAT(huge.err, !Catch::Contains("did you mean"));
  count_bad_input_case();
  const std::string model = model_with(dir, "{op: matmul, inputs: [x, w0]", "{op: " + huge_name + ", inputs: [x, w0]");
  const CommandResult huge_op = compile(model, kSmallPipeline, package);
  check_clean_failure(huge_op, {model + ":11:", "unknown op"}, dir.path(), "p.tpkg");
  CHECK_THAT(huge_op.err, !Catch::Contains("did you mean"));
  count_bad_input_case();
  // A short typo still gets its suggestion.
  const std::string typo = pipeline_with(dir, "{plugin: greedy}", "{plugin: gredy}", "typo.yaml");
  CHECK_THAT(compile(kSmallModel, typo, package).err, Catch::Contains("did you mean 'greedy'?"));
}

TEST_CASE("bounded parsing reads a phase line listing 400k destinations", "[robustness][bounded]") {
  TempDir dir;
  constexpr std::uint32_t kDestinations = 400000;
  std::string line = "0 ";
  for (std::uint32_t tile = 1; tile <= kDestinations; ++tile) line += (tile > 1 ? "," : "") + std::to_string(tile);
  const auto schedule = [&](const std::string& phase) {
    return run_command(
        {tessera_binary(), "schedule", phase, "-t", source_path("configs/targets/t16.yaml"), "-s", "greedy"},
        {"TESSERA_PLUGIN_PATH="});
  };
  // The whole line is read; the phase is then too big for the 16-tile target.
  const std::string phase = dir.write("wide.txt", "tiles " + std::to_string(kDestinations + 1) + "\n" + line + " 1\n");
  check_clean_error(schedule(phase), {"the phase has 400001 tiles but target 't16' has 16"});
  count_bad_input_case();
  // A repeat at the very end is still found, with its column.
  const std::string repeated =
      dir.write("repeated.txt", "tiles " + std::to_string(kDestinations + 1) + "\n" + line + ",7 1\n");
  check_clean_error(schedule(repeated),
                    {repeated + ":2:" + std::to_string(line.size() + 2), "destination tile 7 is listed twice"});
  count_bad_input_case();
}

TEST_CASE("bounded parsing refuses a YAML file past 16 MiB before reading it", "[robustness][bounded]") {
  TempDir dir;
  const std::string package = (dir.path() / "p.tpkg").string();
  // 17 MiB of comments after a valid model: yaml-cpp would hold ~70 bytes per byte of it.
  std::string padding;
  padding.reserve(17u << 20);
  while (padding.size() < (17u << 20)) padding += "# " + std::string(77, 'x') + "\n";
  const std::string model = model_with(dir, "seed: 7", "seed: 7\n" + padding);
  const CommandResult r = compile(model, kSmallPipeline, package);
  check_clean_failure(r, {model + ":", "at most 16777216 (16 MiB)"}, dir.path(), "p.tpkg");
  count_bad_input_case();
}

TEST_CASE("bounded parsing in `tessera ab`: alias bombs in suites and overlays, huge unknown keys",
          "[robustness][bounded]") {
  TempDir dir;
  const std::string models = "models:\n  - {model: " + source_path("configs/models/mlp-small.yaml") +
                             ", target: " + source_path("configs/targets/t16.yaml") + "}\n";
  const std::string quiet_suite = dir.write("quick.yaml", "suite: quick\n" + models);
  const auto ab = [&](const std::string& suite, const std::string& overlay) {
    return run_command({tessera_binary(), "ab", "--base", kSmallPipeline, "--arm", "A=", "--arm", "B=" + overlay,
                        "--suite", suite, "--results", (dir.path() / "results").string(), "--quiet"});
  };
  const std::string overlay = source_path("configs/suites/arms/in-order.yaml");
  const std::string bomb_suite =
      dir.write("bomb-suite.yaml", "suite: quick\n" + models + "extra: " + alias_bomb() + "\n");
  check_clean_error(ab(bomb_suite, overlay), {bomb_suite + ":4:", "alias bomb"});
  const std::string bomb_overlay =
      dir.write("bomb-arm.yaml", "exchange_scheduler: {plugin: in-order}\nbomb: " + alias_bomb() + "\n");
  check_clean_error(ab(quiet_suite, bomb_overlay), {bomb_overlay + ":2:", "alias bomb"});
  // A 1,000-byte unknown key (yaml-cpp's longest plain key): no "did you mean" search, echoed in part only.
  const std::string huge_key(1000, 'm');
  const std::string huge_suite = dir.write("huge-key.yaml", "suite: quick\n" + models + huge_key + ": 1\n");
  const CommandResult huge = ab(huge_suite, overlay);
  check_clean_error(huge, {huge_suite + ":4:1: unknown key"});
  CHECK_THAT(huge.err, !Catch::Contains("did you mean"));
  CHECK(last_error_line(huge.err).size() < 400);
}

TEST_CASE("bounded parsing in the calibration table loader: an alias bomb is refused with its place",
          "[robustness][bounded]") {
  TempDir dir;
  const std::string table = dir.write("table.yaml", "calibration_table: 1\nbomb: " + alias_bomb() + "\n");
  const std::string pipeline = pipeline_with(dir, "cost_model: {plugin: analytic}",
                                             "cost_model: {plugin: calibrated, options: {table: " + table + "}}");
  const std::string package = (dir.path() / "p.tpkg").string();
  check_clean_failure(compile(kSmallModel, pipeline, package), {table + ":2:", "alias bomb"}, dir.path(), "p.tpkg");
}

TEST_CASE("bounded parsing refuses FIFOs and devices up front, and oversized phase and state files before reading",
          "[robustness][bounded]") {
  TempDir dir;
  const std::string fifo = (dir.path() / "pipe").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string package = (dir.path() / "p.tpkg").string();
  const std::string t16 = source_path("configs/targets/t16.yaml");
  // `timeout`: were a FIFO opened and read, the command would block forever; it must not.
  auto bounded = [](std::vector<std::string> command) {
    command.insert(command.begin(), {"/usr/bin/timeout", "60"});
    return run_command(command, {"TESSERA_PLUGIN_PATH="});
  };
  check_clean_failure(bounded({tessera_binary(), "compile", fifo, "-p", kSmallPipeline, "-o", package}),
                      {fifo + ": cannot read", "a named pipe"}, dir.path(), "p.tpkg");
  check_clean_failure(bounded({tessera_binary(), "compile", kSmallModel, "-p", fifo, "-o", package}),
                      {fifo + ": cannot read", "a named pipe"}, dir.path(), "p.tpkg");
  check_clean_failure(bounded({tessera_binary(), "compile", kSmallModel, "-p", "/dev/zero", "-o", package}),
                      {"/dev/zero: cannot read", "a character device"}, dir.path(), "p.tpkg");
  check_clean_error(bounded({tessera_binary(), "run", fifo}), {fifo + ": cannot read the package", "a named pipe"});
  check_clean_error(bounded({tessera_binary(), "schedule", fifo, "-t", t16, "-s", "greedy"}),
                    {fifo + ": cannot read the phase file", "a named pipe"});
  const CommandResult plugin = bounded({tessera_binary(), "check-plugin", fifo});
  count_bad_input_case();
  CHECK(plugin.exit_code == 1);
  CHECK_THAT(plugin.out, Catch::Contains(fifo + ": not a regular file (a named pipe"));

  // Sparse files: their size is refused before a byte is read, so the test costs no disk.
  const std::string phase = (dir.path() / "big-phase.txt").string();
  write_file(phase, "tiles 16\n");
  std::filesystem::resize_file(phase, (std::uintmax_t{64} << 20) + 1);
  check_clean_error(bounded({tessera_binary(), "schedule", phase, "-t", t16, "-s", "greedy"}),
                    {phase + ": 67108865 bytes; the phase file may hold at most 67108864 (64 MiB)"});
  const std::string state = (dir.path() / "big.tstate").string();
  write_file(state, "{");
  std::filesystem::resize_file(state, (std::uintmax_t{256} << 20) + 1);
  check_clean_error(bounded({tessera_binary(), "opt", state, "-p", kSmallPipeline, "--pass", "lower-mid", "--print"}),
                    {state + ": 268435457 bytes; the state file may hold at most 268435456 (256 MiB)"});
}

TEST_CASE("bounded parsing range-checks a target's floats before any cast", "[robustness][bounded]") {
  TempDir dir;
  const std::string package = (dir.path() / "p.tpkg").string();
  const struct {
    std::string from, to, complaint;
  } cases[] = {
      {"latency_per_column: 1.0", "latency_per_column: 1e19", "'latency_per_column' must be in 0..1000"},
      {"clock_hz: 1.325e9", "clock_hz: 1e300", "'clock_hz' must be at most 1e+12"},
      {"bytes_per_cycle: 23.8", "bytes_per_cycle: 1e30", "'bytes_per_cycle' must be above 0 and at most"},
      {"base_latency: 6", "base_latency: 4000000000", "'base_latency' must be at most 1000000"},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.to) {
      const std::string target = target_with(dir, c.from, c.to);
      check_clean_failure(compile(kSmallModel, kSmallPipeline, package, {"-t", target}), {target + ":", c.complaint},
                          dir.path(), "p.tpkg");
    }
  }
  // The analytic model's efficiency: 1e-20 made any phase cost more cycles than 64 bits hold.
  const std::string pipeline = pipeline_with(dir, "cost_model: {plugin: analytic}",
                                             "cost_model: {plugin: analytic, options: {exchange_efficiency: 1e-20}}");
  check_clean_failure(compile(kSmallModel, pipeline, package), {"exchange_efficiency", "[0.001, 1], got 1e-20"},
                      dir.path(), "p.tpkg");
}
