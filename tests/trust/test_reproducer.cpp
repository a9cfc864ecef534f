// Reproducer bundles: a faulty plugin during `tessera compile` leaves a bundle that
// `tessera replay` runs alone, failing the same way until the fault is gone.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/exchange.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/state_file.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
const std::string kTestPlugins = std::string(TESSERA_BINARY_DIR) + "/test-plugins";

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void write_text(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The bundle folder named in the compile error: "(reproducer: DIR; run ...".
fs::path bundle_from_error(const std::string& err) {
  const std::string marker = "(reproducer: ";
  const auto start = err.find(marker);
  REQUIRE(start != std::string::npos);
  const auto end = err.find(';', start);
  return err.substr(start + marker.size(), end - start - marker.size());
}

nlohmann::json read_manifest(const fs::path& bundle) {
  return nlohmann::json::parse(read_text(bundle / "manifest.json"));
}

const nlohmann::json& plugin_in(const nlohmann::json& manifest, const std::string& name) {
  for (const auto& entry : manifest["plugins"])
    if (entry["name"] == name) return entry;
  FAIL("plugin " << name << " not in the manifest");
  throw;
}

}  // namespace

TEST_CASE("an invalid schedule during compile leaves a phase bundle that replay fails on the same way",
          "[trust][reproducer]") {
  TempDir dir;
  std::string pipeline = pipeline_copy(dir, kSmallPipeline, "{plugin: greedy}", "{plugin: all-at-once}");
  write_text(pipeline, replace_once(read_text(pipeline), std::string(TESSERA_PLUGIN_DIR) + "]",
                                    std::string(TESSERA_PLUGIN_DIR) + ", " + kTestPlugins + "/invalid-scheduler]"));
  const std::string package = (dir.path() / "out" / "small.tpkg").string();
  fs::create_directories(dir.path() / "out");
  const CommandResult compiled = run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 1);
  CHECK(compiled.signal == 0);
  CHECK_FALSE(fs::exists(package));
  const std::string error = compiled.err.substr(compiled.err.rfind("error: "));
  CHECK_THAT(error, Catch::Contains("plugin 'all-at-once': returned an invalid schedule"));
  const fs::path bundle = bundle_from_error(error);
  CHECK(bundle == dir.path() / "out" / "reproducers" / "all-at-once-1");
  CHECK_THAT(error, Catch::Contains("run `tessera replay " + bundle.string() + "`"));

  // The bundle: the phase the scheduler failed on, the target, the pipeline, the manifest.
  for (const char* file : {"manifest.json", "pipeline.yaml", "target.yaml", "phase.txt"})
    CHECK(fs::is_regular_file(bundle / file));
  CHECK_FALSE(fs::exists(bundle / "model.yaml"));
  CHECK(read_text(bundle / "target.yaml") == read_text(source_path("configs/targets/t16.yaml")));
  const tessera::ExchangePhase phase = tessera::read_phase_file((bundle / "phase.txt").string());
  CHECK(phase.tiles == 16);
  CHECK_FALSE(phase.transfers.empty());
  const nlohmann::json manifest = read_manifest(bundle);
  CHECK(manifest["replay"] == "schedule");
  CHECK(manifest["plugin"] == "all-at-once");
  CHECK(manifest["pass"] == "lower-exchanges");
  CHECK_THAT(manifest["error"].get<std::string>(), Catch::Contains("invalid schedule"));
  const std::string library =
      fs::weakly_canonical(kTestPlugins + "/invalid-scheduler/test-invalid-scheduler.so").string();
  const auto& scheduler = plugin_in(manifest, "all-at-once");
  CHECK(scheduler["path"] == library);
  CHECK(scheduler["sha256"] == tessera::file_sha256(library));
  CHECK(scheduler["kind"] == "exchange scheduler");
  CHECK(plugin_in(manifest, "lower-exchanges")["sha256"].get<std::string>().size() == 64);

  // Replay runs the scheduler alone and reports the same failure.
  const CommandResult replayed = run_command({tessera_binary(), "replay", bundle.string()});
  CHECK(replayed.exit_code == 1);
  CHECK(replayed.signal == 0);
  CHECK_THAT(replayed.err, Catch::Contains("error: plugin 'all-at-once': returned an invalid schedule for a phase of " +
                                           std::to_string(phase.transfers.size()) + " transfers"));
  CHECK_THAT(replayed.err, !Catch::Contains("package build phase"));  // the scheduler alone, no passes

  // The same bundle with a correct scheduler succeeds: replay really schedules and validates.
  write_text(bundle / "pipeline.yaml", replace_once(read_text(bundle / "pipeline.yaml"), "all-at-once", "greedy"));
  nlohmann::json fixed = manifest;
  fixed["plugin"] = "greedy";
  write_text(bundle / "manifest.json", fixed.dump());
  const CommandResult succeeded = run_command({tessera_binary(), "replay", bundle.string()});
  INFO(succeeded.err);
  CHECK(succeeded.exit_code == 0);
  CHECK_THAT(succeeded.out, Catch::StartsWith("replay=" + bundle.string() +
                                              " plugin=greedy transfers=" + std::to_string(phase.transfers.size())) &&
                                Catch::Contains("valid=true"));

  // A second failure gets a fresh bundle rather than overwriting the first.
  const CommandResult again = run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package});
  CHECK(bundle_from_error(again.err) == dir.path() / "out" / "reproducers" / "all-at-once-2");
}

