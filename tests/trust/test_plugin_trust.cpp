// Plugin trust: libraries and folders writable by group or others are refused; sha256 pins.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/plugin_host.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kSmallPipeline = source_path("configs/pipelines/small.yaml");
const std::string kGreedy = std::string(TESSERA_PLUGIN_DIR) + "/greedy.so";

// A private copy of the shipped greedy scheduler in `folder` (created 0755 under umask 022).
std::string copy_greedy(const fs::path& folder) {
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  const fs::path file = folder / "greedy.so";
  fs::copy_file(kGreedy, file, fs::copy_options::overwrite_existing);
  fs::permissions(file, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  return file.string();
}

std::string load_error(const std::function<void()>& load) {
  try {
    load();
  } catch (const tessera::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("plugin host refuses a library writable by group or by others", "[trust]") {
  TempDir dir;
  for (auto extra : {fs::perms::group_write, fs::perms::others_write}) {
    const std::string file = copy_greedy(dir.path() / "plugins");
    fs::permissions(file, extra, fs::perm_options::add);
    tessera::PluginHost host;
    const std::string error = load_error([&] { host.load_file(file); });
    INFO(error);
    CHECK_THAT(error, Catch::StartsWith(file + ": refusing to load plugins: the plugin library is writable by"));
    CHECK_THAT(error,
               Catch::Contains(extra == fs::perms::group_write ? "by its group (mode 0775)" : "by others (mode 0757)"));
    CHECK_THAT(error, Catch::Contains("fix: chmod go-w " + file));
    CHECK(host.find("greedy") == nullptr);
  }
  // The fix the message names works: the same file loads once it is only owner-writable.
  const std::string file = copy_greedy(dir.path() / "plugins");
  tessera::PluginHost host;
  CHECK(host.load_file(file).name == "greedy");
}

TEST_CASE("plugin host refuses a plugin folder writable by group or others", "[trust]") {
  TempDir dir;
  const fs::path folder = dir.path() / "shared-plugins";
  const std::string file = copy_greedy(folder);
  fs::permissions(folder, fs::perms::group_write | fs::perms::others_write, fs::perm_options::add);
  {
    tessera::PluginHost host;
    const std::string error = load_error([&] { host.load_directory(folder.string()); });
    CHECK_THAT(error, Catch::StartsWith(
                          folder.string() +
                          ": refusing to load plugins: the plugin folder is writable by group and others (mode 0777)"));
    CHECK_THAT(error, Catch::Contains("chmod go-w " + folder.string()));
  }
  {  // naming the file directly does not get round the folder check: anyone could swap it
    tessera::PluginHost host;
    const std::string error = load_error([&] { host.load_file(file); });
    CHECK_THAT(error, Catch::StartsWith(folder.string() + ": refusing to load plugins: the plugin folder"));
  }
  {  // a sticky shared folder (like /tmp) protects a named file but is never scanned
    fs::permissions(folder, fs::perms::sticky_bit, fs::perm_options::add);
    tessera::PluginHost host;
    CHECK(host.load_file(file).name == "greedy");
    tessera::PluginHost scanner;
    CHECK_THAT(load_error([&] { scanner.load_directory(folder.string()); }),
               Catch::Contains("writable by group and others"));
  }
}

TEST_CASE("cli refuses a group-writable plugin path from the pipeline and from TESSERA_PLUGIN_PATH", "[trust]") {
  TempDir dir;
  const fs::path folder = dir.path() / "extra";
  copy_greedy(folder);  // a second 'greedy' would also be a duplicate; the permission check comes first
  fs::permissions(folder, fs::perms::group_write, fs::perm_options::add);
  const std::string pipeline =
      pipeline_copy(dir, kSmallPipeline, "plugin_paths: [", "plugin_paths: [" + folder.string() + ", ");
  const CommandResult from_yaml = run_command({tessera_binary(), "compile", "--print-pipeline", "-p", pipeline});
  CHECK(from_yaml.exit_code == 1);
  CHECK_THAT(from_yaml.err, Catch::Contains("error: " + folder.string() + ": refusing to load plugins") &&
                                Catch::Contains("chmod go-w"));
  const CommandResult from_environment =
      run_command({tessera_binary(), "plugins", "list"}, {"TESSERA_PLUGIN_PATH=" + folder.string()});
  CHECK(from_environment.exit_code == 1);
  CHECK_THAT(from_environment.err, Catch::Contains(folder.string() + ": refusing to load plugins"));
}

TEST_CASE("file sha256 is the standard SHA-256 digest", "[trust]") {
  TempDir dir;
  CHECK(tessera::file_sha256(dir.write("abc.txt", "abc")) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(tessera::file_sha256(dir.write("empty.txt", "")) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // Larger than one read buffer (64 KiB), so the streaming path is exercised too.
  const std::string big(200000, 'a');
  const std::string file = dir.write("big.txt", big);
  const CommandResult reference = run_command({"/usr/bin/sha256sum", file});
  REQUIRE(reference.exit_code == 0);
  CHECK(tessera::file_sha256(file) == reference.out.substr(0, 64));
  CHECK_THROWS_AS(tessera::file_sha256((dir.path() / "missing").string()), tessera::Error);
}

TEST_CASE("pipeline sha256 pin accepts the library's digest and refuses any other", "[trust]") {
  TempDir dir;
  const std::string actual = tessera::file_sha256(kGreedy);
  SECTION("matching pin: the pipeline resolves and prints the pin") {
    const std::string pipeline =
        pipeline_copy(dir, kSmallPipeline, "{plugin: greedy}", "{plugin: greedy, sha256: " + actual + "}");
    const CommandResult r = run_command({tessera_binary(), "compile", "--print-pipeline", "-p", pipeline});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Catch::Contains("sha256: " + actual));
  }
  SECTION("upper-case hex is the same pin") {
    std::string upper = actual;
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string pipeline =
        pipeline_copy(dir, kSmallPipeline, "{plugin: greedy}", "{plugin: greedy, sha256: " + upper + "}");
    CHECK(run_command({tessera_binary(), "compile", "--print-pipeline", "-p", pipeline}).exit_code == 0);
  }
  SECTION("another digest: refused with the file, expected and actual, before anything is compiled") {
    std::string wrong = actual;
    wrong[10] = wrong[10] == '0' ? '1' : '0';
    const std::string pipeline =
        pipeline_copy(dir, kSmallPipeline, "{plugin: greedy}", "{plugin: greedy, sha256: " + wrong + "}");
    const std::string package = (dir.path() / "out.tpkg").string();
    const CommandResult r = run_command(
        {tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p", pipeline, "-o", package});
    CHECK(r.exit_code == 1);
    CHECK(r.signal == 0);
    CHECK_THAT(r.err, Catch::Contains("error: " + pipeline + ":6:") &&
                          Catch::Contains("plugin 'greedy' library " + fs::weakly_canonical(kGreedy).string()) &&
                          Catch::Contains("expected " + wrong) && Catch::Contains("actual " + actual) &&
                          Catch::Contains("refused before loading it"));
    CHECK_THAT(r.err, !Catch::Contains("package build phase"));
    CHECK_FALSE(fs::exists(package));
  }
  SECTION("a malformed pin is a YAML error at its place") {
    const std::string pipeline =
        pipeline_copy(dir, kSmallPipeline, "{plugin: greedy}", "{plugin: greedy, sha256: abc123}");
    const CommandResult r = run_command({tessera_binary(), "compile", "--print-pipeline", "-p", pipeline});
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains(pipeline + ":6:") && Catch::Contains("'sha256' must be 64 hex digits"));
  }
}
