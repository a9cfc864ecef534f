// End-to-end: `tessera ab` and `tessera ab merge` through the real binary on the quick suite.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kNoExtraPlugins = {"TESSERA_PLUGIN_PATH="};

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

json read_json(const fs::path& path) { return json::parse(read_file(path)); }

// greedy (the base) against in-order over a suite, with the report files written beside `results`.
std::vector<std::string> ab_command(const std::string& base, const std::string& suite, const fs::path& results,
                                    std::vector<std::string> extra = {}, const std::string& second_arm = "in-order") {
  std::vector<std::string> command = {
      tessera_binary(), "ab",
      "--base",         base,
      "--arm",          "greedy=",
      "--arm",          second_arm + "=" + source_path("configs/suites/arms/" + second_arm + ".yaml"),
      "--suite",        suite,
      "--repeat",       "2",
      "--results",      results.string(),
      "--json",         results.string() + ".json",
      "--quiet"};
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

const json& find_comparison(const json& report, const std::string& arm, const std::string& metric) {
  for (const json& c : report["comparisons"])
    if (c["arm"] == arm && c["metric"] == metric) return c;
  FAIL("no comparison for " << arm << " " << metric);
  static json none;
  return none;
}

using ItemKey = std::tuple<std::string, std::string, int>;
std::set<ItemKey> items_with_status(const json& report, const std::string& status) {
  std::set<ItemKey> items;
  for (const json& item : report["items"]["list"])
    if (item["status"] == status) items.insert({item["model"], item["arm"], item["repeat"].get<int>()});
  return items;
}

std::size_t count_records(const fs::path& results) {
  std::size_t records = 0;
  for (const auto& file : fs::recursive_directory_iterator(results / "records"))
    records += file.path().extension() == ".json";
  return records;
}

}  // namespace

