// The `calibrated` cost model and `tessera calibrate`: the table reproduces fresh simulator
// measurements, the plugin's estimate of a compiled model, and its errors.
#include <catch2/catch.hpp>

#include "plugin_testing.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "calibration.hpp"
#include "run_command.hpp"
#include "shipped_target.hpp"
#include "temp_dir.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"
#include "tessera/testing/battery.hpp"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::unique_ptr<CostModel> make_model(const std::string& table) {
  const PluginInfo* info = shipped_plugins().find("calibrated");
  REQUIRE(info != nullptr);
  Options given;
  given.values["table"] = table;
  return shipped_plugins().create_cost_model(*info, shipped_plugins().resolve_options(*info, given, "test"));
}

std::uint64_t number(const std::string& text, const std::string& key) {
  std::smatch match;
  if (!std::regex_search(text, match, std::regex("(?:^|\\s)" + key + "=(\\d+)"))) FAIL("no " << key << " in: " << text);
  return std::stoull(match[1]);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// One calibration of t16 shared by the tests of this file (about a second).
const std::string& t16_table() {
  static TempDir dir;
  static const std::string path = [] {
    const std::string table = (dir.path() / "t16.yaml").string();
    const CommandResult result =
        run_command({tessera_binary(), "--log-level", "warn", "calibrate", "--target",
                     source_path("configs/targets/t16.yaml"), "-o", table, "--lock", (dir.path() / "lock").string()});
    INFO(result.out << result.err);
    REQUIRE(result.exit_code == 0);
    CHECK_THAT(result.out, Catch::Contains("calibration table=" + table + " target=t16 scheduler=greedy codelets=" +
                                           std::to_string(tessera::kCodeletCount)));
    return table;
  }();
  return path;
}

}  // namespace

TEST_CASE("calibrated loads through the plugin host with a path option", "[calibrated]") {
  const PluginInfo* info = shipped_plugins().find("calibrated");
  REQUIRE(info != nullptr);
  CHECK(info->kind == PluginKind::cost_model);
  REQUIRE(info->options.size() == 1);
  CHECK(info->options[0].name == "table");
  CHECK(info->options[0].type == OptionType::path);
}

TEST_CASE("calibrated passes the check-plugin cost-model battery on the target it was calibrated for",
          "[calibrated][battery]") {
  // A table is per target and the model refuses others, so t16 replaces the built-in target.
  BatteryOptions options = unit_test_battery_options();
  options.extra_target = shipped_target("t16");
  options.builtin_targets = false;
  const BatteryResult result = cost_model_battery([] { return make_model(t16_table()); }, options);
  CHECK(result.checks.size() == 11);
  check_battery(result);
}

TEST_CASE("calibrate on t16 fits formulas that reproduce fresh simulator measurements", "[calibrated]") {
  const calibration::Table table = calibration::read_table(t16_table(), "tessera calibrate");
  const Target target = shipped_target("t16");
  CHECK(table.target == "t16");
  CHECK(table.target_hash == target.hash());
  CHECK(table.codelets.size() == kCodeletCount);
  for (const auto& [name, formula] : table.codelets) {
    INFO(name);
    CHECK(formula.max_relative_error < 0.01);  // the codelet features describe the machine
  }
  CHECK(table.exchange.max_relative_error < 0.25);

  // Fresh measurements: a model the microbenchmarks never ran, at its own shapes.
  TempDir dir;
  const std::string package = (dir.path() / "model.tpkg").string(), profile = (dir.path() / "profile.json").string();
  const std::string phases = (dir.path() / "phases").string();
  CommandResult compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-b4-n3-w512.yaml"),
                                        "-p", pipeline_copy(dir, source_path("configs/pipelines/small.yaml")), "-o",
                                        package, "--emit-phases", phases});
  REQUIRE(compiled.exit_code == 0);
  CommandResult ran =
      run_command({tessera_binary(), "run", package, "--profile", profile, "--lock", (dir.path() / "lock").string()});
  REQUIRE(ran.exit_code == 0);
  std::ifstream in(profile);
  const nlohmann::json measured = nlohmann::json::parse(in);

  // Per superstep: the exchange formula against the simulated phase, the barrier as charged.
  std::size_t phases_checked = 0;
  for (const auto& step : measured["supersteps"]) {
    const std::size_t index = step["index"].get<std::size_t>();
    CHECK(step["sync_cycles"].get<double>() == Approx(table.barrier_cycles));
    const std::string phase_file = phases + "/" + phase_file_name(index);
    if (step["exchange_cycles"].get<std::uint64_t>() == 0) continue;
    const ExchangePhase phase = read_phase_file(phase_file);
    const double predicted = table.exchange.cycles(calibration::exchange_features(phase, target));
    INFO("superstep " << index);
    CHECK(predicted == Approx(step["exchange_cycles"].get<double>()).epsilon(0.10));
    ++phases_checked;
  }
  CHECK(phases_checked >= 2);
}

