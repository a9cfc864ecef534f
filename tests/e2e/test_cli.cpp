// End-to-end: the real `tessera` binary on real configs, including its failures.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");
const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");

// The error is the last thing on stderr and its first line names `file` (one line unless
// `detail_lines` allows a breakdown under it); no crash, no half-written package.
void check_clean_failure(const CommandResult& r, const std::string& file, const std::string& package,
                         bool detail_lines = false) {
  CHECK(r.exit_code == 1);
  CHECK(r.signal == 0);
  CHECK(r.err.find("terminate called") == std::string::npos);
  REQUIRE(r.err.rfind("error: ") != std::string::npos);
  const std::string error = r.err.substr(r.err.rfind("error: "));
  if (!detail_lines) CHECK(std::count(error.begin(), error.end(), '\n') == 1);
  CHECK_THAT(error.substr(0, error.find('\n')), Catch::Contains(file));
  CHECK_FALSE(fs::exists(package));
  for (const auto& entry : fs::directory_iterator(fs::path(package).parent_path()))
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
}

std::string pipeline_variant(const TempDir& dir, const std::string& from, const std::string& to) {
  return pipeline_copy(dir, kSmallPipeline, from, to);
}

}  // namespace

TEST_CASE("cli compiles and runs the small model with a passing numerical test", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  auto pipeline = pipeline_variant(dir, "finalists: 2", "finalists: 2");
  CommandResult compiled = run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", package, "-v"});
  INFO(compiled.err);
  REQUIRE(compiled.exit_code == 0);
  CHECK_THAT(compiled.out, Catch::StartsWith("package=" + package + " tiles=16 "));
  CHECK_THAT(compiled.err, Catch::Contains("prepared physical exchange phase phase="));
  CHECK_THAT(compiled.err, Catch::Contains("optimized physical exchange schedule phase="));
  for (const char* phase : {"lower_mid", "select_finalist", "place_storage", "lower_exchanges", "emit_tile_code"})
    CHECK_THAT(compiled.err,
               Catch::Contains(std::string("package build phase finished phase=\"") + phase + "\" elapsed_ms="));
  CHECK_THAT(compiled.err, Catch::Contains("success=true"));
  CHECK_THAT(compiled.err,
             Catch::Contains("tessera.build{tile_count=16 operations=6}:tessera.phase{phase=\"select_finalist\"}"));

  const std::string profile = (dir.path() / "profile.json").string();
  CommandResult ran = run_command(
      {tessera_binary(), "run", package, "--profile", profile, "--lock", (dir.path() / "device.lock").string(), "-v"});
  INFO(ran.err);
  REQUIRE(ran.exit_code == 0);
  CHECK_THAT(ran.out, Catch::Contains("numericalTest=PASS"));
  CHECK_THAT(ran.out, Catch::Contains("profile=" + profile + " tiles=16 samples="));
  CHECK(fs::file_size(profile) > 0);
  for (const char* stage : {"reading application package", "acquired device", "loading application tile_count=16",
                            "starting host exchange session", "call=\"initialize\"", "call=\"run\""})
    CHECK_THAT(ran.err, Catch::Contains(stage));
  std::smatch cycles;
  REQUIRE(std::regex_search(ran.out, cycles, std::regex("device_cycles=([0-9]+)")));
  CHECK(std::stoull(cycles[1]) > 0);
}

TEST_CASE("cli swaps the exchange scheduler through the YAML alone", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  auto greedy = run_command({tessera_binary(), "compile", kSmallModel, "-p",
                             pipeline_variant(dir, "plugin: greedy", "plugin: greedy"), "-o", package, "-v"});
  REQUIRE(greedy.exit_code == 0);
  CHECK_THAT(greedy.err, Catch::Contains("selected_kind=\"greedy\""));
  auto in_order = run_command({tessera_binary(), "compile", kSmallModel, "-p",
                               pipeline_variant(dir, "plugin: greedy", "plugin: in-order"), "-o", package, "-v"});
  INFO(in_order.err);
  REQUIRE(in_order.exit_code == 0);
  CHECK_THAT(in_order.err, Catch::Contains("selected_kind=\"in-order\""));
  CHECK_THAT(in_order.err, !Catch::Contains("selected_kind=\"greedy\""));
  auto ran = run_command({tessera_binary(), "run", package, "--lock", (dir.path() / "device.lock").string()});
  CHECK_THAT(ran.out, Catch::Contains("numericalTest=PASS"));
}

