// Pinned plans per op (select-finalist option `plans`), through the real binary: the pin is
// honoured and numerically right, and bad pins fail naming the pipeline file:line:column.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>
#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;

namespace {

const std::string kSmallModel = source_path("configs/models/mlp-small.yaml");

// The small pipeline (t16) with select-finalist's entry written in block style, `plans` last.
std::string pipeline_with_plans(const TempDir& dir, const std::string& plans) {
  const std::string path =
      pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "pipeline: small", "pipeline: small");
  std::ifstream in(path);
  std::string text{std::istreambuf_iterator<char>(in), {}};
  const std::string entry = "  - {plugin: select-finalist, options: {finalists: 2}}\n";
  REQUIRE(text.find(entry) != std::string::npos);
  text.replace(text.find(entry), entry.size(),
               "  - plugin: select-finalist\n    options:\n      finalists: 2\n      plans:\n" + plans);
  return dir.write("pipeline.yaml", text);
}

CommandResult demo(const TempDir& dir, const std::string& pipeline, const std::string& model = kSmallModel) {
  return run_command({tessera_binary(), "demo", "--model", model, "--pipeline", pipeline, "--output",
                      (dir.path() / "model.tpkg").string(), "--lock", (dir.path() / "device.lock").string(), "-v"},
                     {std::string("TESSERA_PLUGIN_PATH=")});
}

// column_groups and depth_groups of the plan selected for op 0.
std::pair<int, int> first_selected(const std::string& log) {
  std::smatch match;
  REQUIRE(std::regex_search(log, match,
                            std::regex("selected operator plan op=0 finalist=[0-9]+ column_groups=([0-9]+) "
                                       "depth_groups=([0-9]+)")));
  return {std::stoi(match[1]), std::stoi(match[2])};
}

// The last `error:` line of stderr.
std::string error_line(const CommandResult& r) {
  const auto found = r.err.rfind("error: ");
  REQUIRE(found != std::string::npos);
  return r.err.substr(found, r.err.find('\n', found) - found);
}

}  // namespace

TEST_CASE("a pinned plan is selected for its op and passes the numerical test", "[e2e][plans]") {
  TempDir dir;
  // The pin must differ from the free choice, or the test would prove nothing.
  const auto free_choice = first_selected(demo(dir, pipeline_with_plans(dir, "        {}\n")).err);
  REQUIRE(free_choice != std::pair(2, 4));
  // By the op's final output (block style) and by the matmul's output that lower-mid fused in (flow style).
  for (const std::string plans : {"        y0:\n          column_groups: 2\n          depth_groups: 4\n",
                                  "        h0: {column_groups: 2, depth_groups: 4}\n"}) {
    INFO(plans);
    const auto r = demo(dir, pipeline_with_plans(dir, plans));
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
    CHECK_THAT(r.err, Catch::Contains("pinned operator plan op=0 name=" + plans.substr(8, 2) +
                                      " column_groups=2 depth_groups=4 row_groups=0 requested_column_groups=2 "
                                      "requested_depth_groups=4 requested_row_groups=0 clamped=false"));
    CHECK(first_selected(r.err) == std::pair(2, 4));
  }
}

TEST_CASE("a pinned serial split runs its column slices one after another and passes the numerical test",
          "[e2e][plans][serial]") {
  TempDir dir;
  // float32 biases take the fused reduce_bias, float16 ones reduce_add + bias_add_half.
  for (const std::string& model :
       std::vector<std::string>{kSmallModel, source_path("configs/models/mlp-small-f16.yaml")}) {
    INFO(model);
    const auto r = demo(
        dir,
        pipeline_with_plans(dir, "        y0: {column_groups: 2, depth_groups: 4, row_groups: 1, serial_splits: 4}\n"),
        model);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
    CHECK_THAT(r.err, Catch::Contains("selected operator plan op=0 finalist=0 column_groups=2 depth_groups=4 "
                                      "row_groups=1 serial_splits=4 "));
    // Four slices: one superstep per matmul (the first three beside the previous slice's
    // reduction) and one for the last reduction, after the gather.
    std::ifstream profile(dir.path() / "profile.json");
    const std::string labels{std::istreambuf_iterator<char>(profile), {}};
    CHECK_THAT(labels, Catch::Contains("\"dense0.matmul0\"") && Catch::Contains("\"dense0.reduce2+matmul3\"") &&
                           Catch::Contains("\"dense0.reduce3\""));
  }
}