TEST_CASE("ab compares greedy with in-order on the quick suite and resumes", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite = source_path("configs/suites/quick.yaml");
  const fs::path results = dir.path() / "results";
  const fs::path html = dir.path() / "out/report.html", csv = dir.path() / "out/report.csv",
                 markdown = dir.path() / "out/r.md";
  auto r = run_command(ab_command(base, suite, results,
                                  {"--html", html.string(), "--csv", csv.string(), "--markdown", markdown.string(),
                                   "--warmup", "1", "--threads", "1"}),
                       kNoExtraPlugins);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json report = read_json(results.string() + ".json");

  // Both arms and the baseline's twin, every item done, one simulator run per distinct package.
  std::set<std::string> arms;
  for (const json& arm : report["arms"]) arms.insert(arm["name"]);
  CHECK(arms == std::set<std::string>{"greedy", "in-order", "greedy.twin"});
  CHECK(report["baseline"] == "greedy");
  CHECK(report["items"]["expected"] == 6);
  CHECK(report["items"]["present"] == 6);
  CHECK(report["items"]["failed"] == 0);
  CHECK(count_records(results) == 6);
  CHECK(report["driver"]["executed"] == 6);
  CHECK(report["driver"]["runs"] == 2);     // the twin's package equals greedy's: not run again
  CHECK(report["driver"]["warmups"] == 3);  // one per (model, arm), thrown away
  CHECK_THAT(r.err,
             Catch::Contains("ab progress: 1/6 items done, 0 failed, 0 skipped, elapsed ") &&
                 Catch::Contains(
                     "ab progress: 6/6 items done, 0 failed, 0 skipped, elapsed "));  // not a terminal: plain lines
  CHECK(report["warmup"] == 1);

  // Each record says where, under what load and with which build its compile was timed, and its CPU time.
  const json record = read_json(results / "records/mlp-small@t16/in-order/repeat-1.json");
  CHECK_FALSE(record["host"].get<std::string>().empty());
  CHECK(record["load_average"].get<double>() >= 0);
  CHECK(record["warmup"] == 1);
  CHECK(record["tessera"]["build_hash"] == report["tessera"]["build_hash"]);
  CHECK(record["compile"]["process"]["user_ms"].get<double>() > 0);
  const std::vector<std::string> compile = record["compile"]["process"]["command"];
  const auto threads = std::find(compile.begin(), compile.end(), "--threads");  // --threads passes through
  REQUIRE(threads != compile.end());
  CHECK(*std::next(threads) == "1");
  CHECK_THAT(read_file(results / "logs/mlp-small@t16/in-order/repeat-1.compile.log"), Catch::Contains(" threads=1"));
  REQUIRE(report["measured"]["hosts"].size() == 1);
  CHECK(report["measured"]["hosts"][0] == record["host"]);

  // Compile-time verdicts are on CPU time, held to the A-vs-A floor; wall time and the estimate are information.
  const json& cpu = find_comparison(report, "in-order", "compile_cpu_ms");
  CHECK(cpu["samples"].size() == 2);
  CHECK(cpu["noise_floor_log"].is_number());
  CHECK(find_comparison(report, "in-order", "compile_wall_ms")["verdict"] == "information");
  CHECK(find_comparison(report, "in-order", "estimated_cycles")["verdict"] == "information");

  // in-order schedules no shorter than greedy; the plan and the bound are the same.
  const json& scheduled = find_comparison(report, "in-order", "scheduled_exchange_cycles");
  CHECK(scheduled["value"].get<double>() >= scheduled["baseline"].get<double>());
  CHECK(find_comparison(report, "in-order", "exchange_lower_bound")["verdict"] == "same");
  CHECK(find_comparison(report, "in-order", "device_cycles")["value"].get<double>() > 0);
  const json& wall = find_comparison(report, "in-order", "compile_wall_ms");
  CHECK(wall["samples"].size() == 2);
  CHECK(wall["baseline_samples"].size() == 2);
  CHECK(wall["p_value"].is_number());
  for (const json& package : report["packages"])
    if (package["arm"] == "greedy.twin") CHECK(package["same_package_as_baseline"] == true);
  for (const json& floor : report["noise_floor"]) CHECK(floor["pairs"] == 2);
  for (const json& twin : report["twin_comparisons"])
    if (twin["metric"] == "scheduled_exchange_cycles") CHECK(twin["verdict"] == "same");

  // Per-phase drill-down: every phase of both arms with horizon >= lower bound.
  REQUIRE(report["phases"].size() == 1);
  REQUIRE_FALSE(report["phases"][0]["rows"].empty());
  for (const json& row : report["phases"][0]["rows"])
    for (const json& cell : row["cells"]) {
      REQUIRE(cell.is_object());
      CHECK(cell["horizon"].get<std::uint64_t>() >= cell["lower_bound"].get<std::uint64_t>());
      CHECK(cell["transfers"].get<std::uint64_t>() > 0);
    }
  CHECK(fs::exists(results / "phases/mlp-small@t16/in-order/repeat-0/phase-00000.txt"));

  // The other formats, and the merged pipelines a user can compile again.
  const std::string page = read_file(html);
  for (const char* id : {"id=\"ab-summary\"", "id=\"ab-models\"", "id=\"ab-noise\"", "id=\"ab-phases\"",
                         "class=\"ab-chart\"", "class=\"ab-phase-chart\"", "id=\"ab-data\""})
    CHECK_THAT(page, Catch::Contains(id));
  CHECK(page.find("http://") == page.find("http://www.w3.org/2000/svg"));  // no network: only the SVG namespace
  const std::string table = read_file(csv);
  CHECK(std::count(table.begin(), table.end(), '\n') == 1 + 2 * 10);  // header, (in-order + twin) x 10 metrics
  CHECK_THAT(read_file(markdown), Catch::Contains("## in-order vs greedy"));
  CHECK(fs::exists(results / "report.html"));
  auto again = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p",
                            (results / "arms/in-order.yaml").string(), "-o", (dir.path() / "again.tpkg").string()},
                           kNoExtraPlugins);
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("scheduled_exchange_cycles=" +
                                        std::to_string(static_cast<long>(scheduled["value"].get<double>())) + " "));
  // The same arm without `ab`: the base with the arm's overlay, merged as `ab` merges it.
  auto overlaid =
      run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", base, "--overlay",
                   source_path("configs/suites/arms/in-order.yaml"), "-o", (dir.path() / "overlaid.tpkg").string()},
                  kNoExtraPlugins);
  INFO(overlaid.err);
  CHECK(overlaid.exit_code == 0);
  CHECK_THAT(overlaid.out, Catch::Contains("scheduled_exchange_cycles=" +
                                           std::to_string(static_cast<long>(scheduled["value"].get<double>())) + " "));
  auto printed = run_command({tessera_binary(), "compile", "-p", base, "--overlay",
                              source_path("configs/suites/arms/in-order.yaml"), "--print-pipeline"},
                             kNoExtraPlugins);
  CHECK(printed.exit_code == 0);
  CHECK_THAT(printed.out, Catch::Contains("in-order"));
  const std::string typo = dir.write("typo.yaml", "exchange_sceduler: {plugin: in-order}\n");
  auto refused = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", base,
                              "--overlay", typo, "-o", (dir.path() / "typo.tpkg").string()},
                             kNoExtraPlugins);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("error: " + typo + ":1:1:") &&
                              Catch::Contains("did you mean 'exchange_scheduler'?") &&
                              Catch::Contains("[overlay " + typo + " merged onto " + base + "]"));
  CHECK_FALSE(fs::exists(dir.path() / "typo.tpkg"));

  SECTION("a second run resumes: nothing is compiled again") {
    auto resumed = run_command(ab_command(base, suite, results), kNoExtraPlugins);
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    const json second = read_json(results.string() + ".json");
    CHECK(second["driver"]["executed"] == 0);
    CHECK(second["driver"]["skipped"] == 6);
    CHECK(second["comparisons"] == report["comparisons"]);
    CHECK_THAT(resumed.out, Catch::Contains("ab: ran 0 work items now, reused 6 stored in " + results.string() +
                                            " (--fresh runs them again)"));
  }
  SECTION("--fresh runs every item again") {
    auto fresh = run_command(ab_command(base, suite, results, {"--fresh"}), kNoExtraPlugins);
    INFO(fresh.err);
    REQUIRE(fresh.exit_code == 0);
    CHECK(read_json(results.string() + ".json")["driver"]["executed"] == 6);
    CHECK_THAT(fresh.out, Catch::Contains("ab: ran 6 work items now, reused 0 stored in "));
  }
  SECTION("a missing record is redone, a record of another arm version is replaced") {
    fs::remove(results / "records/mlp-small@t16/in-order/repeat-1.json");
    const fs::path tampered = results / "records/mlp-small@t16/greedy/repeat-1.json";
    json record = read_json(tampered);
    record["arm_fingerprint"] = "0000000000000000";
    std::ofstream(tampered) << record.dump();
    auto resumed = run_command(ab_command(base, suite, results), kNoExtraPlugins);
    INFO(resumed.err);
    REQUIRE(resumed.exit_code == 0);
    const json second = read_json(results.string() + ".json");
    CHECK(second["driver"]["executed"] == 2);
    CHECK(second["driver"]["stale"] == 1);
    CHECK(second["items"]["present"] == 6);
    CHECK(read_json(tampered)["arm_fingerprint"] != "0000000000000000");
  }
  SECTION("a results directory of other arms is refused") {
    auto other = run_command(ab_command(base, suite, results, {}, "greedy-longest-first"), kNoExtraPlugins);
    CHECK(other.exit_code == 1);
    CHECK_THAT(other.err, Catch::Contains("error: " + results.string()) && Catch::Contains("other arms") &&
                              Catch::Contains("another --results"));
  }
}