TEST_CASE("cli bad pipelines fail with one line naming the file and leave no package", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  auto unknown = pipeline_variant(dir, "plugin: greedy", "plugin: greedyy");
  auto r = run_command({tessera_binary(), "compile", kSmallModel, "-p", unknown, "-o", package});
  check_clean_failure(r, unknown + ":6:21", package);
  CHECK_THAT(r.err, Catch::Contains("did you mean 'greedy'?"));

  auto typo_key = pipeline_variant(dir, "cost_model:", "cost_modle:");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", typo_key, "-o", package});
  check_clean_failure(r, typo_key + ":5:1", package);

  auto bad_option = pipeline_variant(dir, "finalists: 2", "finalists: 2.5");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", bad_option, "-o", package});
  check_clean_failure(r, bad_option + ":9:", package);
  CHECK_THAT(r.err, Catch::Contains("must be int"));

  auto no_such_dir = pipeline_variant(dir, TESSERA_PLUGIN_DIR, "/no/such/plugins");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", no_such_dir, "-o", package});
  check_clean_failure(r, no_such_dir + ":4:", package);
}

TEST_CASE(
    "cli typed options: a bad choice, a number out of range, a wrong type and a plugin's refusal name their place",
    "[e2e][options]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  // small.yaml: line 5 `cost_model: {plugin: analytic}`, 6 `exchange_scheduler: {plugin: greedy}`, 9 select-finalist.
  auto choice = pipeline_variant(dir, "{plugin: greedy}", "{plugin: greedy, options: {order: fastest}}");
  auto r = run_command({tessera_binary(), "compile", kSmallModel, "-p", choice, "-o", package});
  check_clean_failure(r, choice + ":6:48", package);
  CHECK_THAT(r.err, Catch::Contains("option 'order' of plugin 'greedy' must be one of: load-first, longest-first, "
                                    "phase-order, got 'fastest'"));
  // An enum is not a number: the issue's `tie_break: 3` case.
  auto number_choice = pipeline_variant(dir, "{plugin: greedy}", "{plugin: optimal, options: {repair: 3}}");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", number_choice, "-o", package});
  check_clean_failure(r, number_choice + ":6:49", package);
  CHECK_THAT(r.err, Catch::Contains("must be one of: best, dense, left-shift, got '3'"));

  auto range = pipeline_variant(dir, "finalists: 2", "finalists: 0");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", range, "-o", package});
  check_clean_failure(r, range + ":9:", package);
  CHECK_THAT(r.err, Catch::Contains("option 'finalists' of plugin 'select-finalist' must be in [1, 100000], got 0"));
  auto open_bound = pipeline_variant(dir, "finalists: 2", "available_memory_proportion: 0");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", open_bound, "-o", package});
  check_clean_failure(r, open_bound + ":9:", package);
  CHECK_THAT(r.err, Catch::Contains("must be in (0, 1], got 0"));

  auto type = pipeline_variant(dir, "finalists: 2", "schedule_finalists: maybe");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", type, "-o", package});
  check_clean_failure(r, type + ":9:", package);
  CHECK_THAT(r.err,
             Catch::Contains("option 'schedule_finalists' of plugin 'select-finalist' must be bool, got 'maybe'"));

  // The plugin's own refusal in configure() (calibrated needs a table) names the option's place,
  // or where the plugin is named when the option was left at its default.
  auto given = pipeline_variant(dir, "{plugin: analytic}", "{plugin: calibrated, options: {table: ''}}");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", given, "-o", package});
  check_clean_failure(r, given + ":5:44", package);
  CHECK_THAT(r.err, Catch::Contains("plugin 'calibrated' rejected its options: option 'table' is not set"));
  auto defaulted = pipeline_variant(dir, "{plugin: analytic}", "{plugin: calibrated}");
  r = run_command({tessera_binary(), "compile", kSmallModel, "-p", defaulted, "-o", package});
  check_clean_failure(r, defaulted + ":5:13", package);
  CHECK_THAT(r.err, Catch::Contains("option 'table' is not set"));
}

