// Contained plugins: `isolate: process` through the real `tessera compile`, with a faulty
// scheduler that crashes, hangs, hoards memory, prints to stdout or returns garbage, and a
// faulty cost model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>

#include "run_command.hpp"
#include "sanitizer.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
const std::string kSchedulerEntry = "exchange_scheduler: {plugin: greedy}";
const std::string kCostModelEntry = "cost_model: {plugin: analytic}";
const std::string kFaultyPluginPath = std::string("TESSERA_PLUGIN_PATH=") + TESSERA_FAULTY_PLUGIN_PATH;

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// The small pipeline with its scheduler entry replaced by `entry`.
std::string pipeline_with(const TempDir& dir, const std::string& entry) {
  return pipeline_copy(dir, kSmallPipeline, kSchedulerEntry, "exchange_scheduler: " + entry);
}

CommandResult compile(const std::string& pipeline, const std::string& package) {
  return run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package, "-v"},
                     {kFaultyPluginPath});
}

constexpr std::uint64_t kTestTimeLimitMs = 3000;

// The faulty scheduler contained, with limits small enough to keep the tests fast.
std::string faulty_entry(const std::string& fault, const std::string& extra = "",
                         std::uint64_t time_limit_ms = kTestTimeLimitMs) {
  return "{plugin: faulty-scheduler, options: {fault: " + fault +
         "}, isolate: process, time_limit_ms: " + std::to_string(time_limit_ms) + ", memory_limit_mb: 512" + extra +
         "}";
}

// The in-process greedy package every fallback run must reproduce byte for byte.
const std::string& greedy_package_bytes() {
  static const std::string bytes = [] {
    TempDir dir;
    const std::string package = (dir.path() / "greedy.tpkg").string();
    CommandResult r = compile(pipeline_with(dir, "{plugin: greedy}"), package);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return read_bytes(package);
  }();
  return bytes;
}

// A failed compile: exit 1, no signal, the last line the error naming the plugin, `what` and
// the entry's place (`line`: the scheduler's or the cost model's line in the small pipeline).
void check_contained_failure(const CommandResult& r, const std::string& package, const std::string& what,
                             const std::string& plugin = "faulty-scheduler", int line = 6) {
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.signal == 0);
  CHECK(r.err.find("terminate called") == std::string::npos);
  REQUIRE(r.err.rfind("error: ") != std::string::npos);
  const std::string error = r.err.substr(r.err.rfind("error: "));
  CHECK(std::count(error.begin(), error.end(), '\n') == 1);
  CHECK_THAT(error, Catch::Contains(kSmallModel));
  CHECK_THAT(error, Catch::Contains("plugin '" + plugin + "'"));
  CHECK_THAT(error, Catch::Contains(what));
  CHECK_THAT(error, Catch::Contains("pipeline.yaml:" + std::to_string(line) + ":"));  // the isolated entry
  CHECK_FALSE(fs::exists(package));
}

}  // namespace

TEST_CASE("isolation runs greedy in a child process and gives the identical package", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "isolated.tpkg").string();
  CommandResult r = compile(pipeline_with(dir, "{plugin: greedy, isolate: process}"), package);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("started isolated exchange scheduler plugin=\"greedy\""));
  CHECK_THAT(r.err, Catch::Contains("selected_kind=\"greedy\""));
  CHECK(read_bytes(package) == greedy_package_bytes());
}

