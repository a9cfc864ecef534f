// End-to-end: `tessera check-plugin` on shipped plugins (all PASS) and on faulty ones (FAIL with
// the reason), through the real binary.
#include <catch2/catch.hpp>

#include <string.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.hpp"
#include "sanitizer.hpp"
#include "temp_dir.hpp"
#include "tessera/version.hpp"

using namespace tessera::testing;

namespace {

std::string shipped(const std::string& name) { return std::string(TESSERA_PLUGIN_DIR) + "/" + name + ".so"; }
std::string test_plugin(const std::string& folder, const std::string& file) {
  return std::string(TESSERA_BINARY_DIR) + "/test-plugins/" + folder + "/" + file + ".so";
}

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);)
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  return found;
}

// The result line of check `name`, e.g. "FAIL multicast: crashed ...", or "" if absent.
std::string line_of(const std::string& text, const std::string& name) {
  for (const char* verdict : {"PASS ", "FAIL "})
    for (const auto& line : lines_starting(text, verdict)) {
      const std::string rest = line.substr(5);
      if (rest == name || rest.rfind(name + " ", 0) == 0 || rest.rfind(name + ":", 0) == 0) return line;
    }
  return "";
}

CommandResult check_plugin(const std::vector<std::string>& arguments) {
  std::vector<std::string> command = {tessera_binary(), "check-plugin"};
  command.insert(command.end(), arguments.begin(), arguments.end());
  return run_command(command);
}

// Every check passes, the summary counts them, and the exit code is 0.
void require_all_pass(const CommandResult& result, const std::vector<std::string>& expected_checks) {
  INFO(result.out << result.err);
  CHECK(result.exit_code == 0);
  CHECK(lines_starting(result.out, "FAIL ").empty());
  for (const auto& name : expected_checks) CHECK_THAT(line_of(result.out, name), Catch::StartsWith("PASS " + name));
  std::smatch summary;
  REQUIRE(std::regex_search(result.out, summary, std::regex("checks=([0-9]+) passed=([0-9]+) failed=0 ")));
  CHECK(summary[1] == summary[2]);
  CHECK(std::stoi(summary[1]) == static_cast<int>(lines_starting(result.out, "PASS ").size()));
}

const std::vector<std::string> kCommonChecks = {"load", "exports", "links-core", "manifest", "create", "create-twice"};

}  // namespace

TEST_CASE("check-plugin passes the shipped greedy scheduler on every check", "[sdk]") {
  std::vector<std::string> checks = kCommonChecks;
  for (const char* name : {"empty-phase-1-tile", "empty-phase-1472-tiles", "zero-word-transfer", "single-transfer",
                           "fan-out", "fan-in-switch-cost", "all-to-all", "multicast", "no-multicast-target",
                           "huge-words", "random-1472-ideal", "random-1472-latency", "deterministic", "time-budget"})
    checks.push_back(name);
  const CommandResult result = check_plugin({shipped("greedy")});
  require_all_pass(result, checks);
  CHECK_THAT(line_of(result.out, "load"),
             Catch::Contains("greedy 0.1.0, exchange scheduler, API 2." + std::to_string(tessera::kPluginApiMinor)));
  CHECK_THAT(line_of(result.out, "huge-words"), Catch::Contains("horizon="));
  CHECK_THAT(result.out, Catch::Contains("plugin=greedy kind=\"exchange scheduler\""));
}

TEST_CASE("check-plugin also checks a scheduler against a given target", "[sdk]") {
  const CommandResult result =
      check_plugin({shipped("greedy"), "--target", source_path("configs/targets/t16.yaml"), "--budget-ms", "200"});
  require_all_pass(result, {"random@t16", "fan-in@t16"});
  CHECK_THAT(line_of(result.out, "time-budget"), Catch::Contains("budget_ms=200"));
}

TEST_CASE("check-plugin passes the shipped analytic cost model on every check", "[sdk]") {
  std::vector<std::string> checks = kCommonChecks;
  for (const char* name : {"empty-program", "empty-exchange-phase", "monotone-matmul-macs", "monotone-elementwise",
                           "monotone-calls-per-tile", "monotone-supersteps", "monotone-copy-words",
                           "monotone-exchange-words", "monotone-exchange-fan-in", "peak-memory", "large-program"})
    checks.push_back(name);
  require_all_pass(check_plugin({shipped("analytic")}), checks);
}

TEST_CASE("check-plugin passes a shipped pass on its declarations and creation", "[sdk]") {
  std::vector<std::string> checks = kCommonChecks;
  checks.push_back("facts");
  const CommandResult result = check_plugin({shipped("lower-mid")});
  require_all_pass(result, checks);
  CHECK_THAT(line_of(result.out, "facts"), Catch::Contains("requires: graph; provides: canonical-graph"));
}