TEST_CASE("a layer that fits no plain split is planned with serial splits", "[e2e][plans][serial]") {
  TempDir dir;
  const auto r =
      demo(dir, pipeline_with_plans(dir, "        {}\n"), source_path("configs/models/mlp-b128-n1-w1024.yaml"));
  INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  std::smatch match;
  // Every plain candidate screened is rejected for memory, so none is costed.
  REQUIRE(std::regex_search(r.err, match,
                            std::regex("screened operator plans op=0 candidates=[0-9]+ screened=([0-9]+) "
                                       "rejected_for_memory=([0-9]+) costed=0")));
  CHECK(match[1] == match[2]);
  REQUIRE(std::regex_search(r.err, match, std::regex("selected operator plan op=0 .* serial_splits=([0-9]+) ")));
  CHECK(std::stoi(match[1]) > 1);
}

TEST_CASE("a pinned two-stage reduction sums blocks of depth groups first and passes the numerical test",
          "[e2e][plans][two-stage]") {
  TempDir dir;
  // float32 biases take the fused reduce_bias in stage two, float16 ones reduce_add + bias_add_half.
  for (const std::string& model :
       std::vector<std::string>{kSmallModel, source_path("configs/models/mlp-small-f16.yaml")}) {
    INFO(model);
    const auto r = demo(
        dir, pipeline_with_plans(dir, "        y0: {column_groups: 2, depth_groups: 8, reduction_blocks: 2}\n"), model);
    INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
    CHECK_THAT(r.err, Catch::Contains("selected operator plan op=0 finalist=0 column_groups=2 depth_groups=8 "
                                      "row_groups=1 serial_splits=1 reduction_blocks=2 "));
    std::ifstream profile(dir.path() / "profile.json");
    const std::string labels{std::istreambuf_iterator<char>(profile), {}};
    CHECK_THAT(labels, Catch::Contains("\"dense0.reduce.stage1\"") && Catch::Contains("\"dense0.reduce.stage2\""));
  }
}

TEST_CASE("a deep model's two-stage plans are costed beside one-stage ones and the cheaper is kept",
          "[e2e][plans][two-stage]") {
  TempDir dir;
  // Four finalists: the head's two-stage plans rank third or lower by their first estimate.
  const auto r =
      demo(dir, pipeline_copy(dir, source_path("configs/pipelines/default.yaml"), "{finalists: 2,", "{finalists: 4,"),
           source_path("configs/models/mlp-b4-n2-w8192-head256.yaml"));
  INFO(r.err.substr(r.err.size() > 3000 ? r.err.size() - 3000 : 0));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  // Whether two stages win depends on the machine model; that they are costed does not.
  const std::regex retained(
      "retained operator-plan finalist op=([0-9]+) finalist=([0-9]+) .* reduction_blocks=([0-9]+) "
      ".* refined_cycles=([0-9]+) ");
  const std::regex selected("selected operator plan op=([0-9]+) finalist=([0-9]+) ");
  std::map<std::string, std::vector<std::uint64_t>> refined;  // per op, by finalist (the last planning round)
  bool two_stage_costed = false;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), retained); it != std::sregex_iterator(); ++it) {
    auto& cycles = refined[(*it)[1]];
    if ((*it)[2] == "0") cycles.clear();
    cycles.push_back(std::stoull((*it)[4]));
    two_stage_costed = two_stage_costed || std::stoi((*it)[3]) > 1;
  }
  CHECK(two_stage_costed);
  std::size_t checked = 0;
  for (auto it = std::sregex_iterator(r.err.begin(), r.err.end(), selected); it != std::sregex_iterator(); ++it) {
    const auto& cycles = refined[(*it)[1]];
    const std::size_t finalist = std::stoul((*it)[2]);
    REQUIRE(finalist < cycles.size());
    CHECK(cycles[finalist] == *std::min_element(cycles.begin(), cycles.end()));
    ++checked;
  }
  CHECK(checked >= 2);
}

