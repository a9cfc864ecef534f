// End-to-end: `--json` records of compile, run and schedule, and the compile's `--time-report`.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/exchange.hpp"

using namespace tessera::testing;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

// The value of `key=` on the command's result line.
std::uint64_t printed(const std::string& out, const std::string& key) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("(^| )" + key + "=(\\d+)")));
  return std::stoull(m[2]);
}

}  // namespace

TEST_CASE("compile, run and schedule write --json records equal to what they print", "[e2e][json]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  const std::string compile_json = (dir.path() / "compile.json").string();
  const std::string pipeline = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  auto compiled =
      run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", pipeline, "-o",
                   package, "--json", compile_json, "--time-report", "--emit-phases", dir.path().string()});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  const json c = read_json(compile_json);
  CHECK(c["schema"] == "tessera.compile/1");
  for (const char* key : {"tiles", "supersteps", "estimated_cycles", "scheduled_exchange_cycles",
                          "exchange_lower_bound", "peak_tile_bytes", "compile_ms"})
    CHECK(c[key].get<std::uint64_t>() == printed(compiled.out, key));

  // One timing per pass, in pipeline order; lower-exchanges called the scheduler once a phase.
  std::vector<std::string> passes;
  for (const json& t : c["passes"]) passes.push_back(t["pass"]);
  CHECK(passes ==
        std::vector<std::string>{"lower-mid", "select-finalist", "place-storage", "lower-exchanges", "emit-tile-code"});
  const json& lowering = c["passes"][3];
  REQUIRE_FALSE(c["schedules"].empty());
  CHECK(lowering["scheduler_calls"] == c["schedules"].size());
  CHECK(lowering["cost_model_calls"] == 0);
  CHECK(c["passes"][1]["cost_model_calls"].get<std::uint64_t>() > 0);  // select-finalist costs its candidates
  std::uint64_t horizons = 0;
  for (const json& s : c["schedules"]) {
    CHECK(s["scheduler"] == "greedy");
    CHECK(s["horizon"].get<std::uint64_t>() >= s["lower_bound"].get<std::uint64_t>());
    CHECK(s["lower_bound"].get<std::uint64_t>() >= s["endpoint_lower_bound"].get<std::uint64_t>());
    horizons += s["horizon"].get<std::uint64_t>();
  }
  CHECK(horizons == c["scheduled_exchange_cycles"].get<std::uint64_t>());
  bool phases_counted = false;
  for (const json& s : c["statistics"])
    if (s["pass"] == "lower-exchanges" && s["name"] == "phases") {
      CHECK(s["value"].get<double>() == static_cast<double>(c["schedules"].size()));
      phases_counted = true;
    }
  CHECK(phases_counted);
  std::set<std::uint64_t> planned;
  for (const json& p : c["plans"]) CHECK(planned.insert(p["op"].get<std::uint64_t>()).second);
  CHECK_FALSE(planned.empty());
  // The time report: a row per pass and a total, on stderr after the compile.
  for (const char* row : {"\nlower-mid ", "\nselect-finalist ", "\nlower-exchanges ", "\ntotal "})
    CHECK_THAT(compiled.err, Catch::Contains(row));

  const std::string run_json = (dir.path() / "run.json").string();
  auto ran = run_command(
      {tessera_binary(), "run", package, "--json", run_json, "--lock", (dir.path() / "device.lock").string()});
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  const json r = read_json(run_json);
  CHECK(r["schema"] == "tessera.run/1");
  for (const char* key : {"device_cycles", "compute_cycles", "exchange_cycles", "sync_cycles", "host_cycles"})
    CHECK(r[key].get<std::uint64_t>() == printed(ran.out, key));
  CHECK(r["numerics"]["passed"] == true);

  const std::string schedule_json = (dir.path() / "schedule.json").string();
  const std::string phase =
      (dir.path() / tessera::phase_file_name(c["schedules"][0]["phase"].get<std::size_t>())).string();
  auto scheduled = run_command({tessera_binary(), "schedule", phase, "-t", source_path("configs/targets/t16.yaml"),
                                "-s", "greedy", "--json", schedule_json});
  INFO(scheduled.err);
  REQUIRE(scheduled.exit_code == 0);
  const json s = read_json(schedule_json);
  CHECK(s["schema"] == "tessera.schedule/1");
  for (const char* key : {"transfers", "endpoint_lower_bound", "lower_bound", "horizon", "segments"})
    CHECK(s[key].get<std::uint64_t>() == printed(scheduled.out, key));
  CHECK(s["horizon"] == c["schedules"][0]["horizon"]);
}

TEST_CASE("--json refuses to overwrite an input and writes nothing", "[e2e][json]") {
  TempDir dir;
  const std::string model = dir.write("model.yaml", [] {
    std::ifstream in(source_path("configs/models/mlp-small.yaml"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }());
  const std::string package = (dir.path() / "small.tpkg").string();
  auto r = run_command({tessera_binary(), "compile", model, "-p", source_path("configs/pipelines/small.yaml"), "-o",
                        package, "--json", model});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("error: ") && Catch::Contains("--json"));
  CHECK_FALSE(std::filesystem::exists(package));
}
