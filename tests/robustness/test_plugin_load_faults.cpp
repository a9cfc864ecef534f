// Libraries are loaded in a child first: a static initialiser that crashes, hangs, exits or
// allocates without bound costs that child, never the compiler. A folder scan skips the library
// with a warning, a pipeline naming it fails with what happened, and check-plugin fails.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;

namespace {

struct LoadFault {
  std::string name;      ///< the library is load-fault-NAME.so in its own test folder
  std::string happened;  ///< what the host says of it
  std::vector<std::string> environment;
};

const LoadFault kFaults[] = {
#if defined(__SANITIZE_ADDRESS__)  // ASan catches the child's SIGSEGV, reports it and aborts (abort_on_error=1)
    {"crash",
     "crashed while loading (in a static initialiser or the plugin's entry point): killed by signal 6 (SIGABRT)",
     {}},
#else
    {"crash", "crashed while loading (in a static initialiser or the plugin's entry point): killed by signal 11", {}},
#endif
    {"exit",
     "exited with status 0 while loading (in a static initialiser or the plugin's entry point), before the host "
     "could read its manifest: does a static initialiser call exit()?",
     {}},
#if !defined(__SANITIZE_ADDRESS__)  // ASan's allocator, not RLIMIT_AS, bounds a sanitized child
    {"allocate", "allocated past the memory limit of 4096 MiB while loading", {}},
#endif
    // Never returns, so any deadline is reached: a short one keeps the test fast.
    {"hang", "did not finish loading within 300 ms and was killed", {"TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS=300"}},
};

std::string folder_of(const LoadFault& fault) { return kTestPlugins + "load-fault-" + fault.name; }
std::string library_of(const LoadFault& fault) { return folder_of(fault) + "/load-fault-" + fault.name + ".so"; }

}  // namespace

TEST_CASE("a library failing in its static initialiser is skipped by a folder scan, with what happened",
          "[robustness][load]") {
  for (const LoadFault& fault : kFaults) {
    DYNAMIC_SECTION(fault.name) {
      const CommandResult r =
          run_command({tessera_binary(), "plugins", "list", "--plugin-path", folder_of(fault)}, fault.environment);
      INFO(r.err << r.out);
      CHECK(r.signal == 0);
      CHECK(r.exit_code == 0);
      CHECK_THAT(r.err, Catch::Contains("skipping " + library_of(fault) + ": " + fault.happened));
      CHECK_THAT(r.out, !Catch::Contains("load-fault-" + fault.name));
      if (fault.environment.empty()) CHECK_THAT(r.out, Catch::Contains("greedy"));  // the others still load
      count_bad_input_case();
    }
  }
}

TEST_CASE("a pipeline naming a library that fails while loading fails cleanly, naming it", "[robustness][load]") {
  for (const LoadFault& fault : kFaults) {
    if (!fault.environment.empty()) continue;  // the bundled plugins must load within the default limit
    DYNAMIC_SECTION(fault.name) {
      TempDir dir;
      const std::string pipeline =
          pipeline_with(dir, "plugin_paths: [", "plugin_paths: [" + folder_of(fault) + ", ", "p1.yaml");
      std::string text = read_file(pipeline);
      text.replace(text.find("{plugin: greedy}"), 16, "{plugin: load-fault-" + fault.name + "}");
      write_file(pipeline, text);
      const CommandResult r = compile(kSmallModel, pipeline, (dir.path() / "p.tpkg").string());
      check_clean_failure(
          r,
          {"cannot load exchange scheduler 'load-fault-" + fault.name + "'", library_of(fault) + ": " + fault.happened},
          dir.path(), "p.tpkg");
      CHECK(r.exit_code == 1);
    }
  }
}

TEST_CASE("check-plugin fails a library whose static initialiser fails, instead of dying with it",
          "[robustness][load]") {
  for (const LoadFault& fault : kFaults) {
    DYNAMIC_SECTION(fault.name) {
      const CommandResult r = run_command({tessera_binary(), "check-plugin", library_of(fault)}, fault.environment);
      INFO(r.err << r.out);
      CHECK(r.signal == 0);
      CHECK(r.exit_code == 1);
      CHECK_THAT(r.out, Catch::Contains("FAIL load: " + library_of(fault) + ": " + fault.happened));
      CHECK_THAT(r.out, Catch::Contains("checks=1 passed=0 failed=1"));
      count_bad_input_case();
    }
  }
}

TEST_CASE("a bad TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS is a clean error naming it", "[robustness][load]") {
  const CommandResult r =
      run_command({tessera_binary(), "plugins", "list"}, {"TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS=soon"});
  check_clean_error(r, {"TESSERA_PLUGIN_LOAD_TIME_LIMIT_MS=soon: not a number of milliseconds"});
}

// Loading every library in a child costs each compile; a library whose bytes loaded cleanly
// under this host is remembered (only then, and only in a folder the user alone can write).
TEST_CASE("libraries that loaded cleanly in a child are remembered; failures and untrusted caches are not",
          "[robustness][load]") {
  TempDir dir;
  const std::string cache = (dir.path() / "cache").string();
  const std::string remembered = cache + "/tessera/loaded-plugins";
  auto list = [&](const std::string& folder) {
    return run_command({tessera_binary(), "--log-level", "debug", "plugins", "list", "--plugin-path", folder},
                       {"XDG_CACHE_HOME=" + cache});
  };
  auto entries = [&] {
    std::size_t count = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(remembered)) ++count;
    return count;
  };
  const CommandResult first = list(TESSERA_PLUGIN_DIR);
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  CHECK_THAT(first.err, Catch::Contains("loaded libraries in children first"));
  const std::size_t shipped = entries();
  CHECK(shipped >= 10);
  const CommandResult second = list(TESSERA_PLUGIN_DIR);
  INFO(second.err);
  CHECK(second.exit_code == 0);
  CHECK_THAT(second.err, !Catch::Contains("loaded libraries in children first"));
  CHECK(second.out == first.out);

  // A failure is never remembered: the crash is found in a child every time.
  const LoadFault& crash = kFaults[0];
  for (int round = 0; round < 2; ++round) {
    const CommandResult r = list(folder_of(crash));
    CHECK_THAT(r.err, Catch::Contains("skipping " + library_of(crash) + ": " + crash.happened));
  }
  CHECK(entries() == shipped);

  // A cache folder others can write proves nothing: warned about, and children are used.
  std::filesystem::permissions(remembered, std::filesystem::perms::owner_all | std::filesystem::perms::group_write);
  const CommandResult untrusted = list(TESSERA_PLUGIN_DIR);
  INFO(untrusted.err);
  CHECK(untrusted.exit_code == 0);
  CHECK_THAT(untrusted.err, Catch::Contains("not remembering which plugin libraries load cleanly"));
  CHECK_THAT(untrusted.err, Catch::Contains("writable by its group"));
  CHECK_THAT(untrusted.err, Catch::Contains("loaded libraries in children first"));
}