TEST_CASE("isolation contains each fault and names it, with and without a fallback", "[isolation]") {
  struct Case {
    std::string fault;
    std::string what;  // in the error and in the fallback warning
    std::uint64_t time_limit_ms = kTestTimeLimitMs;
  };
  const Case cases[] = {
      {"segfault", "crashed: killed by signal " + std::to_string(kSegfaultSignal)},
      {"hang", "did not answer within time_limit_ms=3000 and was killed"},
      // Under ASan the limit is its hard_rss_limit_mb, which aborts the child.
      // Ten minutes: on a loaded machine 3 s can pass before 512 MB are touched, and only the
      // memory limit may fire here.
      {"allocate", kAddressSanitizer ? "crashed: killed by signal 6" : "hit memory_limit_mb=512", 600000},
      {"invalid-schedule", "returned an invalid schedule"},
      {"protocol-junk", "broke the plugin-host protocol"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION("fault " << c.fault << " without a fallback fails the compile") {
      TempDir dir;
      const std::string package = (dir.path() / "out.tpkg").string();
      CommandResult r = compile(pipeline_with(dir, faulty_entry(c.fault, "", c.time_limit_ms)), package);
      check_contained_failure(r, package, c.what);
    }
    DYNAMIC_SECTION("fault " << c.fault << " with a fallback continues with greedy") {
      TempDir dir;
      const std::string package = (dir.path() / "out.tpkg").string();
      CommandResult r =
          compile(pipeline_with(dir, faulty_entry(c.fault, ", fallback: greedy", c.time_limit_ms)), package);
      INFO(r.err);
      REQUIRE(r.exit_code == 0);
      CHECK_THAT(r.err,
                 Catch::Contains("exchange scheduler plugin=\"faulty-scheduler\" failed in its isolated process: "));
      CHECK_THAT(r.err, Catch::Contains(c.what));
      CHECK_THAT(r.err, Catch::Contains("falling back to plugin=\"greedy\""));
      // The first phase failed, so greedy scheduled every phase: the in-process package.
      CHECK(read_bytes(package) == greedy_package_bytes());
    }
  }
}

TEST_CASE("isolation keeps a plugin's stdout off the tool's stdout", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  CommandResult r = compile(pipeline_with(dir, faulty_entry("stdout")), package);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("package=" + package));
  CHECK_THAT(r.out, !Catch::Contains("stdout noise"));
  CHECK_THAT(r.err, Catch::Contains("faulty-scheduler stdout noise"));
  CHECK_THAT(r.err, !Catch::Contains("falling back"));
}

TEST_CASE("isolation ends what an isolated plugin forks with its process", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  // The plugin leaves a process that never ends on its own and holds stderr open; the compile
  // must not leave it running.
  CommandResult r = compile(pipeline_with(dir, faulty_entry("grandchild")), package);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch pid;
  REQUIRE(std::regex_search(r.err, pid, std::regex("faulty-scheduler grandchild pid=([0-9]+)")));
  // Gone, or a zombie waiting for init: no longer running either way.
  std::ifstream stat("/proc/" + pid[1].str() + "/stat");
  std::string fields;
  std::getline(stat, fields);
  const auto state = fields.rfind(") ");
  CHECK((fields.empty() || (state != std::string::npos && fields[state + 2] == 'Z')));
}

TEST_CASE("isolation caps what an isolated plugin prints", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  CommandResult r = compile(pipeline_with(dir, faulty_entry("stderr-flood")), package);
  REQUIRE(r.exit_code == 0);
  // 8 MiB printed, 1 MiB shown, the rest counted.
  CHECK(r.err.size() < (1u << 20) + (256u << 10));
  CHECK_THAT(r.err, Catch::Contains("isolated plugin=\"faulty-scheduler\" wrote 8388608 bytes to stdout and stderr; "
                                    "the first 1048576 were shown, 7340032 dropped"));
}

TEST_CASE("isolation is refused for passes with the place", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  auto pass =
      pipeline_copy(dir, kSmallPipeline, "{plugin: place-storage}", "{plugin: place-storage, isolate: process}");
  CommandResult r = compile(pass, package);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(pass + ":10:"));
  CHECK_THAT(r.err, Catch::Contains("'isolate: process' is not supported for pass 'place-storage'"));
  CHECK_THAT(r.err, Catch::Contains("only exchange schedulers and cost models"));
  CHECK_FALSE(fs::exists(package));
}

TEST_CASE("isolation runs the analytic cost model in a child process and gives the identical package", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "isolated.tpkg").string();
  auto pipeline =
      pipeline_copy(dir, kSmallPipeline, kCostModelEntry, "cost_model: {plugin: analytic, isolate: process}");
  CommandResult r = compile(pipeline, package);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Catch::Contains("started isolated cost model plugin=\"analytic\""));
  CHECK(read_bytes(package) == greedy_package_bytes());
}