TEST_CASE("cli a model far too large is refused before planning, with the numbers", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  // 16 tiles of 624 KiB cannot hold a 4096 x 4096 float32 matrix (64 MiB).
  auto model = dir.write("big.yaml",
                         "model: big\ntensors:\n  - {name: x, shape: [2, 4096], kind: input}\n"
                         "  - {name: w, shape: [4096, 4096], kind: weight}\n"
                         "ops: [{op: matmul, inputs: [x, w], output: y}]\noutputs: [y]\n");
  auto r = run_command(
      {tessera_binary(), "compile", model, "-p", pipeline_variant(dir, "finalists: 2", "finalists: 2"), "-o", package});
  check_clean_failure(r, model, package, true);
  CHECK_THAT(r.err, Catch::Contains(model + ": model does not fit on target 't16' ('big')"));
  CHECK_THAT(r.err, Catch::Contains("checked before planning"));
  CHECK_THAT(r.err, Catch::Contains("weights: 67108864 bytes (64.0 MiB)"));
  CHECK_THAT(r.err, Catch::Contains("interleaved region 16 x 376832 = 6029312 bytes"));
  CHECK_THAT(r.err, Catch::Contains("full: the whole memory (both regions)"));
  CHECK_THAT(r.err, Catch::Contains("7 chips' worth of 't16'"));
}

TEST_CASE("cli a model that does not fit fails listing the tiles", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  // 1536 x 960 float32 (5.6 MiB) is under t16's interleaved region (5.75 MiB), so the capacity
  // check passes it; placed, each tile's weight block and x chunk overflow the region.
  auto model = dir.write("big.yaml",
                         "model: big\ntensors:\n  - {name: x, shape: [2, 1536], kind: input}\n"
                         "  - {name: w, shape: [1536, 960], kind: weight}\n"
                         "ops: [{op: matmul, inputs: [x, w], output: y}]\noutputs: [y]\n");
  auto r = run_command(
      {tessera_binary(), "compile", model, "-p", pipeline_variant(dir, "finalists: 2", "finalists: 2"), "-o", package});
  check_clean_failure(r, model, package, true);
  CHECK_THAT(r.err, Catch::Contains("model does not fit: 16 tiles over 638976 bytes"));
  // The worst three tiles in full, the other 13 as ranges: five lines, not one per tile.
  CHECK_THAT(r.err, Catch::Contains("tile 0 needs"));
  CHECK_THAT(r.err, Catch::Contains("\n  and 13 more tiles over by "));
  // The planner's warning, then the error: its first line, three tiles, the ranges, the fix.
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') <= 7);
  // What takes the space: the weight block, named with its tensor, bytes and live range.
  CHECK_THAT(r.err, Catch::Contains(" over): interleaved region "));
  CHECK_THAT(r.err, Catch::Contains(".w 368640 bytes (1 buffer, tensor w, live supersteps "));
}

TEST_CASE("cli print-pipeline output compiles again", "[e2e]") {
  TempDir dir;
  auto printed = run_command(
      {tessera_binary(), "compile", "--print-pipeline", "-p", pipeline_variant(dir, "finalists: 2", "finalists: 2")});
  INFO(printed.err);
  REQUIRE(printed.exit_code == 0);
  CHECK_THAT(printed.out, Catch::Contains("exchange_scheduler: {plugin: greedy"));
  auto file = dir.write("printed.yaml", printed.out);
  auto again = run_command({tessera_binary(), "compile", "--print-pipeline", "-p", file});
  CHECK(again.out == printed.out);
  const std::string package = (dir.path() / "again.tpkg").string();
  auto compiled = run_command({tessera_binary(), "compile", kSmallModel, "-p", file, "-o", package});
  CHECK(compiled.exit_code == 0);
}

TEST_CASE("cli dump-after writes the state after the named pass", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  auto r = run_command({tessera_binary(), "compile", kSmallModel, "-p",
                        pipeline_variant(dir, "finalists: 2", "finalists: 2"), "-o", package, "--dump-after",
                        "place-storage", "--dump-dir", dir.path().string()});
  REQUIRE(r.exit_code == 0);
  std::ifstream dump(dir.path() / "place_storage.dump");
  std::string text((std::istreambuf_iterator<char>(dump)), {});
  CHECK_THAT(text, Catch::Contains("facts:") && Catch::Contains("storage") && Catch::Contains("buffers "));
  CHECK_THAT(text, !Catch::Contains("offset=-1"));
}