TEST_CASE("calibrated estimates mlp-small on t16 within 10% of the simulator", "[calibrated]") {
  TempDir dir;
  const std::string pipeline = pipeline_copy(dir, source_path("configs/pipelines/calibrated.yaml"),
                                             "../../build/calibration/{target}.yaml", t16_table());
  const std::string package = (dir.path() / "model.tpkg").string();
  CommandResult compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p",
                                        pipeline, "-t", source_path("configs/targets/t16.yaml"), "-o", package});
  INFO(compiled.out << compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CommandResult ran = run_command({tessera_binary(), "run", package, "--lock", (dir.path() / "lock").string()});
  REQUIRE(ran.exit_code == 0);
  const double estimated = double(number(compiled.out, "estimated_cycles"));
  const double simulated = double(number(ran.out, "device_cycles"));
  CHECK(std::abs(estimated - simulated) / simulated <= 0.10);
}

TEST_CASE("calibrated resolves its table against the pipeline file", "[calibrated]") {
  TempDir dir;
  const std::string pipeline =
      pipeline_copy(dir, source_path("configs/pipelines/calibrated.yaml"), "../../build/calibration/", "tables/");
  const CommandResult printed = run_command({tessera_binary(), "compile", "--print-pipeline", "-p", pipeline});
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  CHECK_THAT(printed.out, Catch::Contains("table: \"" + (dir.path() / "tables").string() + "/{target}.yaml\""));
}

TEST_CASE("calibrated explains a missing, foreign or incomplete table", "[calibrated]") {
  TempDir dir;
  Program program;
  program.buffers.push_back(Buffer{"b", 0, 64});
  program.supersteps.push_back(Superstep{"relu", {CodeletCall{0, Codelet::relu, {{0, 0}}, {16}}}, {}, {}, {}});

  // No table at all: say the command that makes it.
  const std::string missing = (dir.path() / "none.yaml").string();
  CHECK_THAT(error_of([&] { make_model(missing)->estimate(program, shipped_target("t16")); }),
             Catch::Contains("plugin 'calibrated'") && Catch::Contains(missing + " not found") &&
                 Catch::Contains("tessera calibrate --target " + source_path("configs/targets/t16.yaml")));

  // A table of t16 used for t1472: name both, say how to calibrate for t1472.
  CHECK_THAT(error_of([&] { make_model(t16_table())->estimate(program, shipped_target("t1472")); }),
             Catch::Contains("measured on target 't16'") && Catch::Contains("this compile is for target 't1472'") &&
                 Catch::Contains("tessera calibrate --target " + source_path("configs/targets/t1472.yaml")));

  // {target} picks the table by the target's name.
  const std::string by_name = (std::filesystem::path(t16_table()).parent_path() / "{target}.yaml").string();
  CHECK(make_model(by_name)->estimate(program, shipped_target("t16")).compute_cycles > 0);

  // A table without the relu formula: the error names the codelet and the superstep.
  std::ifstream in(t16_table());
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto relu = text.find("  relu:");
  REQUIRE(relu != std::string::npos);
  text.erase(relu, text.find("max_relative_error", relu) - relu);
  text.erase(relu, text.find('\n', relu) + 1 - relu);
  const std::string incomplete = dir.write("incomplete.yaml", text);
  CHECK(make_model(incomplete)->estimate(Program{}, shipped_target("t16")).total() == 0);
  CHECK_THAT(error_of([&] { make_model(incomplete)->estimate(program, shipped_target("t16")); }),
             Catch::Contains("has no formula for codelet 'relu'") && Catch::Contains("superstep 'relu'"));

  // No table option: configure refuses, naming the option.
  const PluginInfo* info = shipped_plugins().find("calibrated");
  CHECK_THAT(error_of([&] {
               shipped_plugins().create_cost_model(*info, shipped_plugins().resolve_options(*info, {}, "test"));
             }),
             Catch::Contains("option 'table' is not set"));
}
