// `tessera tune`: the option space, the configurations drawn from it, successive halving, and
// the binary end to end on two small models.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tune.hpp"

using namespace tessera::testing;
using namespace tessera::ab;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir.path() / name;
  std::ofstream(path) << text;
  return path.string();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string space_error(const std::string& text) {
  TempDir dir;
  const std::string path = write(dir, "space.yaml", text);
  try {
    load_space(path);
  } catch (const tessera::Error& e) {
    return std::string(e.what()).substr(path.size());  // the place onwards
  }
  return "no error";
}

const char* kSpace = R"(space:
  - {slot: exchange_scheduler, plugins: [in-order, greedy]}
  - {slot: exchange_scheduler, plugin: greedy, option: order, choices: [load-first, longest-first]}
  - {pass: select-finalist, option: finalists, range: [1, 3]}
)";

}  // namespace

TEST_CASE("a tuning space names slots, passes, options and their values", "[ab][tune]") {
  TempDir dir;
  const Space space = load_space(write(dir, "space.yaml", kSpace));
  REQUIRE(space.dimensions.size() == 3);
  CHECK(space.dimensions[0].name == "exchange_scheduler");
  CHECK(space.dimensions[0].choices == std::vector<std::string>{"in-order", "greedy"});
  CHECK(space.dimensions[1].name == "exchange_scheduler[greedy].order");
  CHECK(space.dimensions[2].name == "select-finalist.finalists");
  CHECK(space.dimensions[2].is_range);
  CHECK(space.dimensions[2].integer);
  CHECK_THAT(space.dimensions[2].place, Catch::EndsWith("space.yaml:4:5"));

  CHECK_THAT(space_error("space:\n  - {slot: exchange_scheduler, pass: greedy, plugins: [a]}\n"),
             Catch::StartsWith(":2:5: give exactly one of slot"));
  CHECK_THAT(space_error("space:\n  - {pass: select-finalist, option: finalists, choises: [1]}\n"),
             Catch::Contains("choices"));
  CHECK_THAT(space_error("space:\n  - {pass: select-finalist, option: finalists, range: [4, 1]}\n"),
             Catch::StartsWith(":2:55: range [4, 1] is empty"));
  CHECK_THAT(space_error("space:\n  - {pass: p, option: o, range: [0, 8], scale: log}\n"),
             Catch::Contains("log-scale range must be above 0"));
  CHECK_THAT(
      space_error("space:\n  - {slot: cost_model, plugins: [analytic]}\n  - {slot: cost_model, plugin: calibrated, "
                  "option: table, choices: [a.yaml]}\n"),
      Catch::StartsWith(":3:5: cost_model[calibrated].table applies when calibrated fills cost_model") &&
          Catch::Contains("do not include it"));
  CHECK_THAT(space_error("space:\n  - {pass: p, option: o, choices: [1, 1]}\n"), Catch::Contains("1 is listed twice"));
  CHECK_THAT(space_error("space: []\n"), Catch::Contains("non-empty list"));
}

TEST_CASE("a small space is listed whole; a large one is drawn, the same for the same seed", "[ab][tune]") {
  TempDir dir;
  const Space space = load_space(write(dir, "space.yaml", kSpace));
  // in-order x 3 finalists + greedy x 2 orders x 3 finalists: the order applies to greedy only.
  const std::vector<Configuration> all = draw_configurations(space, 100, 1);
  REQUIRE(all.size() == 9);
  std::set<std::string> described;
  for (const Configuration& c : all) {
    described.insert(describe(space, c));
    CHECK(c.values[1].has_value() == (c.values[0] == std::string("greedy")));
  }
  CHECK(described.size() == 9);
  CHECK(all.front().id == "c01");
  CHECK(described.count("exchange_scheduler=greedy exchange_scheduler[greedy].order=longest-first "
                        "select-finalist.finalists=3") == 1);

  const std::vector<Configuration> five = draw_configurations(space, 5, 7);
  CHECK(five.size() == 5);
  std::set<std::string> distinct;
  for (const Configuration& c : five) distinct.insert(describe(space, c));
  CHECK(distinct.size() == 5);
  const std::vector<Configuration> again = draw_configurations(space, 5, 7);
  for (std::size_t i = 0; i < five.size(); ++i) CHECK(describe(space, again[i]) == describe(space, five[i]));

  const Space wide = load_space(write(dir, "wide.yaml",
                                      "space:\n  - {pass: p, option: n, range: [1, 1000000], scale: log}\n"
                                      "  - {pass: p, option: f, range: [0.25, 0.75]}\n"));
  for (const Configuration& c : draw_configurations(wide, 50, 3)) {
    const long long n = std::stoll(*c.values[0]);
    const double f = std::stod(*c.values[1]);
    CHECK((n >= 1 && n <= 1000000));
    CHECK((f >= 0.25 && f <= 0.75));
  }
}

TEST_CASE("a configuration's overlay sets the slot's plugin, its options and each pass's options once", "[ab][tune]") {
  TempDir dir;
  const Space space = load_space(write(
      dir, "space.yaml", std::string(kSpace) + "  - {pass: select-finalist, option: orientation, choices: [as_is]}\n"));
  const Configuration c{"c01", {"greedy", "longest-first", "2", "as_is"}};
  CHECK(overlay_yaml(space, c, "# h\n") ==
        "# h\n"
        "exchange_scheduler:\n  plugin: greedy\n  options:\n    order: longest-first\n"
        "passes:\n  - plugin: select-finalist\n    options:\n      finalists: 2\n"
        "      orientation: as_is\n");
}