TEST_CASE("isolation contains a faulty cost model, with and without a fallback", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  const std::string entry = "cost_model: {plugin: faulty-cost-model, options: {fault: segfault}, isolate: process";
  SECTION("without a fallback the compile fails naming the crash") {
    CommandResult r = compile(pipeline_copy(dir, kSmallPipeline, kCostModelEntry, entry + "}"), package);
    check_contained_failure(r, package, "crashed: killed by signal " + std::to_string(kSegfaultSignal),
                            "faulty-cost-model", 5);
  }
  SECTION("a hang is killed at the time limit") {
    auto hang = "cost_model: {plugin: faulty-cost-model, options: {fault: hang}, isolate: process, time_limit_ms: 500}";
    CommandResult r = compile(pipeline_copy(dir, kSmallPipeline, kCostModelEntry, hang), package);
    check_contained_failure(r, package, "did not answer within time_limit_ms=500", "faulty-cost-model", 5);
  }
  SECTION("with a fallback analytic takes over and the package is the in-process one") {
    CommandResult r =
        compile(pipeline_copy(dir, kSmallPipeline, kCostModelEntry, entry + ", fallback: analytic}"), package);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.err,
               Catch::Contains("cost model plugin=\"faulty-cost-model\" failed in its isolated process: crashed"));
    CHECK_THAT(r.err, Catch::Contains("falling back to plugin=\"analytic\""));
    CHECK(read_bytes(package) == greedy_package_bytes());
  }
}

TEST_CASE("isolation settings are checked with their place", "[isolation]") {
  TempDir dir;
  const std::string package = (dir.path() / "out.tpkg").string();
  SECTION("an unknown fallback is named with its place and a suggestion") {
    auto p = pipeline_with(dir, "{plugin: greedy, isolate: process, fallback: in-ordr}");
    CommandResult r = compile(p, package);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(p + ":6:"));
    CHECK_THAT(r.err, Catch::Contains("did you mean 'in-order'"));
  }
  SECTION("a fallback of another kind is refused") {
    CommandResult r = compile(pipeline_with(dir, "{plugin: greedy, isolate: process, fallback: analytic}"), package);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("fallback: "));
    CHECK_THAT(r.err, Catch::Contains("is of kind cost model"));
  }
  SECTION("limits and fallback need isolation") {
    CommandResult r = compile(pipeline_with(dir, "{plugin: greedy, time_limit_ms: 100}"), package);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("'time_limit_ms' needs 'isolate: process'"));
  }
  SECTION("only 'process' isolation exists") {
    CommandResult r = compile(pipeline_with(dir, "{plugin: greedy, isolate: thread}"), package);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("'isolate' must be 'process'"));
  }
  CHECK_FALSE(fs::exists(package));
}

TEST_CASE("isolation settings survive print_pipeline and load_pipeline", "[isolation]") {
  TempDir dir;
  const std::string original = pipeline_with(
      dir, "{plugin: greedy, isolate: process, fallback: in-order, time_limit_ms: 1500, memory_limit_mb: 300}");
  tessera::PluginHost host;
  tessera::PipelineSpec spec = tessera::load_pipeline(original);
  tessera::resolve_pipeline(spec, host);
  const std::string printed = dir.write("printed.yaml", tessera::print_pipeline(spec));
  tessera::PipelineSpec again = tessera::load_pipeline(printed);
  CHECK(again.exchange_scheduler.isolate == "process");
  CHECK(again.exchange_scheduler.fallback == "in-order");
  CHECK(again.exchange_scheduler.time_limit_ms == 1500);
  CHECK(again.exchange_scheduler.memory_limit_mb == 300);
  CHECK(again.cost_model.isolate.empty());
}

TEST_CASE("isolation's child refuses to run without the compiler", "[isolation]") {
  CommandResult r = run_command({std::string(TESSERA_BINARY_DIR) + "/tools/tessera-plugin-host"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("usage: tessera-plugin-host --channel-fd FD"));
}
