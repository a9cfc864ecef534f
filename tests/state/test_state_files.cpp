// State files: exact round trips, `tessera opt` chains that rebuild the compile's package byte for
// byte, and damaged or mistyped states, passes, options and dump names refused with their place.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"
#include "tessera/session.hpp"
#include "tessera/state_file.hpp"

namespace fs = std::filesystem;
using namespace tessera;
using namespace tessera::testing;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
const char* const kPhases[] = {"lower_mid", "select_finalist", "place_storage", "lower_exchanges", "emit_tile_code"};

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string replace_once(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("'" + from + "' not found");
  return text.replace(at, from.size(), to);
}

// Compiles mlp-small on t16 with --dump-after all into dir/dumps; returns the package path.
std::string compile_with_dumps(const TempDir& dir, const std::string& pipeline) {
  const std::string package = (dir.path() / "small.tpkg").string();
  const CommandResult r = run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package,
                                       "--dump-after", "all", "--dump-dir", (dir.path() / "dumps").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return package;
}

}  // namespace

TEST_CASE("every dumped state reads back and writes out to the same bytes", "[state]") {
  TempDir dir;
  compile_with_dumps(dir, pipeline_copy(dir, kSmallPipeline));
  for (const char* phase : kPhases) {
    INFO(phase);
    const fs::path file = dir.path() / "dumps" / (std::string(phase) + ".tstate");
    REQUIRE(fs::exists(file));
    REQUIRE(fs::exists(dir.path() / "dumps" / (std::string(phase) + ".dump")));
    const CompilationState state = read_state(file.string());
    CHECK(state_text(state) == read_text(file));
  }
  const CompilationState last = read_state((dir.path() / "dumps/emit_tile_code.tstate").string());
  CHECK(last.facts.count(facts::tile_images) == 1);
  CHECK(last.package.tiles.size() == 16);
  CHECK(last.record.timings.size() == 5);
}

TEST_CASE("tessera opt runs the passes one at a time and rebuilds the compile's package byte for byte", "[state]") {
  TempDir dir;
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline);
  const std::string package = compile_with_dumps(dir, pipeline);
  std::string state = (dir.path() / "dumps/lower_mid.tstate").string();
  for (const char* pass : {"select-finalist", "place-storage", "lower-exchanges"}) {
    const std::string next = (dir.path() / (std::string(pass) + ".tstate")).string();
    const CommandResult r = run_command({tessera_binary(), "opt", state, "-p", pipeline, "--pass", pass, "-o", next});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::StartsWith("state=" + next + " passes=" + pass + " changed="));
    state = next;
  }
  // Each state equals the compile's own dump but for the pass timings.
  CHECK(deterministic_state_text(read_state(state)) ==
        deterministic_state_text(read_state((dir.path() / "dumps/lower_exchanges.tstate").string())));
  const std::string rebuilt = (dir.path() / "rebuilt.tpkg").string();
  const CommandResult r = run_command({tessera_binary(), "opt", state, "-p", pipeline, "--pass", "emit-tile-code",
                                       "--package", rebuilt, "--print", "--dump-filter", "tile=3"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_text(rebuilt) == read_text(package));
  CHECK_THAT(r.out, Catch::Contains("tile=3 ") && !Catch::Contains("tile=4 "));

  // A pass that changes nothing says so.
  const CommandResult again =
      run_command({tessera_binary(), "opt", state, "-p", pipeline, "--pass", "lower-mid", "--print"});
  CHECK(again.exit_code == 0);
  CHECK_THAT(again.out, Catch::Contains("changed=none"));
}

TEST_CASE("tessera opt names an unknown pass or option, a bad value and a missing fact", "[state]") {
  TempDir dir;
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline);
  compile_with_dumps(dir, pipeline);
  const std::string state = (dir.path() / "dumps/lower_mid.tstate").string();
  const std::string out = (dir.path() / "out.tstate").string();
  auto opt = [&](std::vector<std::string> extra) {
    std::vector<std::string> command{tessera_binary(), "opt", state, "-p", pipeline, "-o", out};
    command.insert(command.end(), extra.begin(), extra.end());
    return run_command(command);
  };
  const struct {
    std::vector<std::string> arguments;
    std::string error;
  } cases[] = {
      {{"--pass", "place-storag"}, "unknown pass 'place-storag'; did you mean 'place-storage'?"},
      {{"--pass", "place-storage"}, "pass 'place-storage' requires 'plan', which the state does not have"},
      {{"--pass", "select-finalist", "--option", "finalist=3"}, "has no option 'finalist'; did you mean 'finalists'?"},
      {{"--pass", "select-finalist", "--option", "finalists=many"}, "'finalists' is of type int"},
      {{"--pass", "select-finalist", "--option", "finalists=0"}, "must be in [1, 100000], got 0"},
      {{"--pass", "select-finalist", "--option", "finalists"}, "write KEY=VALUE"},
  };
  for (const auto& c : cases) {
    const CommandResult r = opt(c.arguments);
    INFO(r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(c.error));
    CHECK_FALSE(fs::exists(out));  // nothing written on an error
  }
  const CommandResult with_option = opt({"--pass", "select-finalist", "--option", "finalists=1"});
  INFO(with_option.err);
  CHECK(with_option.exit_code == 0);
  CHECK(read_state(out).facts.count(facts::plan) == 1);
}