TEST_CASE("ab shards merged equal the unsharded run, and merge refuses other suites", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite = source_path("configs/suites/quick.yaml");
  const fs::path whole = dir.path() / "whole", first = dir.path() / "shard1", second = dir.path() / "shard2";
  REQUIRE(run_command(ab_command(base, suite, whole), kNoExtraPlugins).exit_code == 0);
  auto one = run_command(ab_command(base, suite, first, {"--shard", "1/2"}), kNoExtraPlugins);
  auto two = run_command(ab_command(base, suite, second, {"--shard", "2/2"}), kNoExtraPlugins);
  INFO(one.err << two.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(two.exit_code == 0);
  const json shard_one = read_json(first.string() + ".json"), shard_two = read_json(second.string() + ".json");
  CHECK(shard_one["items"]["present"] == 3);
  CHECK(shard_two["items"]["present"] == 3);
  CHECK_THAT(shard_one["warnings"].dump(), Catch::Contains("tessera ab merge"));

  const fs::path merged_json = dir.path() / "merged.json";
  auto merged = run_command({tessera_binary(), "ab", "merge", first.string(), second.string(), "--json",
                             merged_json.string(), "--html", (dir.path() / "merged.html").string()},
                            kNoExtraPlugins);
  INFO(merged.err);
  REQUIRE(merged.exit_code == 0);
  const json report = read_json(merged_json), unsharded = read_json(whole.string() + ".json");
  CHECK(report["items"]["present"] == 6);
  CHECK(items_with_status(report, "ok") == items_with_status(unsharded, "ok"));
  CHECK(items_with_status(report, "ok").size() == 6);
  for (const char* metric : {"device_cycles", "scheduled_exchange_cycles", "exchange_lower_bound", "peak_tile_bytes"})
    CHECK(find_comparison(report, "in-order", metric)["value"] ==
          find_comparison(unsharded, "in-order", metric)["value"]);
  CHECK_THAT(merged.out, Catch::Contains("in-order vs greedy"));

  // A shard of another suite (same models, another name) cannot join.
  const std::string other_suite =
      dir.write("other.yaml", "suite: other\nmodels:\n  - {model: " + source_path("configs/models/mlp-small.yaml") +
                                  ", target: " + source_path("configs/targets/t16.yaml") + "}\n");
  const fs::path foreign = dir.path() / "foreign";
  REQUIRE(run_command(ab_command(base, other_suite, foreign, {"--shard", "2/2"}), kNoExtraPlugins).exit_code == 0);
  auto refused = run_command({tessera_binary(), "ab", "merge", first.string(), foreign.string()}, kNoExtraPlugins);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("error: " + fs::absolute(foreign).string() + ": cannot merge") &&
                              Catch::Contains("another suite"));
  // Nor a shard of other arms, or of another --repeat.
  const fs::path other_arms = dir.path() / "other-arms";
  REQUIRE(run_command(ab_command(base, suite, other_arms, {"--shard", "2/2"}, "greedy-longest-first"), kNoExtraPlugins)
              .exit_code == 0);
  refused = run_command({tessera_binary(), "ab", "merge", first.string(), other_arms.string()}, kNoExtraPlugins);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Catch::Contains("other arms"));
}

