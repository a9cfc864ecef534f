// Arm overlays merged onto a base pipeline, arms validated by the core, and suite files.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>

#include <yaml-cpp/yaml.h>

#include "arms.hpp"
#include "tessera/overlay.hpp"
#include "suite.hpp"
#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"

using namespace tessera::ab;
using namespace tessera::overlay;
using tessera::testing::pipeline_copy;
using tessera::testing::source_path;
using tessera::testing::TempDir;

namespace {

const char* kBase = R"(pipeline: base
target: ../targets/t16.yaml
plugin_paths: [plugins]
cost_model: {plugin: analytic}
exchange_scheduler: {plugin: greedy, options: {order: longest-first}}
passes:
  - {plugin: lower-mid}
  - {plugin: select-finalist, options: {finalists: 2, mapping_candidates: 42}}
  - {plugin: place-storage}
  - {plugin: lower-exchanges}
  - {plugin: emit-tile-code}
)";

std::vector<std::string> pass_names(const YAML::Node& pipeline) {
  std::vector<std::string> names;
  for (const auto& pass : pipeline["passes"]) names.push_back(pass["plugin"].as<std::string>());
  return names;
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("overlay merges options into the pass it names and keeps the rest", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", kBase);
  const std::string overlay =
      dir.write("arms/one.yaml", "passes:\n  - {plugin: select-finalist, options: {finalists: 1}}\n");
  const MergedPipeline merged = merge_pipeline_overlay(base, overlay);
  const YAML::Node pipeline = YAML::Load(merged.yaml);
  CHECK(pass_names(pipeline) ==
        std::vector<std::string>{"lower-mid", "select-finalist", "place-storage", "lower-exchanges", "emit-tile-code"});
  CHECK(pipeline["passes"][1]["options"]["finalists"].as<int>() == 1);
  CHECK(pipeline["passes"][1]["options"]["mapping_candidates"].as<int>() == 42);  // untouched option kept
  CHECK(pipeline["exchange_scheduler"]["options"]["order"].as<std::string>() == "longest-first");
  REQUIRE(merged.changes.size() == 1);
  CHECK(merged.changes[0] == "pass select-finalist: finalists=1");
}

TEST_CASE("overlay naming another plugin replaces the entry and its options", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", kBase);
  const MergedPipeline swapped =
      merge_pipeline_overlay(base, dir.write("swap.yaml", "exchange_scheduler: {plugin: in-order}\n"));
  const YAML::Node pipeline = YAML::Load(swapped.yaml);
  CHECK(pipeline["exchange_scheduler"]["plugin"].as<std::string>() == "in-order");
  CHECK_FALSE(pipeline["exchange_scheduler"]["options"].IsDefined());  // greedy's order means nothing to in-order
  CHECK(swapped.changes == std::vector<std::string>{"exchange_scheduler: greedy -> in-order"});

  const MergedPipeline option =
      merge_pipeline_overlay(base, dir.write("option.yaml", "exchange_scheduler: {options: {order: phase-order}}\n"));
  const YAML::Node same_plugin = YAML::Load(option.yaml);
  CHECK(same_plugin["exchange_scheduler"]["plugin"].as<std::string>() == "greedy");
  CHECK(same_plugin["exchange_scheduler"]["options"]["order"].as<std::string>() == "phase-order");

  const MergedPipeline cost = merge_pipeline_overlay(base, dir.write("cost.yaml", "cost_model: {plugin: analytic}\n"));
  CHECK(cost.changes.empty());  // naming the same plugin without options changes nothing
}

TEST_CASE("overlay inserts and removes passes by name", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", kBase);
  const std::string overlay = dir.write("edit.yaml", R"(passes:
  - {plugin: place-storage, remove: true}
  - {plugin: optimize-exchange-placement, after: lower-exchanges, options: {rounds: 3}}
  - {plugin: check-graph, before: lower-mid}
)");
  const YAML::Node pipeline = YAML::Load(merge_pipeline_overlay(base, overlay).yaml);
  CHECK(pass_names(pipeline) == std::vector<std::string>{"check-graph", "lower-mid", "select-finalist",
                                                         "lower-exchanges", "optimize-exchange-placement",
                                                         "emit-tile-code"});
  CHECK(pipeline["passes"][4]["options"]["rounds"].as<int>() == 3);
}

TEST_CASE("overlay errors name the overlay file, line and a fix", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", kBase);
  const std::string unknown_pass = dir.write("a.yaml", "# comment\npasses:\n  - {plugin: fuse-everything}\n");
  std::string message = error_of([&] { merge_pipeline_overlay(base, unknown_pass); });
  CHECK_THAT(message, Catch::StartsWith(unknown_pass + ":3:5:"));
  CHECK_THAT(message, Catch::Contains("not in the base pipeline") && Catch::Contains("after: NAME"));

  const std::string typo = dir.write("b.yaml", "exchange_sceduler: {plugin: in-order}\n");
  message = error_of([&] { merge_pipeline_overlay(base, typo); });
  CHECK_THAT(message, Catch::StartsWith(typo + ":1:1:") && Catch::Contains("did you mean 'exchange_scheduler'?"));

  const std::string target = dir.write("c.yaml", "target: ../targets/t1472.yaml\n");
  message = error_of([&] { merge_pipeline_overlay(base, target); });
  CHECK_THAT(message, Catch::StartsWith(target + ":1:9:") && Catch::Contains("the suite"));

  const std::string remove_missing = dir.write("d.yaml", "passes:\n  - {plugin: nothing, remove: true}\n");
  message = error_of([&] { merge_pipeline_overlay(base, remove_missing); });
  CHECK_THAT(message, Catch::Contains("cannot remove pass 'nothing'") && Catch::Contains("lower-mid"));

  const std::string bad_yaml = dir.write("e.yaml", "passes: [\n");
  CHECK_THAT(error_of([&] { merge_pipeline_overlay(base, bad_yaml); }), Catch::StartsWith(bad_yaml + ":"));

  // A list as a key was an internal error (yaml-cpp's bad conversion) before overlays used the SDK's reader.
  const std::string list_key = dir.write("f.yaml", "[a]: 1\n");
  CHECK_THAT(error_of([&] { merge_pipeline_overlay(base, list_key); }),
             Catch::StartsWith(list_key + ":1:1: a key must be a plain name"));
}

TEST_CASE("overlay paths resolve against the file that wrote them", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", kBase);
  const std::string overlay = dir.write("elsewhere/arm.yaml", "plugin_paths: [my-plugins]\n");
  const YAML::Node pipeline = YAML::Load(merge_pipeline_overlay(base, overlay).yaml);
  CHECK(pipeline["target"].as<std::string>() == (dir.path() / "targets/t16.yaml").string());
  REQUIRE(pipeline["plugin_paths"].size() == 2);
  CHECK(pipeline["plugin_paths"][0].as<std::string>() == (dir.path() / "pipelines/plugins").string());
  CHECK(pipeline["plugin_paths"][1].as<std::string>() == (dir.path() / "elsewhere/my-plugins").string());
  // No overlay, or an empty one: the base itself (paths made absolute).
  const std::string empty = dir.write("empty.yaml", "# nothing to change\n");
  CHECK(merge_pipeline_overlay(base, empty).yaml == merge_pipeline_overlay(base, "").yaml);
  CHECK(merge_pipeline_overlay(base, "").changes.empty());
}

TEST_CASE("arms are validated by the core and fingerprinted by what they run", "[ab][overlay]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  const std::string in_order = source_path("configs/suites/arms/in-order.yaml");
  const std::vector<PreparedArm> arms =
      prepare_arms(base, {{"A", ""}, {"B", in_order}, {"C", in_order}}, (dir.path() / "staging").string());
  REQUIRE(arms.size() == 4);
  CHECK(arms[3].info.name == "A.twin");
  CHECK(arms[3].info.twin_of == "A");
  CHECK(arms[3].info.fingerprint == arms[0].info.fingerprint);
  CHECK(arms[1].info.fingerprint == arms[2].info.fingerprint);  // same plugins and options
  CHECK(arms[0].info.fingerprint != arms[1].info.fingerprint);
  CHECK_THAT(arms[1].yaml, Catch::Contains("tessera compile MODEL -p THIS_FILE"));

  // Defaults count: spelling out greedy's default order gives the same arm as the base.
  const std::string explicit_default =
      dir.write("default-order.yaml", "exchange_scheduler: {options: {order: load-first}}\n");
  const auto same = prepare_arms(base, {{"A", ""}, {"D", explicit_default}}, (dir.path() / "staging").string());
  CHECK(same[1].info.fingerprint == same[0].info.fingerprint);

  // A merged pipeline the core refuses names the arm and the overlay.
  const std::string wrong_type =
      dir.write("wrong.yaml", "passes:\n  - {plugin: select-finalist, options: {finalists: many}}\n");
  const std::string message = error_of([&] {
    prepare_arms(base, {{"A", ""}, {"W", wrong_type}}, (dir.path() / "s").string());
  });
  CHECK_THAT(message, Catch::Contains("finalists") && Catch::Contains("arm 'W'") && Catch::Contains(wrong_type));
  // An option out of its declared range, and one the plugin's own configure() refuses, are
  // caught before anything compiles, at their place in the overlay that wrote them.
  const std::string zero = dir.write("zero.yaml", "passes:\n  - {plugin: select-finalist, options: {finalists: 0}}\n");
  CHECK_THAT(
      error_of([&] {
        prepare_arms(base, {{"A", ""}, {"Z", zero}}, (dir.path() / "s").string());
      }),
      Catch::Contains(zero + ":2:") && Catch::Contains("must be in [1, 100000], got 0") && Catch::Contains("arm 'Z'"));
  const std::string no_table = dir.write("no-table.yaml", "cost_model: {plugin: calibrated}\n");
  CHECK_THAT(
      error_of([&] {
        prepare_arms(base, {{"A", ""}, {"C", no_table}}, (dir.path() / "s").string());
      }),
      Catch::Contains(no_table + ":1:") && Catch::Contains("option 'table' is not set") && Catch::Contains("arm 'C'"));
  CHECK_THAT(error_of([] { parse_arm_argument("B"); }), Catch::Contains("NAME=OVERLAY.yaml"));
  CHECK_THAT(error_of([] { parse_arm_argument("a/b="); }), Catch::Contains("letters, digits"));
  CHECK_THAT(error_of([&] {
               prepare_arms(base, {{"A", ""}, {"A", ""}}, (dir.path() / "s").string());
             }),
             Catch::Contains("two arms"));
}

TEST_CASE("suite files list models and targets relative to themselves", "[ab][suite]") {
  const Suite quick = load_suite(source_path("configs/suites/quick.yaml"));
  CHECK(quick.name == "quick");
  REQUIRE(quick.entries.size() == 1);
  CHECK(quick.entries[0].id == "mlp-small@t16");
  CHECK(quick.entries[0].model == source_path("configs/models/mlp-small.yaml"));
  CHECK(quick.fingerprint == load_suite(source_path("configs/suites/quick.yaml")).fingerprint);
  const Suite full = load_suite(source_path("configs/suites/default.yaml"));
  CHECK(full.entries.size() > quick.entries.size());
  CHECK(full.fingerprint != quick.fingerprint);

  TempDir dir;
  const std::string models = source_path("configs/models/"), targets = source_path("configs/targets/");
  const std::string duplicate = dir.write(
      "dup.yaml", "suite: dup\nmodels:\n  - {model: " + models + "mlp-small.yaml, target: " + targets +
                      "t16.yaml}\n  - {model: " + models + "mlp-small.yaml, target: " + targets + "t16.yaml}\n");
  CHECK_THAT(error_of([&] { load_suite(duplicate); }),
             Catch::StartsWith(duplicate + ":4:") && Catch::Contains("name:"));
  const std::string missing =
      dir.write("missing.yaml", "models:\n  - {model: nowhere.yaml, target: " + targets + "t16.yaml}\n");
  CHECK_THAT(error_of([&] { load_suite(missing); }),
             Catch::StartsWith(missing + ":2:") && Catch::Contains("relative to the suite file"));
  const std::string renamed = dir.write(
      "named.yaml", "- {model: " + models + "mlp-small.yaml, target: " + targets + "t16.yaml, name: small}\n");
  CHECK(load_suite(renamed).entries[0].id == "small");
  CHECK(load_suite(renamed).name == "named");  // a bare list takes the file's name

  // An ONNX model is an entry like a YAML one: checked by importing it, named after its folder
  // when it is a `model.onnx`; a file that is not a model is refused naming it.
  const std::string onnx = source_path("tests/onnx/data/mlp-b2-w64-n3/model.onnx");
  const Suite with_onnx =
      load_suite(dir.write("onnx.yaml", "models:\n  - {model: " + onnx + ", target: " + targets + "t16.yaml}\n"));
  CHECK(with_onnx.entries[0].id == "mlp-b2-w64-n3@t16");
  CHECK(with_onnx.entries[0].model == onnx);
  const std::string corrupt = dir.write("corrupt/model.onnx", std::string("\x08\x07garbage", 9));
  CHECK_THAT(error_of([&] {
               load_suite(dir.write("bad-onnx.yaml",
                                    "models:\n  - {model: " + corrupt + ", target: " + targets + "t16.yaml}\n"));
             }),
             Catch::Contains(corrupt));
  CHECK(load_suite(source_path("configs/suites/default.yaml")).entries.back().id == "mlp-b2-w64-n3-onnx");

  // sbatch defaults for `--executor slurm`; a misspelt key is named.
  const std::string entry = "models:\n  - {model: " + models + "mlp-small.yaml, target: " + targets + "t16.yaml}\n";
  const Suite cluster =
      load_suite(dir.write("cluster.yaml", "slurm: {partition: compute, time: \"2:00:00\", mem: 4G}\n" + entry));
  CHECK(cluster.slurm.partition == "compute");
  CHECK(cluster.slurm.time == "2:00:00");
  CHECK(cluster.slurm.mem == "4G");
  CHECK(cluster.slurm.account.empty());
  const std::string misspelt = dir.write("misspelt.yaml", "slurm: {partitoin: compute}\n" + entry);
  CHECK_THAT(error_of([&] { load_suite(misspelt); }),
             Catch::StartsWith(misspelt + ":1:") && Catch::Contains("partitoin"));
}

TEST_CASE("path options resolve against the file that wrote them", "[ab][overlay]") {
  TempDir dir;
  const std::string base = dir.write("pipelines/base.yaml", std::string(kBase) + "# cost model table below\n");
  const std::string with_table =
      dir.write("pipelines/calibrated.yaml",
                std::string(kBase).replace(std::string(kBase).find("{plugin: analytic}"), 18,
                                           "{plugin: calibrated, options: {table: tables/base.yaml}}"));
  const std::string overlay =
      dir.write("arms/arm.yaml", "cost_model: {options: {table: \"../tables/{target}.yaml\"}}\n");
  const auto is_path = [](const std::string& plugin, const std::string& option) {
    return plugin == "calibrated" && option == "table";
  };
  // The base's own table, relative to the base; the overlay's, relative to the overlay.
  CHECK(YAML::Load(merge_pipeline_overlay(with_table, "", is_path).yaml)["cost_model"]["options"]["table"]
            .as<std::string>() == (dir.path() / "pipelines/tables/base.yaml").string());
  const YAML::Node merged = YAML::Load(merge_pipeline_overlay(with_table, overlay, is_path).yaml);
  CHECK(merged["cost_model"]["options"]["table"].as<std::string>() == (dir.path() / "tables/{target}.yaml").string());
  // A plugin swapped in by the overlay: its path options are the overlay's too.
  const std::string swap = dir.write("arms/swap.yaml", "cost_model: {plugin: calibrated, options: {table: t.yaml}}\n");
  CHECK(YAML::Load(merge_pipeline_overlay(base, swap, is_path).yaml)["cost_model"]["options"]["table"]
            .as<std::string>() == (dir.path() / "arms/t.yaml").string());
  // Options that are not paths stay as written.
  CHECK(YAML::Load(merge_pipeline_overlay(base, "", is_path).yaml)["passes"][1]["options"]["finalists"].as<int>() == 2);
}

TEST_CASE("an arm's fingerprint covers the bytes of the tables its options name", "[ab][overlay]") {
  TempDir dir;
  const std::string base = pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy");
  // A real table: the arm's cost model loads it for each suite target before anything runs.
  const std::string table = (dir.path() / "arms/tables/t16.yaml").string();
  const std::string t16 = source_path("configs/targets/t16.yaml");
  const tessera::testing::CommandResult calibrated = tessera::testing::run_command(
      {tessera::testing::tessera_binary(), "--log-level", "warn", "calibrate", "--target", t16, "-o", table});
  INFO(calibrated.err);
  REQUIRE(calibrated.exit_code == 0);
  const std::string overlay = dir.write(
      "arms/calibrated.yaml", "cost_model: {plugin: calibrated, options: {table: \"tables/{target}.yaml\"}}\n");
  const std::vector<tessera::Target> targets{tessera::load_target(t16)};
  auto prepare = [&] {
    return prepare_arms(base, {{"A", ""}, {"C", overlay}}, (dir.path() / "staging").string(), targets);
  };
  const std::vector<PreparedArm> before = prepare();
  bool listed = false;
  for (const ArmInput& input : before[1].info.inputs) listed = listed || input.path == table;
  CHECK(listed);  // {target} expanded, relative to the overlay
  CHECK(prepare()[1].info.fingerprint == before[1].info.fingerprint);

  std::ofstream(table, std::ios::app) << "# re-calibrated\n";  // other bytes, the same table
  const std::vector<PreparedArm> after = prepare();
  CHECK(after[1].info.fingerprint != before[1].info.fingerprint);
  CHECK(after[0].info.fingerprint == before[0].info.fingerprint);  // the base reads no table

  // Resume and merge name the file that differs.
  Manifest old_manifest, new_manifest;
  old_manifest.suite_name = new_manifest.suite_name = "s";
  for (const PreparedArm& arm : before) old_manifest.arms.push_back(arm.info);
  for (const PreparedArm& arm : after) new_manifest.arms.push_back(arm.info);
  const std::vector<std::string> changes = manifest_changes(old_manifest, new_manifest);
  REQUIRE(changes.size() == 1);
  CHECK_THAT(changes[0], Catch::StartsWith("arm C: file " + table + " differs"));
  CHECK_THAT(manifest_mismatch(new_manifest, old_manifest, true),
             Catch::Contains("another version of an arm") && Catch::Contains(table));
  CHECK(changed_inputs(new_manifest).empty());
  CHECK_THAT(changed_inputs(old_manifest).front(), Catch::StartsWith(table + " (was "));
}
