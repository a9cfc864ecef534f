// Pipeline YAML: strict parsing, plugin resolution, option types, pass order, printing.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include "tessera/diagnostic.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::pipeline_copy;
using tessera::testing::source_path;
using tessera::testing::TempDir;

// A pipeline in a temp dir that points at the shipped target and the built plugins.
static std::string write_pipeline(const TempDir& dir, const std::string& body) {
  std::string text = "pipeline: test\ntarget: " + source_path("configs/targets/t16.yaml") + "\nplugin_paths: [" +
                     std::string(TESSERA_PLUGIN_DIR) + "]\n" + body;
  return dir.write("pipeline.yaml", text);
}

static const char* kPasses =
    "passes:\n"
    "  - {plugin: lower-mid}\n"
    "  - {plugin: select-finalist, options: {finalists: 3}}\n"
    "  - {plugin: place-storage}\n"
    "  - {plugin: lower-exchanges}\n"
    "  - {plugin: emit-tile-code}\n";

TEST_CASE("pipeline default resolves every plugin with defaults filled in", "[pipeline]") {
  TempDir dir;
  PipelineSpec spec = load_pipeline(pipeline_copy(dir, source_path("configs/pipelines/default.yaml")));
  CHECK(spec.name == "default");
  CHECK(spec.target == source_path("configs/targets/t1472.yaml"));
  PluginHost host;
  resolve_pipeline(spec, host);
  CHECK(spec.passes.size() == 5);
  CHECK(spec.passes[1].options.get_int("finalists") == 2);
  CHECK(spec.cost_model.plugin == "analytic");
}

TEST_CASE("pipeline printed form loads again to the same pipeline", "[pipeline]") {
  TempDir dir;
  PipelineSpec spec = load_pipeline(pipeline_copy(dir, source_path("configs/pipelines/default.yaml")));
  PluginHost host;
  resolve_pipeline(spec, host);
  std::string printed = print_pipeline(spec);
  PipelineSpec again = load_pipeline(dir.write("printed.yaml", printed));
  PluginHost host2;
  resolve_pipeline(again, host2);
  CHECK(print_pipeline(again) == printed);
  CHECK(again.passes[1].options.values == spec.passes[1].options.values);
}

TEST_CASE("pipeline unknown key is an error with line and column", "[pipeline]") {
  TempDir dir;
  auto file = write_pipeline(
      dir, "cost_model: {plugin: analytic}\nexchange_schedular: {plugin: greedy}\n" + std::string(kPasses));
  CHECK_THROWS_WITH(load_pipeline(file),
                    Catch::Contains(file + ":5:1") &&
                        Catch::Contains("unknown key 'exchange_schedular'; did you mean 'exchange_scheduler'?"));
}

TEST_CASE("pipeline unknown plugin lists the available ones and suggests the nearest", "[pipeline]") {
  TempDir dir;
  auto file = write_pipeline(
      dir, "cost_model: {plugin: analytic}\nexchange_scheduler: {plugin: gredy}\n" + std::string(kPasses));
  PipelineSpec spec = load_pipeline(file);
  PluginHost host;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host), Catch::Contains(file + ":5:21") &&
                                                      Catch::Contains("did you mean 'greedy'?") &&
                                                      Catch::Contains("available: greedy, in-order"));
}

TEST_CASE("pipeline wrong option type names the option's place", "[pipeline]") {
  TempDir dir;
  std::string passes = kPasses;
  passes.replace(passes.find("finalists: 3"), 12, "finalists: two");
  auto file = write_pipeline(dir, "cost_model: {plugin: analytic}\nexchange_scheduler: {plugin: greedy}\n" + passes);
  PipelineSpec spec = load_pipeline(file);
  PluginHost host;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host),
                    Catch::Contains(file + ":8:41") &&
                        Catch::Contains("option 'finalists' of plugin 'select-finalist' must be int, got 'two'"));
  passes = kPasses;
  passes.replace(passes.find("finalists: 3"), 12, "finalist: 3");
  file = write_pipeline(dir, "cost_model: {plugin: analytic}\nexchange_scheduler: {plugin: greedy}\n" + passes);
  spec = load_pipeline(file);
  PluginHost host2;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host2),
                    Catch::Contains("unknown option 'finalist'") && Catch::Contains("did you mean 'finalists'?"));
}

