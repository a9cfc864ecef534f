// Folders that must be the caller's own (results, reproducers, dumps, phases, the device lock's)
// and the history database: another user's folder, or one others can write, is refused with
// why; a symlink planted inside is never followed. Run as root, `tessera-robustness` plants.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

// The folder handed to another user, or (without one) opened to everyone: refused either way.
void give_away(const fs::path& folder) {
  if (other_user()) REQUIRE(::chown(folder.c_str(), other_user()->uid, other_user()->gid) == 0);
  else fs::permissions(folder, fs::perms::all);
}

std::string why_refused() { return other_user() ? "is owned by uid" : "is writable by"; }

// A suite of mlp-small on t16 alone: a sweep of seconds.
std::string small_suite(const TempDir& dir, const std::string& name = "small") {
  return dir.write("suite.yaml", "suite: \"" + name + "\"\nmodels:\n  - {model: " + kSmallModel +
                                     ", target: " + source_path("configs/targets/t16.yaml") + "}\n");
}

// `tessera ab` of the small suite with two arms, one repeat.
std::vector<std::string> ab(const TempDir& dir, const fs::path& results, std::vector<std::string> extra = {}) {
  std::vector<std::string> command{tessera_binary(), "ab",
                                   "--base",         pipeline_with(dir, "passes:", "passes:"),
                                   "--arm",          "greedy=",
                                   "--arm",          "in-order=" + source_path("configs/suites/arms/in-order.yaml"),
                                   "--suite",        small_suite(dir),
                                   "--results",      results.string(),
                                   "--history",      (dir.path() / "history.sqlite").string(),
                                   "--json",         results.string() + ".json",
                                   "--quiet"};
  command.insert(command.end(), extra.begin(), extra.end());
  return command;
}

std::vector<std::string> ab_environment(const TempDir& dir) {
  return {"TESSERA_PLUGIN_PATH=", "XDG_CONFIG_HOME=" + (dir.path() / "config").string()};
}

}  // namespace

TEST_CASE("owned folders a results folder another user made, or others can write, is refused before any compile",
          "[robustness][owned]") {
  TempDir dir;
  const fs::path results = dir.path() / "results";
  fs::create_directories(results);
  give_away(results);
  const CommandResult r = run_command(ab(dir, results), ab_environment(dir));
  check_clean_error(r, {results.string(), "refusing to use it as the results folder", why_refused(), "fix:"});
  CHECK_FALSE(fs::exists(results / "manifest.json"));
}

TEST_CASE("owned folders a symlink planted for a child's log is never followed, and an edited record is redone",
          "[robustness][owned]") {
  TempDir dir;
  const fs::path results = dir.path() / "results";
  const CommandResult first = run_command(ab(dir, results), ab_environment(dir));
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  // The records carry an HMAC under a key made 0600 in the user's config folder.
  const fs::path key = dir.path() / "config/tessera/ab-records.key";
  REQUIRE(fs::is_regular_file(key));
  CHECK((fs::status(key).permissions() & fs::perms::mask) == (fs::perms::owner_read | fs::perms::owner_write));

  // A record whose cycles were cut tenfold no longer carries our signature: it is redone, not reported.
  fs::path record;
  std::string text, cycles;
  std::size_t at = std::string::npos;
  for (const auto& entry : fs::recursive_directory_iterator(results / "records")) {
    if (!entry.is_regular_file() || !record.empty()) continue;
    text = read_file(entry.path().string());
    at = text.find("\"device_cycles\": ");
    if (at == std::string::npos) continue;
    cycles = text.substr(at + 17, text.find_first_of(",\n", at) - at - 17);
    if (cycles.size() > 1) record = entry.path();
  }
  REQUIRE(!record.empty());
  text.replace(at + 17, cycles.size(), cycles.substr(0, cycles.size() - 1));
  write_file(record.string(), text);
  const CommandResult report =
      run_command({tessera_binary(), "ab", "report", results.string(), "--quiet"}, ab_environment(dir));
  count_bad_input_case();
  CHECK_THAT(report.err, Catch::Contains("leaving out a record that does not carry your signature") &&
                             Catch::Contains(record.string()));
  const CommandResult resumed = run_command(ab(dir, results), ab_environment(dir));
  count_bad_input_case();
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK_THAT(resumed.err, Catch::Contains("redoing a stored record that does not carry your signature"));
  CHECK(read_file(record.string()).find("\"device_cycles\": " + cycles) != std::string::npos);

  // Then the item's logs: a symlink where its log folder goes, aimed at a file to destroy.
  fs::remove(record);
  const fs::path logs =
      record.parent_path().string().replace(record.parent_path().string().find("/records/"), 9, "/logs/");
  const std::string victim = dir.write("victim/repeat-0.compile.out", "precious\n");
  fs::remove_all(logs);
  fs::create_symlink(fs::path(victim).parent_path(), logs);
  const CommandResult planted = run_command(ab(dir, results), ab_environment(dir));
  check_clean_error(planted, {logs.string(), "symlink"});
  CHECK(read_file(victim) == "precious\n");
}