TEST_CASE("a throwing pass leaves its input state, and replay runs that pass alone on it", "[trust][reproducer]") {
  TempDir dir;
  // The throwing pass comes from TESSERA_PLUGIN_PATH: the bundle must still find it without it.
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline, "  - {plugin: lower-mid}\n",
                                             "  - {plugin: lower-mid}\n  - {plugin: throwing-pass}\n");
  const std::string package = (dir.path() / "small.tpkg").string();
  const std::string reproducers = (dir.path() / "bundles").string();
  const CommandResult compiled = run_command(
      {tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package, "--reproducer-dir", reproducers},
      {"TESSERA_PLUGIN_PATH=" + kTestPlugins + "/throwing-pass"});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 1);
  CHECK_FALSE(fs::exists(package));
  CHECK_THAT(compiled.err,
             Catch::Contains("pass 'throwing-pass' failed: plugin 'throwing-pass': run threw: deliberate failure"));
  const fs::path bundle = bundle_from_error(compiled.err);
  CHECK(bundle == fs::path(reproducers) / "throwing-pass-1");
  CHECK_FALSE(fs::exists(bundle / "phase.txt"));
  CHECK_FALSE(fs::exists(bundle / "model.yaml"));
  // The state the pass was given: after lower-mid, before anything was planned.
  const tessera::CompilationState input = tessera::read_state((bundle / "state.tstate").string());
  CHECK(input.facts == std::set<std::string>{"graph", "canonical-graph"});
  CHECK(input.model.name == "mlp-small");
  CHECK(input.program.buffers.empty());
  const nlohmann::json manifest = read_manifest(bundle);
  CHECK(manifest["replay"] == "pass");
  CHECK(manifest["pass"] == "throwing-pass");
  CHECK(manifest["plugin"] == "throwing-pass");
  CHECK(plugin_in(manifest, "throwing-pass")["path"] ==
        fs::weakly_canonical(kTestPlugins + "/throwing-pass/test-throwing-pass.so").string());
  CHECK(plugin_in(manifest, "greedy")["version"].get<std::string>().size() > 0);

  const CommandResult replayed = run_command({tessera_binary(), "replay", bundle.string()});
  CHECK(replayed.exit_code == 1);
  CHECK_THAT(replayed.err, Catch::Contains("plugin 'throwing-pass': run threw: deliberate failure inside the plugin"));
  CHECK_FALSE(fs::exists(bundle / "reproducers"));  // a replay reports; it never writes bundles
  CHECK(std::distance(fs::directory_iterator(reproducers), fs::directory_iterator()) == 1);

  // A pass that does not throw passes on the same state: replay ran the named pass, nothing else.
  write_text(bundle / "manifest.json", replace_once(read_text(bundle / "manifest.json"), "\"pass\": \"throwing-pass\"",
                                                    "\"pass\": \"select-finalist\""));
  const CommandResult succeeded = run_command({tessera_binary(), "replay", bundle.string()});
  INFO(succeeded.err);
  CHECK(succeeded.exit_code == 0);
  CHECK_THAT(succeeded.out, Catch::Contains("plugin=throwing-pass pass=select-finalist passed=true"));
}

TEST_CASE("replay refuses a folder that is not a bundle, and a good compile writes no bundle", "[trust][reproducer]") {
  TempDir dir;
  const CommandResult r = run_command({tessera_binary(), "replay", dir.path().string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("error: " + (dir.path() / "manifest.json").string() + ": not a reproducer bundle"));

  const std::string package = (dir.path() / "small.tpkg").string();
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline, "finalists: 2", "finalists: 2");
  const CommandResult compiled = run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package});
  CHECK(compiled.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.path() / "reproducers"));
}