TEST_CASE("pipeline pass before its input is produced is an error", "[pipeline]") {
  TempDir dir;
  auto file =
      write_pipeline(dir,
                     "cost_model: {plugin: analytic}\nexchange_scheduler: {plugin: greedy}\n"
                     "passes:\n  - {plugin: lower-mid}\n  - {plugin: place-storage}\n  - {plugin: select-finalist}\n");
  PipelineSpec spec = load_pipeline(file);
  PluginHost host;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host), Catch::Contains(file + ":8:5") &&
                                                      Catch::Contains("pass 'place-storage' requires 'plan'") &&
                                                      Catch::Contains("select-finalist"));
}

TEST_CASE("pipeline plugin of the wrong kind is named as such", "[pipeline]") {
  TempDir dir;
  auto file = write_pipeline(
      dir, "cost_model: {plugin: greedy}\nexchange_scheduler: {plugin: greedy}\n" + std::string(kPasses));
  PipelineSpec spec = load_pipeline(file);
  PluginHost host;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host),
                    Catch::Contains("unknown cost model 'greedy': 'greedy' is of kind exchange scheduler"));
}

TEST_CASE("pipeline paths are relative to the pipeline file", "[pipeline]") {
  TempDir dir;
  auto file =
      dir.write("sub/p.yaml",
                "target: ../nowhere/t.yaml\ncost_model: analytic\nexchange_scheduler: greedy\npasses: [lower-mid]\n");
  CHECK_THROWS_WITH(load_pipeline(file),
                    Catch::Contains(file + ":1:9") && Catch::Contains((dir.path() / "nowhere/t.yaml").string()));
}

TEST_CASE("pipeline map option keeps nested YAML laid out at its places, prints and type-checks", "[pipeline]") {
  TempDir dir;
  auto file = write_pipeline(dir,
                             "cost_model: analytic\nexchange_scheduler: greedy\n"
                             "passes:\n"
                             "  - {plugin: lower-mid}\n"
                             "  - plugin: select-finalist\n"
                             "    options:\n"
                             "      plans:\n"
                             "        y0: {column_groups: 2, \"depth groups\": 4}\n"
                             "        h1:\n"
                             "          column_groups: 8\n");
  PipelineSpec spec = load_pipeline(file);
  PluginHost host;
  resolve_pipeline(spec, host);
  const MapOption& plans = spec.passes[1].options.get_map("plans");
  // The text parses back to the same mapping, every node at its own line and column.
  const YAML::Node node = YAML::Load(plans.yaml);
  CHECK(node["y0"]["depth groups"].as<int>() == 4);
  CHECK(plans.place(node["y0"]["depth groups"].Mark().line, node["y0"]["depth groups"].Mark().column) ==
        file + ":11:48");
  for (const auto& entry : node)
    if (entry.first.Scalar() == "h1")
      CHECK(plans.place(entry.first.Mark().line, entry.first.Mark().column) == file + ":12:9");
  CHECK(plans.place(node["h1"]["column_groups"].Mark().line, node["h1"]["column_groups"].Mark().column) ==
        file + ":13:26");
  // Printed on one line, and loaded again to the same mapping.
  CHECK(option_value_text(plans) == "{y0: {column_groups: 2, \"depth groups\": 4}, h1: {column_groups: 8}}");
  PipelineSpec again = load_pipeline(dir.write("printed.yaml", print_pipeline(spec)));
  PluginHost host2;
  resolve_pipeline(again, host2);
  CHECK(YAML::Dump(YAML::Load(again.passes[1].options.get_map("plans").yaml)) == YAML::Dump(node));
  // A mapping given to an int option, and a scalar to a map option, are type errors at the option.
  auto bad = write_pipeline(
      dir, std::string("cost_model: analytic\nexchange_scheduler: greedy\n") +
               "passes:\n  - {plugin: lower-mid}\n  - {plugin: select-finalist, options: {finalists: {a: 1}}}\n");
  spec = load_pipeline(bad);
  PluginHost host3;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host3),
                    Catch::Contains(bad + ":8:41") && Catch::Contains("must be int, got '{a: 1}'"));
  bad =
      write_pipeline(dir, std::string("cost_model: analytic\nexchange_scheduler: greedy\n") +
                              "passes:\n  - {plugin: lower-mid}\n  - {plugin: select-finalist, options: {plans: 3}}\n");
  spec = load_pipeline(bad);
  PluginHost host4;
  CHECK_THROWS_WITH(resolve_pipeline(spec, host4),
                    Catch::Contains(bad + ":8:41") && Catch::Contains("must be map, got '3'"));
}
