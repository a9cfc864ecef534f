// End-to-end: what a newcomer meets first. Quiet output, forgiving parsing, configs by name.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "run_command.hpp"
#include "temp_dir.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

std::size_t lines(const std::string& text) { return std::count(text.begin(), text.end(), '\n'); }

CommandResult run_tessera(std::vector<std::string> arguments, const std::vector<std::string>& environment = {}) {
  arguments.insert(arguments.begin(), tessera_binary());
  return run_command(arguments, environment);
}

// `tessera ARGS` run from `folder`, as a user in another folder would.
CommandResult run_tessera_in(const fs::path& folder, const std::vector<std::string>& arguments) {
  std::vector<std::string> command{"/bin/sh",       "-c", "cd \"$0\" && shift && exec \"$@\"",
                                   folder.string(), "sh", tessera_binary()};
  command.insert(command.end(), arguments.begin(), arguments.end());
  return run_command(command);
}

// A user error: exit 1, one `error:` line that contains every one of `needles`.
void check_user_error(const CommandResult& r, const std::vector<std::string>& needles) {
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(lines(r.err) == 1);
  CHECK_THAT(r.err, Catch::StartsWith("error: "));
  for (const std::string& needle : needles) CHECK_THAT(r.err, Catch::Contains(needle));
}

}  // namespace

TEST_CASE("compile prints its result line and nothing on stderr by default; -v and TESSERA_LOG bring logs back",
          "[e2e][cli]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  const CommandResult quiet = run_tessera({"compile", "mlp-small", "-p", "small", "-o", package});
  INFO(quiet.err);
  REQUIRE(quiet.exit_code == 0);
  CHECK(lines(quiet.out) == 1);
  CHECK_THAT(quiet.out, Catch::StartsWith("package=" + package + " tiles=16 "));
  CHECK(quiet.err.empty());  // not a terminal: no progress line either

  // Global flags after the subcommand; -v shows the phases.
  const CommandResult verbose = run_tessera({"compile", "mlp-small", "-p", "small", "-o", package, "-v"});
  REQUIRE(verbose.exit_code == 0);
  CHECK_THAT(verbose.err, Catch::Contains("package build phase finished phase=\"select_finalist\""));
  const CommandResult level =
      run_tessera({"compile", "mlp-small", "-p", "small", "-o", package, "--log-level", "info"});
  REQUIRE(level.exit_code == 0);
  CHECK_THAT(level.err, Catch::Contains("package build phase finished"));

  // One area only: the build's lines, not the plugin host's debug lines.
  const CommandResult area =
      run_tessera({"compile", "mlp-small", "-p", "small", "-o", package}, {"TESSERA_LOG=build=info"});
  REQUIRE(area.exit_code == 0);
  CHECK_THAT(area.err, Catch::Contains("package build phase finished"));
  CHECK_THAT(area.err, !Catch::Contains("tessera.runtime") && !Catch::Contains("loaded libraries in children"));
  const CommandResult other_area =
      run_tessera({"compile", "mlp-small", "-p", "small", "-o", package}, {"TESSERA_LOG=runtime=debug"});
  REQUIRE(other_area.exit_code == 0);
  CHECK(other_area.err.empty());

  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "-o", package}, {"TESSERA_LOG=build=loud"}),
                   {"TESSERA_LOG", "unknown log level 'loud'"});
}

TEST_CASE("a mistyped command or option gets the nearest name and exit 1", "[e2e][cli]") {
  check_user_error(run_tessera({"compil"}), {"unknown command 'compil'", "did you mean 'compile'?"});
  check_user_error(run_tessera({"plugins", "lst"}), {"tessera plugins: unknown command 'lst'", "did you mean 'list'?"});
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "--jsn", "x.json"}),
                   {"tessera compile: unknown option '--jsn'", "did you mean '--json'?"});
  check_user_error(run_tessera({}), {"no command given", "compile"});
  check_user_error(run_tessera({"plugins"}), {"tessera plugins: no command given", "list, info"});
  // Unsigned options refuse negative numbers instead of wrapping them.
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "-o", "x.tpkg", "--schedule-budget-ms", "-5"}),
                   {"--schedule-budget-ms"});
  // '-' is not a file.
  check_user_error(run_tessera({"compile", "-", "-p", "small", "-o", "x.tpkg"}), {"'-'", "give a file name"});
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "-o", "-"}), {"-o -", "give a file name"});
}