TEST_CASE("owned folders the history database is created 0600 and refused when another user can use it",
          "[robustness][owned]") {
  TempDir dir;
  const fs::path results = dir.path() / "results";
  const fs::path history = dir.path() / "history.sqlite";
  REQUIRE(run_command(ab(dir, results), ab_environment(dir)).exit_code == 0);
  REQUIRE(fs::is_regular_file(history));
  CHECK((fs::status(history).permissions() & fs::perms::mask) == (fs::perms::owner_read | fs::perms::owner_write));

  fs::permissions(history, fs::perms::all);  // 0666, as another user would leave it
  CommandResult r = run_command(ab(dir, results), ab_environment(dir));
  check_clean_error(r, {history.string(), "refusing the history database", "writable by others", "chmod 600"});
  if (other_user()) {
    fs::permissions(history, fs::perms::owner_read | fs::perms::owner_write);
    REQUIRE(::chown(history.c_str(), other_user()->uid, other_user()->gid) == 0);
    r = run_command(ab(dir, results), ab_environment(dir));
    check_clean_error(r, {history.string(), "refusing the history database", "is owned by uid"});
  }
}

TEST_CASE("owned folders a suite name that would leave the results root is refused", "[robustness][owned]") {
  TempDir dir;
  for (const std::string name : {"../../x", "x<!--<script>"}) {
    DYNAMIC_SECTION(name) {
      std::vector<std::string> command = ab(dir, dir.path() / "unused");
      const std::string suite = small_suite(dir, name);
      command.erase(command.begin() + 10, command.begin() + 12);  // no --results: the default, in the cache
      const CommandResult r = run_command(command, ab_environment(dir));
      check_clean_error(r, {suite, "suite name", "must use letters"});
    }
  }
}

TEST_CASE("owned folders reproducer, dump and phase folders of another user are refused, their links not followed",
          "[robustness][owned]") {
  TempDir dir;
  const std::string victim = dir.write("victim/keep.txt", "precious\n");
  const std::string pipeline = pipeline_with(dir, "  - {plugin: lower-mid}",
                                             "  - {plugin: lower-mid}\n  - {plugin: throwing-pass}", "throwing.yaml");
  auto compile_throwing = [&](const fs::path& reproducers) {
    return run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o",
                        (dir.path() / "out.tpkg").string(), "--reproducer-dir", reproducers.string()},
                       {"TESSERA_PLUGIN_PATH=" + kTestPlugins + "throwing-pass"});
  };
  {
    // A reproducer folder taken by someone else: the compile fails as it should, and says why no bundle.
    const fs::path taken = dir.path() / "taken";
    fs::create_directories(taken);
    give_away(taken);
    const CommandResult r = compile_throwing(taken);
    count_bad_input_case();
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.err, Catch::Contains("could not write a reproducer bundle") && Catch::Contains(taken.string()) &&
                          Catch::Contains(why_refused()));
    CHECK(fs::is_empty(taken));
  }
  {
    // A bundle name planted as a symlink is skipped: the bundle goes to the next free name.
    const fs::path reproducers = dir.path() / "mine";
    fs::create_directories(reproducers);
    fs::create_symlink(fs::path(victim).parent_path(), reproducers / "throwing-pass-1");
    const CommandResult r = compile_throwing(reproducers);
    CHECK_THAT(r.err, Catch::Contains(reproducers.string() + "/throwing-pass-2"));
    CHECK(fs::is_regular_file(reproducers / "throwing-pass-2" / "manifest.json"));
    CHECK(std::distance(fs::directory_iterator(fs::path(victim).parent_path()), {}) == 1);
  }
  for (const std::string option : {"--dump-dir", "--emit-phases"}) {
    DYNAMIC_SECTION(option) {
      const fs::path taken = dir.path() / ("taken" + option);
      fs::create_directories(taken);
      give_away(taken);
      std::vector<std::string> extra{option, taken.string()};
      if (option == "--dump-dir") extra.insert(extra.end(), {"--dump-after", "lower-mid"});
      const CommandResult r =
          compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), (dir.path() / "dumped.tpkg").string(), extra);
      check_clean_error(r, {taken.string(), why_refused()});
      CHECK(fs::is_empty(taken));
    }
  }
}