TEST_CASE("cli run refuses a corrupt package naming the section", "[e2e]") {
  TempDir dir;
  const std::string package = (dir.path() / "x.tpkg").string();
  REQUIRE(run_command({tessera_binary(), "compile", kSmallModel, "-p",
                       pipeline_variant(dir, "finalists: 2", "finalists: 2"), "-o", package})
              .exit_code == 0);
  std::string bytes;
  {
    std::ifstream in(package, std::ios::binary);
    bytes.assign((std::istreambuf_iterator<char>(in)), {});
  }
  bytes[bytes.size() - 5] ^= 0x40;  // inside the last tile's section
  std::ofstream(package, std::ios::binary | std::ios::trunc) << bytes;
  auto r = run_command({tessera_binary(), "run", package, "--lock", (dir.path() / "lock").string()});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains(package) && Catch::Contains("TILE[15] checksum mismatch"));
}

TEST_CASE("cli plugins list shows every shipped plugin", "[e2e]") {
  auto r = run_command({tessera_binary(), "plugins", "list"});
  REQUIRE(r.exit_code == 0);
  for (const char* name : {"lower-mid", "select-finalist", "place-storage", "lower-exchanges", "emit-tile-code",
                           "greedy", "in-order", "analytic"})
    CHECK_THAT(r.out, Catch::Contains(name));
  auto info = run_command({tessera_binary(), "plugins", "info", "select-finalist"});
  CHECK_THAT(info.out, Catch::Contains("  finalists (int in [1, 100000], default 2): "));
  CHECK_THAT(info.out, Catch::Contains("  available_memory_proportion (float in (0, 1], default 0.6): "));
  CHECK_THAT(info.out, Catch::Contains("  orientation (enum, one of: auto, as_is, swapped, default auto): "));
  CHECK_THAT(info.out, Catch::Contains("  schedule_finalists (bool, default false): "));
  CHECK_THAT(info.out, Catch::Contains("  plans (map, default {}): "));
  // A one-sided range: an unsigned member is at least 0.
  auto latency = run_command({tessera_binary(), "plugins", "info", "latency-aware"});
  CHECK_THAT(latency.out, Catch::Contains("  seed (int >= 0, default 1): "));
  CHECK_THAT(latency.out, Catch::Contains("  lookahead (int in [0, 4096], default 24): "));
  auto typo = run_command({tessera_binary(), "plugins", "info", "gredy"});
  CHECK(typo.exit_code == 1);
  CHECK_THAT(typo.err, Catch::Contains("did you mean 'greedy'?"));
}

