// Shared steps of the report tests: compile and run mlp-small on t16 with the real binary.
#pragma once
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "run_command.hpp"
#include "temp_dir.hpp"

namespace tessera::testing {

struct SmallRun {
  std::string package, profile, trace, phase_directory, lock;
  CommandResult compiled, ran;
};

/// Compiles configs/models/mlp-small.yaml with the small pipeline (t16, this build's
/// plugins), writing its exchange phases, then runs it with --profile and --trace.
inline SmallRun compile_and_run_small(const TempDir& dir) {
  SmallRun run;
  run.package = (dir.path() / "small.tpkg").string();
  run.profile = (dir.path() / "profile.json").string();
  run.trace = (dir.path() / "trace.json").string();
  run.phase_directory = (dir.path() / "phases").string();
  run.lock = (dir.path() / "device.lock").string();
  const std::string pipeline =
      pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "finalists: 2", "finalists: 2");
  run.compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", pipeline,
                              "-o", run.package, "--emit-phases", run.phase_directory, "-v"});
  INFO(run.compiled.err);
  REQUIRE(run.compiled.exit_code == 0);
  run.ran = run_command(
      {tessera_binary(), "run", run.package, "--profile", run.profile, "--trace", run.trace, "--lock", run.lock});
  INFO(run.ran.err);
  REQUIRE(run.ran.exit_code == 0);
  return run;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The value of `key=` in a `key=value key=value` line, or "".
inline std::string field(const std::string& line, const std::string& key) {
  const std::string needle = key + "=";
  std::size_t at = line.find(needle);
  while (at != std::string::npos && at > 0 && line[at - 1] != ' ' && line[at - 1] != '\n')
    at = line.find(needle, at + 1);
  if (at == std::string::npos) return "";
  const std::size_t value = at + needle.size();
  return line.substr(value, line.find_first_of(" \n", value) - value);
}

}  // namespace tessera::testing