TEST_CASE("ab records a failing compile, reports the rest and exits 1", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  // mlp-b2-n3 does not fit on 16 tiles: every arm's compile of it fails, mlp-small's succeed.
  const std::string suite =
      dir.write("suite.yaml", "suite: mixed\nmodels:\n  - {model: " + source_path("configs/models/mlp-small.yaml") +
                                  ", target: " + source_path("configs/targets/t16.yaml") +
                                  "}\n  - {model: " + source_path("configs/models/mlp-b2-n3.yaml") +
                                  ", target: " + source_path("configs/targets/t16.yaml") + ", name: too-big}\n");
  const fs::path results = dir.path() / "results";
  auto r = run_command(ab_command(base, suite, results), kNoExtraPlugins);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("error: 6 of 12 work items failed"));
  const json report = read_json(results.string() + ".json");
  CHECK(report["items"]["failed"] == 6);
  CHECK_THAT(report["warnings"].dump(),
             Catch::Contains("too-big arm greedy: 2 of 2 work items failed; the first compile "
                             "failed (exit 1): error: ") &&
                 Catch::Contains("does not fit"));
  for (const json& c : report["comparisons"])
    CHECK(c["verdict"] == (c["model"] == "too-big" ? "missing" : c["verdict"].get<std::string>()));
  CHECK(find_comparison(report, "in-order", "scheduled_exchange_cycles")["model"] == "mlp-small@t16");

  // Bad command lines are one-line errors naming the problem.
  auto no_overlay = run_command({tessera_binary(), "ab", "--base", base, "--arm", "A=", "--arm", "B=missing.yaml",
                                 "--suite", suite, "--results", (dir.path() / "x").string()},
                                kNoExtraPlugins);
  CHECK(no_overlay.exit_code == 1);
  CHECK_THAT(no_overlay.err, Catch::Contains("error: --arm B=missing.yaml: overlay file not found"));
  auto bad_shard = run_command({tessera_binary(), "ab", "--base", base, "--arm", "A=", "--suite", suite, "--shard",
                                "3/2", "--results", (dir.path() / "y").string()},
                               kNoExtraPlugins);
  CHECK(bad_shard.exit_code == 1);
  CHECK_THAT(bad_shard.err, Catch::Contains("--shard 3/2"));
}