TEST_CASE("cli cycles prints the simulator's charge for one codelet call with its floors", "[e2e][cycles]") {
  const std::string target = source_path("configs/targets/t1472.yaml");
  // 2 x 179 x 128 float32: auto picks swapped (b transposed, then 23 passes of its 128 columns on
  // 8 of the AMP's units, then c^T transposed), as the unit test of the formula works out: 47,692
  // and 545, 48,237 in all against 69,148 as-is; loads (2 x 179 + 179 x 128) x 4 / 16.
  auto r = run_command({tessera_binary(), "cycles", "-t", target, "matmul", "--m", "2", "--k", "179", "--n", "128"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("codelet=matmul target=t1472 m=2 k=179 n=128 orientation=swapped path=amp "
                                    "amp_passes=23 cycles=47692 mac_floor=2864 load_floor=5818 "
                                    "output_transpose_cycles=545 product_cycles=48237\n"));
  r = run_command({tessera_binary(), "cycles", "-t", target, "matmul", "--m", "2", "--k", "179", "--n", "128",
                   "--orientation", "as-is"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("orientation=as_is path=amp amp_passes=184 cycles=69148 "));
  // Half weights with float32 partials: 32 MACs a cycle at peak.
  r = run_command(
      {tessera_binary(), "cycles", "-t", target, "matmul", "--dtype", "f16", "--m", "128", "--k", "128", "--n", "128"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("codelet=matmul_half ") && Catch::Contains(" mac_floor=65536 "));
  r = run_command({tessera_binary(), "cycles", "-t", target, "reduce_add", "--parts", "4", "--count", "1200"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("codelet=reduce_add target=t1472 parts=4 count=1200 path=workers cycles=5892 "));
  // Functions: sigmoid 12 worker cycles a pair (200 elements a worker: 20 + 6 x (17 + 100 x 12)); a divide by a
  // row column by column (13 + 6 x (29 + 50 pairs x (11 + 6 a further row))); a row mean: a fold of two
  // rows a worker (6 x (17 + 2 x (12 + 32))), then 1 / cols times the 12 sums (11 + 6 x (20 + 2)).
  r = run_command({tessera_binary(), "cycles", "-t", target, "sigmoid", "--count", "1200"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("codelet=unary target=t1472 count=1200 function=sigmoid path=workers cycles=7322 "));
  r = run_command({tessera_binary(), "cycles", "-t", target, "divide_row", "--rows", "10", "--cols", "100"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "codelet=binary_row target=t1472 rows=10 cols=100 function=divide path=workers cycles=5287 "));
  r = run_command({tessera_binary(), "cycles", "-t", target, "reduce_mean", "--rows", "12", "--cols", "64"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out,
             Catch::Contains("codelet=reduce_rows target=t1472 rows=12 cols=64 function=mean path=rows cycles=773 "));
  // A column: each row's scalar (11 + 6 * (15 + 2 rows * (7 + 32 vectors * 14))).
  r = run_command({tessera_binary(), "cycles", "-t", target, "divide_column", "--rows", "12", "--cols", "64"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(
                        "codelet=binary_column target=t1472 rows=12 cols=64 function=divide path=rows cycles=5561 "));
  // Mistakes: an unknown codelet lists the ones there are; a missing shape names the option.
  r = run_command({tessera_binary(), "cycles", "-t", target, "cast", "--count", "8"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("unknown codelet 'cast'") && Catch::Contains("matmul, matmul_transposed, relu"));
  r = run_command({tessera_binary(), "cycles", "-t", target, "matmul", "--m", "2", "--k", "8"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("give --n"));
  r = run_command({tessera_binary(), "cycles", "-t", target, "relu", "--count", "8", "--m", "2"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("tessera cycles relu: --m does not apply to relu"));
}

TEST_CASE("cli cycles charges a whole conv or pooling layer on one tile, with its path and floors", "[e2e][cycles]") {
  const std::string target = source_path("configs/targets/t1472.yaml");
  // ResNet-50's 3x3 conv of 64 channels at 56x56: the AMP, within 10% of its MACs at the peak rate.
  auto r = run_command({tessera_binary(), "cycles", "-t", target, "conv", "--batch", "1", "--in-channels", "64",
                        "--height", "56", "--width", "56", "--out-channels", "64", "--kernel", "3x3", "--pad", "1"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("out_field=56x56 path=amp"));
  const auto number = [&](const std::string& key) {
    const auto at = r.out.find(" " + key + "=");
    REQUIRE(at != std::string::npos);
    return std::stoull(r.out.substr(at + key.size() + 2));
  };
  const std::uint64_t cycles = number("cycles"), mac_floor = number("mac_floor");
  CHECK(mac_floor == 56ull * 56 * 64 * 64 * 9 / 16);
  CHECK(cycles >= mac_floor);
  CHECK(cycles < mac_floor * 11 / 10);
  // A depthwise conv takes the vertical MAC; two images cost twice one.
  r = run_command({tessera_binary(),
                   "cycles",
                   "-t",
                   target,
                   "conv",
                   "--batch",
                   "2",
                   "--in-channels",
                   "32",
                   "--height",
                   "14",
                   "--width",
                   "14",
                   "--out-channels",
                   "32",
                   "--kernel",
                   "3",
                   "--pad",
                   "1",
                   "--groups",
                   "32"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("path=amp-groups-combined"));
  CHECK(number("cycles") == 2 * number("cycles_per_image"));
  r = run_command({tessera_binary(), "cycles", "-t", target, "max_pool", "--batch", "1", "--in-channels", "64",
                   "--height", "112", "--width", "112", "--kernel", "3", "--stride", "2", "--pad", "1"});
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("codelet=pool") && Catch::Contains("out_field=56x56"));
  // A missing layer option, or a layer option on another codelet, is an error naming it.
  r = run_command({tessera_binary(), "cycles", "-t", target, "conv", "--batch", "1", "--in-channels", "64", "--height",
                   "8", "--width", "8", "--kernel", "3"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("--out-channels"));
  r = run_command({tessera_binary(), "cycles", "-t", target, "relu", "--count", "5", "--kernel", "3"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("apply to conv, max_pool and avg_pool only"));
}