TEST_CASE("check-plugin fails a scheduler whose schedules break the rules, with the validator's reason", "[sdk]") {
  const CommandResult result = check_plugin({test_plugin("invalid-scheduler", "test-invalid-scheduler")});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  // Valid where starting everything at cycle 0 happens to be legal...
  CHECK_THAT(line_of(result.out, "single-transfer"), Catch::StartsWith("PASS "));
  CHECK_THAT(line_of(result.out, "empty-phase-1-tile"), Catch::StartsWith("PASS "));
  // ...and failed, naming the plugin and the conflict, everywhere else.
  CHECK_THAT(line_of(result.out, "fan-in-switch-cost"),
             Catch::StartsWith("FAIL fan-in-switch-cost: plugin 'all-at-once': returned an invalid schedule") &&
                 Catch::Contains("receive conflict: tile 0"));
  CHECK_THAT(line_of(result.out, "fan-out"), Catch::Contains("send conflict: tile 0"));
  CHECK_THAT(line_of(result.out, "zero-word-transfer"), Catch::Contains("carries no words"));
  CHECK_THAT(result.out, Catch::Contains("failed=11 plugin=all-at-once"));
}

TEST_CASE("check-plugin survives a scheduler that exits, crashes, hangs, drifts or oversleeps", "[sdk]") {
  const CommandResult result =
      check_plugin({test_plugin("erratic-scheduler", "test-erratic-scheduler"), "--timeout", "3", "--budget-ms", "50"});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  CHECK(result.signal == 0);
  CHECK_THAT(
      line_of(result.out, "zero-word-transfer"),
      Catch::Equals("FAIL zero-word-transfer: plugin code ended the process (exit status 3) instead of returning"));
  CHECK_THAT(line_of(result.out, "multicast"),
             Catch::Equals("FAIL multicast: crashed with signal " + std::to_string(kSegfaultSignal) + " (" +
                           ::strsignal(kSegfaultSignal) + ")"));
  CHECK_THAT(line_of(result.out, "huge-words"),
             Catch::Equals("FAIL huge-words: did not finish within 3 s and was killed"));
  CHECK_THAT(line_of(result.out, "deterministic"),
             Catch::StartsWith("FAIL deterministic: a second call on the same object returned another schedule: "
                               "segment 0 was (transfer 0, start 0, words "));
  CHECK_THAT(line_of(result.out, "time-budget"),
             Catch::StartsWith("FAIL time-budget: took ") &&
                 Catch::Contains("budget of 50 ms (allowed: 2 x budget + 100 ms = 200 ms)"));
  // Its serial schedules are valid, so the rest passes, and the battery went on after each fault.
  for (const char* name : {"single-transfer", "fan-in-switch-cost", "all-to-all", "random-1472-latency"})
    CHECK_THAT(line_of(result.out, name), Catch::StartsWith("PASS "));
  CHECK_THAT(result.out, Catch::Contains("checks=20 passed=15 failed=5 plugin=erratic-scheduler"));
}

TEST_CASE("check-plugin fails a cost model that is not monotone, not finite, or leaks symbols", "[sdk]") {
  const CommandResult result = check_plugin({test_plugin("careless-cost-model", "test-careless-cost-model")});
  INFO(result.out << result.err);
  CHECK(result.exit_code == 1);
  CHECK_THAT(line_of(result.out, "load"), Catch::StartsWith("PASS "));
  CHECK_THAT(line_of(result.out, "exports"), Catch::StartsWith("FAIL exports: exports ") &&
                                                 Catch::Contains("careless_manifest") &&
                                                 Catch::Contains("tessera_add_plugin()"));
  CHECK_THAT(
      line_of(result.out, "monotone-matmul-macs"),
      Catch::StartsWith("FAIL monotone-matmul-macs: 4^3 is estimated at 15625 cycles, fewer than 1^3 at 1000000"));
  CHECK_THAT(line_of(result.out, "empty-exchange-phase"),
             Catch::Equals("FAIL empty-exchange-phase: 18446744073709551615 cycles is not a finite estimate"));
  CHECK_THAT(line_of(result.out, "peak-memory"), Catch::StartsWith("FAIL peak-memory: peak_tile_bytes=0 is below"));
  CHECK_THAT(line_of(result.out, "monotone-copy-words"), Catch::StartsWith("PASS "));
}

TEST_CASE("check-plugin reports a library the host refuses as a failed load, and nothing else", "[sdk]") {
  TempDir dir;
  const std::string fake = dir.write("fake.so", "not an ELF file\n");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {test_plugin("no-entry", "no-entry"), "not a Tessera plugin"},
      {test_plugin("abi-major", "test-abi-major"), "plugin has 99." + std::to_string(tessera::kPluginApiMinor) +
                                                       ", host supports 2." + std::to_string(tessera::kPluginApiMinor)},
      {fake, "fake.so: not an ELF file"}};
  for (const auto& [file, reason] : refused) {
    const CommandResult result = check_plugin({file});
    INFO(result.out << result.err);
    CHECK(result.exit_code == 1);
    CHECK_THAT(result.out, Catch::StartsWith("FAIL load: ") && Catch::Contains(reason));
    CHECK(lines_starting(result.out, "PASS ").empty());
    CHECK_THAT(result.out, Catch::Contains("checks=1 passed=0 failed=1 plugin=- "));
  }
}