TEST_CASE("owned folders the default device lock lives in a folder of the user's own", "[robustness][owned]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  const fs::path runtime = dir.path() / "runtime";
  fs::create_directories(runtime);
  fs::permissions(runtime, fs::perms::owner_all);
  CommandResult r = run_command({tessera_binary(), "run", package}, {"XDG_RUNTIME_DIR=" + runtime.string()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_regular_file(runtime / "tessera" / "sim0.lock"));
  CHECK((fs::status(runtime / "tessera").permissions() & fs::perms::mask) == fs::perms::owner_all);

  // Without XDG_RUNTIME_DIR: $TMPDIR/tessera-UID, which another user may have made first.
  const fs::path shared = dir.path() / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  const fs::path folder = shared / ("tessera-" + std::to_string(::geteuid()));
  fs::create_directories(folder);
  give_away(folder);
  r = run_command({tessera_binary(), "run", package}, {"XDG_RUNTIME_DIR=", "TMPDIR=" + shared.string()});
  check_clean_error(r, {folder.string(), "the folder of the device lock", why_refused(), "XDG_RUNTIME_DIR"});
  fs::remove_all(folder);
  r = run_command({tessera_binary(), "run", package}, {"XDG_RUNTIME_DIR=", "TMPDIR=" + shared.string()});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK((fs::status(folder).permissions() & fs::perms::mask) == fs::perms::owner_all);
}

TEST_CASE("no shell from data: a Slurm job script passes --lock and paths as quoted literals", "[robustness][owned]") {
  TempDir dir;
  // A stand-in sbatch that accepts every job, so the scripts are written and can be run here.
  const std::string sbatch = dir.write("bin/sbatch", "#!/bin/sh\necho 4242\n");
  fs::permissions(sbatch, fs::perms::owner_all);
  const fs::path results = dir.path() / "results";
  const fs::path witness = dir.path() / "witness";
  const std::string lock = "$SLURM_TMPDIR/$(id > " + witness.string() + ")";
  std::vector<std::string> environment = ab_environment(dir);
  environment.push_back("PATH=" + (dir.path() / "bin").string() + ":/usr/bin:/bin");
  CommandResult r = run_command(ab(dir, results, {"--executor", "slurm", "--lock", lock}), environment);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const fs::path script = results / "slurm/submission-1/sweep.sh";
  const std::string text = read_file(script.string());
  CHECK_THAT(text, Catch::Contains("'--lock' '" + lock + "'") && Catch::Contains("\"$SLURM_ARRAY_TASK_ID\""));
  // Run as Slurm would: the lock is a literal path (whose folder does not exist), never a command.
  r = run_command(
      {"/bin/sh", script.string()},
      {"SLURM_ARRAY_TASK_ID=1", "TESSERA_PLUGIN_PATH=", "XDG_CONFIG_HOME=" + (dir.path() / "config").string()});
  count_bad_input_case();
  CHECK_THAT(r.err, Catch::Contains("run_exit=1"));
  CHECK_THAT(read_file((results / "logs/mlp-small@t16/greedy/repeat-0.run.log").string()),
             Catch::Contains("$SLURM_TMPDIR/$(id > " + witness.string() + ")"));
  CHECK_FALSE(fs::exists(witness));

  // A value that would add an option or a line to the submission is refused.
  r = run_command(ab(dir, dir.path() / "other", {"--executor", "slurm", "--partition", "debug --wrap=id"}),
                  environment);
  check_clean_error(r, {"sbatch --partition 'debug --wrap=id'", "letters, digits"});
}