TEST_CASE("ab with --jobs 2 redoes only the model whose file changed, says so, and merge names the file", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string model_a = dir.write("models/a.yaml", read_file(source_path("configs/models/mlp-small.yaml")));
  const std::string model_b = dir.write("models/b.yaml", read_file(source_path("configs/models/mlp-small-f16.yaml")));
  const std::string target = source_path("configs/targets/t16.yaml");
  const std::string suite =
      dir.write("suite.yaml", "suite: two\nmodels:\n  - {model: models/a.yaml, target: " + target +
                                  "}\n  - {model: models/b.yaml, target: " + target + "}\n");
  const fs::path whole = dir.path() / "whole", half = dir.path() / "half";
  auto sweep = [&](const fs::path& results, std::vector<std::string> extra) {
    std::vector<std::string> command = ab_command(base, suite, results, {"--jobs", "2"});
    command[std::find(command.begin(), command.end(), "--repeat") - command.begin() + 1] = "1";
    command.insert(command.end(), extra.begin(), extra.end());
    return run_command(command, kNoExtraPlugins);
  };
  auto first = sweep(whole, {"-v"});
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  const json report = read_json(whole.string() + ".json");
  CHECK(report["items"]["present"] == 6);
  CHECK(report["driver"]["executed"] == 6);
  CHECK_THAT(first.err, Catch::Contains("local executor jobs=2 models=2 items=6"));
  CHECK((fs::exists(whole / "device-0.lock") || fs::exists(whole / "device-1.lock")));
  REQUIRE(sweep(half, {"--shard", "2/2"}).exit_code == 0);

  // The same bytes plus a comment: another model file, so its items are redone, the other model's kept.
  std::ofstream(model_a, std::ios::app) << "# edited\n";
  auto resumed = sweep(whole, {});
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  const json second = read_json(whole.string() + ".json");
  CHECK(second["driver"]["executed"] == 3);
  CHECK(second["driver"]["skipped"] == 3);
  CHECK_THAT(resumed.err, Catch::Contains("model a@t16: file " + model_a + " differs") &&
                              Catch::Contains("the items it touches are redone"));
  CHECK(find_comparison(second, "in-order", "device_cycles")["value"] ==
        find_comparison(report, "in-order", "device_cycles")["value"]);

  auto refused = run_command({tessera_binary(), "ab", "merge", whole.string(), half.string()}, kNoExtraPlugins);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err,
             Catch::Contains("cannot merge") && Catch::Contains("model a@t16: file " + model_a + " differs"));
}