TEST_CASE("a pin too large for the op is clamped and logged", "[e2e][plans]") {
  TempDir dir;
  const auto r = demo(dir, pipeline_with_plans(dir, "        y1: {column_groups: 500}\n"));
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("numericalTest=PASS"));
  // y1 is op 1 (96 -> 32): 500 column groups clamp to the 16 tiles.
  CHECK_THAT(r.err, Catch::Contains("pinned operator plan op=1 name=y1 column_groups=16 depth_groups=0 row_groups=0 "
                                    "requested_column_groups=500 requested_depth_groups=0 requested_row_groups=0 "
                                    "clamped=true"));
}

TEST_CASE("bad pins fail naming the pipeline file, line and column", "[e2e][plans]") {
  TempDir dir;
  struct Case {
    std::string plans, at;  // the error's place: where `at` first occurs after `plans:`, plus `skip`
    std::size_t skip;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"        z9: {column_groups: 2}\n", "z9", 0, {"unknown op 'z9'", "y0 (or a0 h0), y1 (or a1 h1)"}},
      {"        y0: {column_groups: 2, colum_groups: 4}\n",
       "colum_groups",
       0,
       {"unknown field 'colum_groups'", "depth_groups"}},
      {"        y0:\n          depth_groups: 0\n",
       ": 0",
       2,
       {"'depth_groups' of op 'y0' must be a positive integer", "got '0'"}},
      {"        y0: {column_groups: -3}\n", "-3", 0, {"must be a positive integer", "got '-3'"}},
      {"        y0: {column_groups: two}\n", "two", 0, {"must be a positive integer", "got 'two'"}},
      {"        y0: {column_groups: 2}\n        h0: {depth_groups: 2}\n", "y0", 0, {"'h0' and 'y0' name the same"}},
      {"        y0: 4\n", "4", 0, {"plan of op 'y0' must be a mapping"}},
  };
  for (const Case& c : cases) {
    INFO(c.plans);
    const std::string pipeline = pipeline_with_plans(dir, c.plans);
    const auto r = demo(dir, pipeline);
    INFO(r.err);
    CHECK(r.exit_code > 0);
    CHECK(r.signal == 0);
    const std::string line = error_line(r);
    // The place of the offending text, searched from the `plans:` line on.
    std::ifstream in(pipeline);
    std::string text{std::istreambuf_iterator<char>(in), {}};
    const std::size_t plans_at = text.find("      plans:\n");
    const std::size_t at = text.find(c.at, plans_at) + c.skip;
    const std::size_t line_number = std::count(text.begin(), text.begin() + at, '\n') + 1;
    const std::size_t column = at - text.rfind('\n', at);
    CHECK_THAT(line,
               Catch::Contains(pipeline + ":" + std::to_string(line_number) + ":" + std::to_string(column) + ": "));
    for (const auto& say : c.says) CHECK_THAT(line, Catch::Contains(say));
  }
}

TEST_CASE("an op pinned to row groups that starve later ops ends re-planning with a clean refusal", "[e2e][plans]") {
  // y0 held 4 times leaves y1 no plan: re-planning halves the row-group cap for the free ops
  // (2, then 1) and stops, where it once kept the cap at 2 behind the pin and never ended.
  TempDir dir;
  const std::string pipeline =
      pipeline_with_plans(dir, "        y0: {column_groups: 1, depth_groups: 1, row_groups: 4}\n");
  const std::string package = (dir.path() / "model.tpkg").string();
  const CommandResult r = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-b4-n3-w512.yaml"),
                                       "-p", pipeline, "-o", package, "-v"},
                                      {std::string("TESSERA_PLUGIN_PATH=")});
  CHECK(r.exit_code == 1);
  std::size_t replans = 0;
  for (std::size_t at = r.err.find("re-planning with fewer row groups"); at != std::string::npos;
       at = r.err.find("re-planning with fewer row groups", at + 1))
    ++replans;
  CHECK(replans == 2);
  CHECK_THAT(error_line(r), Catch::Contains("model does not fit"));
  CHECK_FALSE(std::filesystem::exists(package));
}