TEST_CASE("tessera help COMMAND prints that command's usage", "[e2e][cli]") {
  const CommandResult help = run_tessera({"help", "compile"});
  REQUIRE(help.exit_code == 0);
  CHECK_THAT(help.out, Catch::Contains("--pipeline") && Catch::Contains("--mkdir"));
  CHECK(help.out == run_tessera({"compile", "--help"}).out);
  const CommandResult nested = run_tessera({"help", "plugins", "info"});
  REQUIRE(nested.exit_code == 0);
  CHECK_THAT(nested.out, Catch::Contains("--plugin-path"));
  const CommandResult all = run_tessera({"help"});
  REQUIRE(all.exit_code == 0);
  CHECK_THAT(all.out, Catch::Contains("compile") && Catch::Contains("replay") && Catch::Contains("calibrate"));
  check_user_error(run_tessera({"help", "compil"}), {"did you mean 'compile'?"});
}

TEST_CASE("-o into a missing folder is an error unless --mkdir", "[e2e][cli]") {
  TempDir dir;
  const std::string package = (dir.path() / "missing/folder/small.tpkg").string();
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "-o", package}),
                   {"folder " + (dir.path() / "missing/folder").string() + " does not exist", "--mkdir"});
  CHECK_FALSE(fs::exists(dir.path() / "missing"));
  const CommandResult made = run_tessera({"compile", "mlp-small", "-p", "small", "-o", package, "--mkdir"});
  INFO(made.err);
  CHECK(made.exit_code == 0);
  CHECK(fs::is_regular_file(package));
}

TEST_CASE("shipped configs are found by name, and a copied pipeline still works", "[e2e][cli]") {
  TempDir dir;
  const std::string package = (dir.path() / "p.tpkg").string();
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "smal", "-o", package}),
                   {"'smal'", "did you mean 'small'?", "calibrated, default, optimized, small"});
  check_user_error(run_tessera({"compile", "mlp-smal", "-p", "small", "-o", package}), {"did you mean 'mlp-small'?"});
  check_user_error(run_tessera({"compile", "mlp-small", "-p", "small", "-t", "t61", "-o", package}), {"'t61'"});

  // The shipped pipeline copied into another folder, as the plugin guide says: same package.
  const std::string reference = (dir.path() / "reference.tpkg").string();
  REQUIRE(run_tessera({"compile", "mlp-small", "-p", "small", "-o", reference}).exit_code == 0);
  fs::create_directories(dir.path() / "elsewhere");
  const fs::path copy = dir.path() / "elsewhere/mine.yaml";
  fs::copy_file(source_path("configs/pipelines/small.yaml"), copy);
  const CommandResult copied =
      run_tessera_in(dir.path() / "elsewhere", {"compile", "mlp-small", "-p", "mine.yaml", "-o", "p.tpkg"});
  INFO(copied.err);
  REQUIRE(copied.exit_code == 0);
  std::ifstream a(reference, std::ios::binary), b(dir.path() / "elsewhere/p.tpkg", std::ios::binary);
  CHECK(std::string(std::istreambuf_iterator<char>(a), {}) == std::string(std::istreambuf_iterator<char>(b), {}));
}

TEST_CASE("demo works from any folder with names only", "[e2e][cli]") {
  TempDir dir;
  const CommandResult demo = run_tessera_in(dir.path(), {"demo", "--model", "mlp-small", "--pipeline", "small",
                                                         "--lock", (dir.path() / "device.lock").string()});
  INFO(demo.err);
  REQUIRE(demo.exit_code == 0);
  CHECK(demo.err.empty());
  CHECK_THAT(demo.out, Catch::Contains("package=tessera-demo/mlp-small.tpkg tiles=16 "));
  CHECK_THAT(demo.out, Catch::Contains("numericalTest=PASS"));
  CHECK(fs::is_regular_file(dir.path() / "tessera-demo/mlp-small.tpkg"));
}

