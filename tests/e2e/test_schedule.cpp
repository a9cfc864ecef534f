// End-to-end: `tessera schedule` on phase files, good and bad.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;

static const std::string kIdeal = source_path("configs/targets/t1472-ideal.yaml");
static const std::string kReal = source_path("configs/targets/t1472.yaml");

TEST_CASE("schedule prints the one-line summary and emits a schedule file", "[e2e][schedule]") {
  TempDir dir;
  auto phase = dir.write("phase.txt", "# two senders, one hot receiver\ntiles 1472\n0 5 10\n1 5 7\n2 3,4 4\n");
  const std::string emitted = (dir.path() / "schedule.txt").string();
  auto r = run_command(
      {tessera_binary(), "schedule", phase, "--target", kIdeal, "--scheduler", "greedy", "--emit", emitted});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(
      r.out, m,
      std::regex("^transfers=3 endpoint_lower_bound=17 lower_bound=(\\d+) horizon=(\\d+) "
                 "lower_bound_gap=(\\d+) ratio=([0-9.]+) segments=(\\d+) elapsed_ms=\\d+ valid=true\n$")));
  CHECK(std::stoi(m[2]) >= 17);
  CHECK(std::stoi(m[3]) == std::stoi(m[2]) - std::stoi(m[1]));
  std::ifstream in(emitted);
  std::string line;
  int lines = 0;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#') ++lines;
  CHECK(lines == std::stoi(m[5]));
}

TEST_CASE("schedule runs every shipped scheduler on a real phase of mlp-b2-n3", "[e2e][schedule]") {
  TempDir dir;
  const std::string package = (dir.path() / "m.tpkg").string();
  auto compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p",
                               pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy"),
                               "-o", package, "--emit-phases", dir.path().string()});
  REQUIRE(compiled.exit_code == 0);
  auto phase = (dir.path() / "phase-00000.txt").string();
  for (const char* scheduler : {"greedy", "in-order"}) {
    auto r = run_command(
        {tessera_binary(), "schedule", phase, "-t", source_path("configs/targets/t16.yaml"), "-s", scheduler});
    INFO(scheduler << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("valid=true"));
  }
}

TEST_CASE("schedule bad phase files name the line", "[e2e][schedule]") {
  TempDir dir;
  struct Case {
    const char* text;
    const char* expected;
  };
  for (const Case& c :
       {Case{"tiles 16\n0 1 -3\n", ":2"}, Case{"tiles 16\n0 99 3\n", ":2"}, Case{"tiles 16\n0 1 3\n4 4 1\n", ":3"},
        Case{"tiles 16\n0 1 3\nsend everything\n", ":3"}, Case{"0 1 3\n", ":1"}}) {
    auto phase = dir.write("bad.txt", c.text);
    auto r = run_command({tessera_binary(), "schedule", phase, "-t", kReal, "-s", "greedy"});
    INFO(c.text << r.err);
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::StartsWith("error: " + phase + c.expected));
  }
  auto phase = dir.write("ok.txt", "tiles 16\n0 1 3\n");
  auto r = run_command({tessera_binary(), "schedule", phase, "-t", kReal, "-s", "gredy"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("did you mean 'greedy'?"));
  r = run_command({tessera_binary(), "schedule", phase, "-t", kReal, "-s", "greedy", "--option", "order=sideways"});
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Catch::Contains("greedy"));
}
