// The plugin host: real plugins load through Boost.DLL; faulty ones are refused by name.
#include <catch2/catch.hpp>

#include <filesystem>

#include "tessera/cost_model.hpp"
#include <spdlog/spdlog.h>

#include "tessera/diagnostic.hpp"
#include "tessera/pass.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::TempDir;

static std::string test_plugin(const std::string& name) {
  return std::string(TESSERA_BINARY_DIR) + "/test-plugins/" + name;
}

TEST_CASE("plugin host loads every shipped plugin with its manifest", "[plugins]") {
  PluginHost host;
  host.load_directory(TESSERA_PLUGIN_DIR);
  for (const char* name : {"lower-mid", "select-finalist", "place-storage", "lower-exchanges", "emit-tile-code"}) {
    const PluginInfo* info = host.find(name);
    REQUIRE(info != nullptr);
    CHECK(info->kind == PluginKind::pass);
    CHECK(info->api_major == kPluginApiMajor);
    CHECK(info->abi_tag == abi_tag());
    CHECK(!info->provided_facts.empty());
  }
  REQUIRE(host.find("greedy"));
  CHECK(host.find("greedy")->kind == PluginKind::exchange_scheduler);
  REQUIRE(host.find("in-order"));
  REQUIRE(host.find("analytic"));
  CHECK(host.find("analytic")->kind == PluginKind::cost_model);
  // Loading the same directory again is a no-op, not a duplicate.
  host.load_directory(TESSERA_PLUGIN_DIR);
}

TEST_CASE("plugin host refuses another API major, naming the file and both versions", "[plugins]") {
  PluginHost host;
  CHECK_THROWS_WITH(
      host.load_directory(test_plugin("abi-major")),
      Catch::Contains("test-abi-major.so") && Catch::Contains("plugin has 99." + std::to_string(kPluginApiMinor) +
                                                              ", host supports 2." + std::to_string(kPluginApiMinor)));
}

TEST_CASE("plugin host refuses a library without the entry point", "[plugins]") {
  PluginHost host;
  CHECK_THROWS_WITH(host.load_directory(test_plugin("no-entry")),
                    Catch::Contains("no-entry.so: not a Tessera plugin") && Catch::Contains("tessera_plugin_manifest"));
}

TEST_CASE("plugin host refuses a file that is not a shared library before dlopen; a scan skips it", "[plugins]") {
  TempDir dir;
  const std::string fake = dir.write("fake.so", "this is not an ELF file\n");
  PluginHost host;
  CHECK_THROWS_WITH(host.load_file(fake), Catch::Contains("fake.so: not an ELF file"));
  PluginHost scanner;
  scanner.load_directory(dir.path().string());
  REQUIRE(scanner.skipped_library("fake") != nullptr);
  CHECK_THAT(*scanner.skipped_library("fake"), Catch::Contains("fake.so: not an ELF file"));
  CHECK_THAT(scanner.unknown_plugin_message("fake", PluginKind::pass),
             Catch::Contains("cannot load pass 'fake': ") && Catch::Contains("fake.so: not an ELF file"));
}

TEST_CASE("plugin host reports duplicate names with both files", "[plugins]") {
  PluginHost host;
  host.load_directory(TESSERA_PLUGIN_DIR);
  CHECK_THROWS_WITH(host.load_directory(test_plugin("duplicate-greedy")),
                    Catch::Contains("duplicate plugin name 'greedy'") && Catch::Contains("/greedy.so") &&
                        Catch::Contains("test-duplicate-greedy.so"));
}

TEST_CASE("plugin host catches an exception thrown by plugin code and names the plugin", "[plugins]") {
  PluginHost host;
  const PluginInfo& info = host.load_file(test_plugin("throwing-pass/test-throwing-pass.so"));
  auto pass = host.create_pass(info, host.resolve_options(info, {}, "test"));
  CompilationState state;
  host.load_directory(TESSERA_PLUGIN_DIR);
  auto model = host.create_cost_model(*host.find("analytic"), host.resolve_options(*host.find("analytic"), {}, "test"));
  auto scheduler = host.create_scheduler(*host.find("greedy"), host.resolve_options(*host.find("greedy"), {}, "test"));
  auto logger = spdlog::default_logger();
  PassContext context{state.target, *model, *scheduler, *logger, "test", 2000, 1, nullptr, {}, nullptr, "test", {}};
  Status status = pass->run(state, context);
  CHECK_FALSE(status.ok);
  CHECK_THAT(status.message,
             Catch::Contains("plugin 'throwing-pass': run threw: deliberate failure inside the plugin"));
}

TEST_CASE("plugin host validates schedules and names the plugin and the conflict", "[plugins]") {
  PluginHost host;
  const PluginInfo& info = host.load_file(test_plugin("invalid-scheduler/test-invalid-scheduler.so"));
  auto scheduler = host.create_scheduler(info, host.resolve_options(info, {}, "test"));
  Target target;
  target.tiles = 4;
  ExchangePhase phase;
  phase.tiles = 4;
  phase.transfers.push_back({0, {1}, 5, 0, {0}});
  phase.transfers.push_back({0, {2}, 5, 0, {0}});  // same sender at the same cycles
  CHECK_THROWS_WITH(scheduler->schedule(phase, target, 100), Catch::Contains("plugin 'all-at-once'") &&
                                                                 Catch::Contains("invalid schedule") &&
                                                                 Catch::Contains("tile 0"));
}