TEST_CASE("ab refuses one arm alone and keeps its default results outside the source tree", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite = source_path("configs/suites/quick.yaml");
  auto alone = run_command(
      {tessera_binary(), "ab", "--base", base, "--arm", "mine=" + source_path("configs/suites/arms/in-order.yaml"),
       "--suite", suite, "--results", (dir.path() / "r").string()},
      kNoExtraPlugins);
  CHECK(alone.exit_code == 1);
  CHECK_THAT(alone.err, Catch::Contains("one arm only") && Catch::Contains("--arm base= --arm mine="));
  CHECK_FALSE(fs::exists(dir.path() / "r"));

  auto defaulted = run_command(
      {tessera_binary(), "ab", "--base", base, "--arm", "greedy=", "--arm",
       "in-order=" + source_path("configs/suites/arms/in-order.yaml"), "--suite", suite, "--repeat", "1", "--quiet"},
      {"TESSERA_PLUGIN_PATH=", "XDG_CACHE_HOME=" + (dir.path() / "cache").string(),
       "XDG_DATA_HOME=" + (dir.path() / "data").string()});
  INFO(defaulted.err);
  REQUIRE(defaulted.exit_code == 0);
  // The history database defaults to the XDG data folder, readable by its owner only.
  const fs::path database = dir.path() / "data/tessera/ab-history.sqlite";
  REQUIRE(fs::exists(database));
  CHECK((fs::status(database).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  std::size_t manifests = 0;
  for (const auto& entry : fs::directory_iterator(dir.path() / "cache/tessera/ab-results"))
    manifests += fs::exists(entry.path() / "manifest.json") && entry.path().filename().string().rfind("quick-", 0) == 0;
  CHECK(manifests == 1);
}

TEST_CASE("ab history records sweeps of two tessera builds and shows how a metric moved", "[ab][e2e][history]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite = source_path("configs/suites/quick.yaml");
  // Another build: the same binary with one byte more (so another build hash), beside the same plugins.
  const fs::path other = dir.path() / "other-build/tools";
  fs::create_directories(other);
  fs::copy_file(tessera_binary(), other / "tessera");
  std::ofstream(other / "tessera", std::ios::app) << '\n';
  fs::permissions(other / "tessera", fs::perms::owner_all, fs::perm_options::add);
  fs::create_directory_symlink(fs::path(TESSERA_BINARY_DIR) / "plugins", dir.path() / "other-build/plugins");
  fs::create_symlink(fs::path(TESSERA_BINARY_DIR) / "tools/tessera-plugin-host", other / "tessera-plugin-host");
  const fs::path database = dir.path() / "history/ab.sqlite";
  auto sweep = [&](const std::string& binary, const fs::path& results) {
    return run_command({binary, "ab", "--base", base, "--arm", "greedy=", "--arm",
                        "in-order=" + source_path("configs/suites/arms/in-order.yaml"), "--suite", suite, "--repeat",
                        "1", "--results", results.string(), "--history", database.string(), "--quiet", "-v"},
                       kNoExtraPlugins);
  };
  auto first = sweep(tessera_binary(), dir.path() / "first");
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  auto second = sweep((other / "tessera").string(), dir.path() / "second");
  INFO(second.err);
  REQUIRE(second.exit_code == 0);
  const std::string build_one = read_json(dir.path() / "first/report.json")["tessera"]["build_hash"];
  const std::string build_two = read_json(dir.path() / "second/report.json")["tessera"]["build_hash"];
  REQUIRE(build_one != build_two);
  CHECK_THAT(second.err, Catch::Contains("history recorded values=") && Catch::Contains("build=" + build_two));

  // Only its owner can read the database, or list its folder.
  const fs::perms others = fs::perms::group_all | fs::perms::others_all;
  CHECK((fs::status(database).permissions() & others) == fs::perms::none);
  CHECK((fs::status(database.parent_path()).permissions() & others) == fs::perms::none);

  auto history = run_command({tessera_binary(), "ab", "history", "device_cycles", "--model", "mlp-small@t16", "--arm",
                              "in-order", "--history", database.string()},
                             kNoExtraPlugins);
  INFO(history.err);
  REQUIRE(history.exit_code == 0);
  const std::string& table = history.out;
  CHECK_THAT(table, Catch::Contains("history of device_cycles for model mlp-small@t16"));
  REQUIRE(table.find(build_one) != std::string::npos);
  REQUIRE(table.find(build_two) != std::string::npos);
  CHECK(table.find(build_one) < table.find(build_two));                           // oldest first
  CHECK(std::count(table.begin(), table.end(), '\n') == 4);                       // title, header, one row per build
  CHECK(table.find("greedy ") == std::string::npos);                              // --arm in-order only
  CHECK_THAT(table, Catch::Contains(" first\n") && Catch::Contains(" +0.0%\n"));  // the same cycles from both builds

  auto unknown_metric = run_command(
      {tessera_binary(), "ab", "history", "cycles", "--model", "mlp-small@t16", "--history", database.string()});
  CHECK(unknown_metric.exit_code == 1);
  CHECK_THAT(unknown_metric.err, Catch::Contains("no metric cycles; the metrics are device_cycles"));
  auto unknown_model = run_command(
      {tessera_binary(), "ab", "history", "device_cycles", "--model", "mlp", "--history", database.string()});
  CHECK(unknown_model.exit_code == 1);
  CHECK_THAT(unknown_model.err,
             Catch::Contains("no values of device_cycles for model mlp; its models are mlp-small@t16"));
}

TEST_CASE("ab validates every arm's tables before the first item and reports a bad one once", "[ab][e2e]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string table = dir.write("arms/tables/t16.yaml", "not: [a calibration table\n");
  const std::string overlay = dir.write(
      "arms/calibrated.yaml", "cost_model: {plugin: calibrated, options: {table: \"tables/{target}.yaml\"}}\n");
  const fs::path results = dir.path() / "results";
  auto r = run_command({tessera_binary(), "ab", "--base", base, "--arm", "greedy=", "--arm", "calibrated=" + overlay,
                        "--suite", source_path("configs/suites/quick.yaml"), "--repeat", "3", "--results",
                        results.string(), "--history", (dir.path() / "history.sqlite").string()},
                       kNoExtraPlugins);
  CHECK(r.exit_code == 1);
  // One error naming the table and the arm's overlay; nothing compiled, no reproducer written.
  CHECK_THAT(r.err, Catch::Contains("error: ") && Catch::Contains(table) &&
                        Catch::Contains("[arm 'calibrated' (overlay " + overlay));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(results / "records"));
  std::size_t reproducers = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path()))
    reproducers += entry.path().filename() == "reproducers";
  CHECK(reproducers == 0);
}

TEST_CASE("ab compares arms on an ONNX model of a suite, with its own weights", "[ab][e2e][onnx]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string suite = dir.write(
      "suite.yaml", "suite: onnx\nmodels:\n  - {model: " + source_path("tests/onnx/data/mlp-b2-w64-n3/model.onnx") +
                        ", target: " + source_path("configs/targets/t16.yaml") + "}\n");
  const fs::path results = dir.path() / "results";
  const auto r = run_command(ab_command(base, suite, results), kNoExtraPlugins);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  const json report = read_json(results.string() + ".json");
  CHECK(report["items"]["failed"] == 0);
  const json& cycles = find_comparison(report, "in-order", "device_cycles");
  CHECK(cycles["model"] == "mlp-b2-w64-n3@t16");
  // The runs passed the numerical test against the reference, with the model's weights.
  std::size_t runs = 0;
  for (const auto& file : fs::recursive_directory_iterator(results))
    if (file.path().string().ends_with(".run.out")) {
      ++runs;
      CHECK_THAT(read_file(file.path()), Catch::Contains("numericalTest=PASS"));
    }
  CHECK(runs == 2);  // one per arm
}