TEST_CASE("a damaged state is refused naming the file and the JSON place", "[state]") {
  TempDir dir;
  compile_with_dumps(dir, pipeline_copy(dir, kSmallPipeline));
  const std::string good = read_text(dir.path() / "dumps/lower_exchanges.tstate");
  const struct {
    std::string from, to, error;
  } cases[] = {
      {"\"version\": 1", "\"version\": 2", "at /version: format version 2 is not 1"},
      {"\"format\": \"tessera-state\"", "\"format\": \"other\"", "not a tessera state file"},
      {"\"tiles\": 16,", "\"tiles\": 0,", "at /target: tiles must be in 1..65536"},
      {"\"tile\": 3,", "\"tile\": 16,", "/tile: 16 is above the largest allowed, 15"},
      {"\"tile\": 3,", "\"tile\": -3,", "/tile: expected a non-negative integer"},
      {"\"dtype\": \"float32\"", "\"dtype\": \"float64\"", "'float64' is not one of float32, float16"},
      {"\"region\": \"interleaved\"", "\"regio\": \"interleaved\"", "unknown key 'regio'"},
      {"\"outputs\": [", "\"outputs\": [99, ", "/model: graph output 99 is not a tensor"},
      {"\"schedule\": [\n", "\"schedule\": [[0, 0, 1],\n", "/schedule: the schedule is invalid"},
      {"\"offset\": ", "\"offset\": 9999999, \"x\": ", "unknown key 'x'"},
  };
  for (const auto& c : cases) {
    INFO(c.from << " -> " << c.to);
    const std::string file = dir.write("bad.tstate", replace_once(good, c.from, c.to));
    CHECK_THROWS_WITH(read_state(file), Catch::Contains(file + ": ") && Catch::Contains(c.error));
  }
  const std::string truncated = dir.write("truncated.tstate", good.substr(0, good.size() / 2));
  CHECK_THROWS_WITH(read_state(truncated), Catch::Contains(truncated + ": not a state file"));
  // A number too large for a double is a refusal too, not an escaped nlohmann exception (found by fuzz_state).
  const std::string overflow =
      dir.write("overflow.tstate", replace_once(good, "\"version\": 1", "\"version\": 1e16384"));
  CHECK_THROWS_WITH(read_state(overflow),
                    Catch::Contains(overflow + ": not a state file") && Catch::Contains("number overflow"));
  CHECK_THROWS_WITH(read_state((dir.path() / "missing.tstate").string()), Catch::Contains("state file not found"));
}

TEST_CASE("a misspelt --dump-after or --dump-filter is an error before any work", "[state]") {
  TempDir dir;
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline);
  const std::string package = (dir.path() / "small.tpkg").string();
  const CommandResult typo = run_command(
      {tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package, "--dump-after", "lower-mi"});
  CHECK(typo.exit_code == 1);
  CHECK_THAT(typo.err,
             Catch::Contains("--dump-after 'lower-mi': the pipeline has no such pass; did you mean 'lower-mid'?"));
  CHECK_FALSE(fs::exists(package));
  CHECK_THROWS_WITH(parse_dump_filter("tile=3-1"), Catch::Contains("not a tile or a range LOW-HIGH"));
  CHECK_THROWS_WITH(parse_dump_filter("tiles=3"), Catch::Contains("unknown field 'tiles'"));
  CHECK_THROWS_WITH(parse_dump_filter("op"), Catch::Contains("is not KEY=VALUE"));
  const DumpFilter filter = parse_dump_filter("tile=0-3,tile=9,op=dense1");
  CHECK(filter.shows_tile(3));
  CHECK_FALSE(filter.shows_tile(4));
  CHECK(filter.shows_tile(9));
  CHECK(filter.shows_name("dense1.w"));
  CHECK_FALSE(filter.shows_name("dense10.w"));
}

TEST_CASE("--print-changed prints the state after each pass that changed it", "[state]") {
  TempDir dir;
  const std::string pipeline = pipeline_copy(dir, kSmallPipeline);
  const CommandResult r =
      run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", (dir.path() / "small.tpkg").string(),
                   "--print-changed", "--dump-filter", "op=dense1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("// ----- state after pass 'lower-mid' (changed: facts, graph)"));
  CHECK_THAT(r.out, Catch::Contains("// ----- state after pass 'place-storage' (changed: facts, program, estimates)"));
  CHECK_THAT(r.out, Catch::Contains("name=dense1.w") && !Catch::Contains("name=dense0.w"));
}

TEST_CASE("a state with gather ops reads back to the same runs and bytes", "[state]") {
  TempDir dir;
  const std::string package = (dir.path() / "concat.tpkg").string();
  const CommandResult r = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-concat-small.yaml"),
                                       "-p", pipeline_copy(dir, kSmallPipeline), "-o", package, "--dump-after",
                                       "select-finalist", "--dump-dir", (dir.path() / "dumps").string()});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path file = dir.path() / "dumps/select_finalist.tstate";
  const CompilationState state = read_state(file.string());
  CHECK(state_text(state) == read_text(file));
  const Graph model = load_model(source_path("configs/models/mlp-concat-small.yaml"));
  REQUIRE(state.model.ops.size() == model.ops.size());
  for (std::size_t i = 0; i < model.ops.size(); ++i) CHECK(state.model.ops[i].gather_runs == model.ops[i].gather_runs);
  // A run reading past its input is refused with the state's place.
  const std::string text = read_text(file);
  const std::string damaged = replace_once(text, "[0, 0, 0, 2, 64, 64, 2, 1]", "[0, 0, 0, 2, 64, 64, 2, 9]");
  const std::string damaged_file = dir.write("damaged.tstate", damaged);
  CHECK_THROWS_WITH(read_state(damaged_file), Catch::Contains("gather run 0 reads outside input 'joined'"));
}