TEST_CASE("plugin host creates only the declared kind and checks option types", "[plugins]") {
  PluginHost host;
  host.load_directory(TESSERA_PLUGIN_DIR);
  const PluginInfo& greedy = *host.find("greedy");
  CHECK_THROWS_WITH(host.create_pass(greedy, {}),
                    Catch::Contains("plugin 'greedy': is of kind exchange scheduler, not pass"));
  const PluginInfo& planner = *host.find("select-finalist");
  Options given;
  given.values["finalists"] = std::string("many");
  CHECK_THROWS_WITH(host.resolve_options(planner, given, "here"),
                    Catch::Contains("here: option 'finalists'") && Catch::Contains("must be int"));
  given.values["finalists"] = std::string("4");
  CHECK(host.resolve_options(planner, given, "here").get_int("finalists") == 4);
}

TEST_CASE("plugin host finds plugins on TESSERA_PLUGIN_PATH", "[plugins]") {
  setenv("TESSERA_PLUGIN_PATH", (std::string("/nonexistent-dir:") + TESSERA_PLUGIN_DIR).c_str(), 1);
  PluginHost host;
  CHECK_THROWS_WITH(host.load_environment_paths(), Catch::Contains("/nonexistent-dir: plugin path is not a directory"));
  setenv("TESSERA_PLUGIN_PATH", TESSERA_PLUGIN_DIR, 1);
  PluginHost host2;
  host2.load_environment_paths();
  CHECK(host2.find("greedy"));
  unsetenv("TESSERA_PLUGIN_PATH");
}

TEST_CASE("plugin host loads a plugin built against API 2.0 and places its own refusal of an option",
          "[plugins][options]") {
  PluginHost host;
  const PluginInfo& old = host.load_file(test_plugin("old-api/test-old-api.so"));
  CHECK(old.api_minor == 0);
  REQUIRE(old.options.size() == 2);
  CHECK(old.options[0].name == "penalty");
  CHECK(option_limits_text(old.options[0]).empty());
  Options given;
  given.values["penalty"] = std::string("-1");  // no range declared: the loader lets it through
  given.places["penalty"] = "old.yaml:4:30";
  const Options resolved = host.resolve_options(old, given, "old.yaml:4:13");
  CHECK(resolved.places.at("mode") == "old.yaml:4:13");
  CHECK_THROWS_WITH(host.create_cost_model(old, resolved),
                    Catch::StartsWith("old.yaml:4:30: plugin 'old-api-model' rejected its options: option 'penalty' is "
                                      "-1; give 0 or more cycles"));
  given.values["penalty"] = std::string("7");
  CHECK(host.create_cost_model(old, host.resolve_options(old, given, "old.yaml:4:13")) != nullptr);
}

TEST_CASE("plugin host reads typed options' ranges and choices and checks values against them", "[plugins][options]") {
  PluginHost host;
  host.load_directory(TESSERA_PLUGIN_DIR);
  const PluginInfo& planner = *host.find("select-finalist");
  CHECK(planner.api_minor == kPluginApiMinor);
  auto spec = [&](const PluginInfo& plugin, const std::string& name) -> const OptionSpec& {
    for (const OptionSpec& option : plugin.options)
      if (option.name == name) return option;
    FAIL("no option " << name);
    throw std::logic_error("unreachable");
  };
  CHECK(option_limits_text(spec(planner, "finalists")) == "[1, 100000]");
  CHECK(option_limits_text(spec(planner, "available_memory_proportion")) == "(0, 1]");
  CHECK(spec(planner, "orientation").type == OptionType::choice);
  CHECK(spec(planner, "orientation").choices == std::vector<std::string>{"auto", "as_is", "swapped"});
  CHECK(option_limits_text(spec(*host.find("milp"), "max_variables")) == ">= 1");
  // A std::uint32_t member is at most 4294967295 without a declared maximum; a std::uint64_t one at least 0.
  CHECK(option_limits_text(spec(*host.find("latency-aware"), "seed")) == ">= 0");

  auto resolve = [&](const PluginInfo& plugin, const std::string& name, OptionValue value) {
    Options given;
    given.values[name] = std::move(value);
    return host.resolve_options(plugin, given, "p.yaml:3:7");
  };
  // Bounds are inclusive unless declared excluded.
  CHECK(resolve(planner, "finalists", std::string("100000")).get_int("finalists") == 100000);
  CHECK_THROWS_WITH(resolve(planner, "finalists", std::string("100001")),
                    Catch::StartsWith("p.yaml:3:7: option 'finalists' of plugin 'select-finalist' must be in [1, "
                                      "100000], got 100001"));
  CHECK(resolve(planner, "available_memory_proportion", std::string("1")).get_number("available_memory_proportion") ==
        1.0);
  CHECK_THROWS_WITH(resolve(planner, "available_memory_proportion", std::string("0")),
                    Catch::Contains("must be in (0, 1], got 0"));
  CHECK_THROWS_WITH(resolve(planner, "orientation", std::string("sideways")),
                    Catch::Contains("option 'orientation' of plugin 'select-finalist' must be one of: auto, as_is, "
                                    "swapped, got 'sideways'"));
  CHECK(resolve(planner, "orientation", std::string("as_is")).get_string("orientation") == "as_is");
  CHECK_THROWS_WITH(resolve(*host.find("latency-aware"), "seed", std::int64_t{-1}),
                    Catch::Contains("must be >= 0, got -1"));
}