TEST_CASE("an overlay's mistake is reported at the overlay's own line, and no temporary folder stays", "[e2e][cli]") {
  TempDir dir;
  const fs::path tmp = dir.path() / "tmp";
  fs::create_directories(tmp);
  const std::string overlay = dir.write("arm.yaml", "# my arm\nexchange_scheduler: {plugin: in-ordr}\n");
  const CommandResult compiled =
      run_tessera({"compile", "mlp-small", "-p", "small", "--overlay", overlay, "-o", (dir.path() / "x.tpkg").string()},
                  {"TMPDIR=" + tmp.string()});
  check_user_error(compiled, {overlay + ":2:", "unknown exchange scheduler 'in-ordr'", "did you mean 'in-order'?"});
  CHECK_THAT(compiled.err, !Catch::Contains(tmp.string()));

  const CommandResult ab = run_tessera({"ab", "--base", "small", "--suite", "quick", "--arm", "base=", "--arm",
                                        "mine=" + overlay, "--results", (dir.path() / "results").string()},
                                       {"TMPDIR=" + tmp.string()});
  check_user_error(ab, {overlay + ":2:", "did you mean 'in-order'?"});
  CHECK_THAT(ab.err, !Catch::Contains(tmp.string()));
  CHECK(fs::is_empty(tmp));
}

TEST_CASE("on a terminal, compile shows a progress line per pass and erases it", "[e2e][cli]") {
  TempDir dir;
  const std::string package = (dir.path() / "small.tpkg").string();
  // util-linux `script` gives the command a pseudo-terminal; its output is what the terminal got.
  const std::string command = "TERM=xterm " + tessera_binary() + " compile mlp-small -p small -o " + package;
  const CommandResult r = run_command({"/usr/bin/script", "-qfec", command, "/dev/null"});
  INFO(r.out << r.err);
  // A machine without /dev/pts (a bare chroot) has no terminal to show a progress line on.
  if (r.exit_code != 0 && (r.out + r.err).find("failed to create pseudo-terminal") != std::string::npos) {
    WARN("skipped: no pseudo-terminal here (/dev/pts is not mounted)");
    return;
  }
  REQUIRE(r.exit_code == 0);
  for (const char* pass : {"lower-mid", "select-finalist", "place-storage", "lower-exchanges", "emit-tile-code"})
    CHECK_THAT(r.out, Catch::Contains(std::string("passes done, elapsed ")) && Catch::Contains(pass));
  CHECK_THAT(r.out, Catch::Contains("\r\033[Kcompile mlp-small: 0/5 passes done, elapsed 0s, now lower-mid"));
  // Erased before the result line, which starts a clean line.
  CHECK_THAT(r.out, Catch::Contains("\r\033[Kpackage=" + package + " tiles=16 "));
}

TEST_CASE("docs/models.md lists exactly the shipped models, and the README every command", "[e2e][docs]") {
  std::ifstream models_doc(source_path("docs/models.md"));
  const std::string text((std::istreambuf_iterator<char>(models_doc)), {});
  const std::size_t section = text.find("## Shipped models");
  REQUIRE(section != std::string::npos);
  std::set<std::string> documented, shipped;
  std::istringstream rows(text.substr(section));
  for (std::string row; std::getline(rows, row);)
    if (row.rfind("| `", 0) == 0) documented.insert(row.substr(3, row.find('`', 3) - 3));
  for (const auto& entry : fs::directory_iterator(source_path("configs/models")))
    if (entry.path().extension() == ".yaml") shipped.insert(entry.path().stem().string());
  CHECK(documented == shipped);

  // Every command `tessera help` lists has a line in the README's command block.
  std::ifstream readme_file(source_path("README.md"));
  const std::string readme((std::istreambuf_iterator<char>(readme_file)), {});
  const CommandResult help = run_tessera({"help"});
  REQUIRE(help.exit_code == 0);
  std::istringstream lines_of_help(help.out.substr(help.out.find("Subcommands:")));
  std::size_t commands = 0;
  for (std::string line; std::getline(lines_of_help, line);) {
    std::istringstream words(line);
    std::string command;
    if (!(words >> command) || command == "Subcommands:") continue;
    ++commands;
    CHECK_THAT(readme, Catch::Contains("\ntessera " + command + " "));
  }
  CHECK(commands >= 14);
}