TEST_CASE("successive halving keeps 1/eta and gives the survivors eta times the models", "[ab][tune]") {
  const std::vector<Rung> rungs = halving_schedule(16, 14, 3, 1);
  REQUIRE(rungs.size() == 3);
  CHECK((rungs[0].configurations == 16 && rungs[0].models == 2 && rungs[0].repeat == 1));
  CHECK((rungs[1].configurations == 6 && rungs[1].models == 5));
  CHECK((rungs[2].configurations == 2 && rungs[2].models == 14));
  CHECK(halving_schedule(1, 14, 3, 1).empty());  // one configuration: nothing to rank
  const std::vector<Rung> noisy = halving_schedule(9, 9, 3, 5);
  REQUIRE(noisy.size() == 2);
  CHECK((noisy[0].repeat == 2 && noisy[1].repeat == 5 && noisy[1].models == 9));
  CHECK(spread_models(14, 2) == std::vector<std::size_t>{0, 7});
  CHECK(spread_models(3, 5) == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("tune finds that greedy beats in-order, writes it as an overlay, A/Bs it, and resumes", "[ab][tune][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite =
      write(dir, "suite.yaml",
            "suite: tune-test\nmodels:\n"
            "  - {model: " +
                source_path("configs/models/mlp-small.yaml") + ", target: " + source_path("configs/targets/t16.yaml") +
                "}\n"
                "  - {model: " +
                source_path("configs/models/mlp-small-f16.yaml") +
                ", target: " + source_path("configs/targets/t16.yaml") + "}\n");
  // in-order first, so the draw's order alone cannot make greedy win.
  const std::string space = write(dir, "space.yaml",
                                  "space:\n  - {slot: exchange_scheduler, plugins: [in-order, greedy]}\n"
                                  "  - {pass: select-finalist, option: finalists, choices: [1, 2]}\n");
  const fs::path results = dir.path() / "tune";
  const std::vector<std::string> command = {tessera_binary(), "tune",
                                            "--base",         base,
                                            "--space",        space,
                                            "--suite",        suite,
                                            "--eta",          "2",
                                            "--repeat",       "2",
                                            "--results",      results.string(),
                                            "--out",          (dir.path() / "best.yaml").string(),
                                            "--history",      (dir.path() / "history.sqlite").string(),
                                            "--quiet"};
  const std::vector<std::string> environment = {"TESSERA_PLUGIN_PATH="};
  auto r = run_command(command, environment);
  INFO(r.err << r.out);
  REQUIRE(r.exit_code == 0);

  const json tune = json::parse(read_file(results / "tune.json"));
  REQUIRE(tune["configurations"].size() == 4);
  REQUIRE(tune["rungs"].size() == 2);  // 4 configurations on 1 model, the best 2 on both
  CHECK(tune["rungs"][0]["models"].size() == 1);
  CHECK(tune["rungs"][1]["models"].size() == 2);
  const json& first = tune["rungs"][0]["standings"];
  REQUIRE(first.size() == 4);
  std::set<std::string> kept;
  for (const json& s : tune["rungs"][1]["standings"]) kept.insert(s["configuration"]);
  CHECK(kept == std::set<std::string>{"c03", "c04"});  // greedy's two: in-order schedules longer on mlp-small
  for (const json& s : first)
    if (s["configuration"] == "c01" || s["configuration"] == "c02") CHECK(s["ratio"].get<double>() > 1.0);

  const std::string best = read_file(results / "best.yaml");
  CHECK_THAT(best,
             Catch::Contains("plugin: greedy") && Catch::StartsWith("# tessera tune: the best of 4 configurations"));
  CHECK(read_file(dir.path() / "best.yaml") == best);
  CHECK_THAT(r.out, Catch::Contains("tune: best c03") || Catch::Contains("tune: best c04"));

  // The final A/B: base, best and the base's twin on the whole suite, two compiles each.
  fs::path final_report;
  for (const auto& entry : fs::directory_iterator(results))
    if (entry.path().filename().string().rfind("final-", 0) == 0) final_report = entry.path() / "report.json";
  REQUIRE(fs::exists(final_report));
  const json report = json::parse(read_file(final_report));
  CHECK(report["items"]["present"] == 12);
  CHECK(report["items"]["failed"] == 0);
  CHECK(report["baseline"] == "base");

  // Run again: every item is found done, nothing is compiled.
  auto again = run_command(command, environment);
  INFO(again.err);
  REQUIRE(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("tune: ran 0 work items now, reused 12 stored in "));
  CHECK(json::parse(read_file(final_report))["driver"]["executed"] == 0);
}

TEST_CASE("tune refuses a space value the plugin refuses, before any item runs, naming the space", "[ab][tune][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string space =
      write(dir, "space.yaml", "space:\n  - {pass: select-finalist, option: finalists, choices: [0, 1]}\n");
  const fs::path results = dir.path() / "tune";
  auto r = run_command(
      {tessera_binary(), "tune", "--base", base, "--space", space, "--suite", source_path("configs/suites/quick.yaml"),
       "--results", results.string(), "--history", (dir.path() / "history.sqlite").string()},
      {"TESSERA_PLUGIN_PATH="});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("finalists") && Catch::Contains("the configurations are drawn from " + space +
                                                                    ":2:5 (select-finalist.finalists)"));
  bool any_record = false;
  for (const auto& entry : fs::recursive_directory_iterator(results))
    any_record |= entry.path().extension() == ".json" && entry.path().parent_path().filename() != "overlays" &&
                  entry.path().filename() != "tune.json";
  CHECK_FALSE(any_record);
}
