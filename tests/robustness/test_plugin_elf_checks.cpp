// ELF checks before dlopen: a truncated library (the loader used to SIGBUS), a library for
// another machine (the loader used to say "No such file or directory"), a text file named .so.
#include <catch2/catch.hpp>

#include <elf.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kGreedy = std::string(TESSERA_BINARY_DIR) + "/plugins/greedy.so";
constexpr fs::perms kOwnerWritable = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec;

// A 0755 folder (StrictModes accept it) holding `name` with `bytes` in it; returns the file.
std::string plugin_file(const fs::path& folder, const std::string& name, const std::string& bytes) {
  fs::create_directories(folder);
  for (fs::path path = folder; path.has_relative_path(); path = path.parent_path()) {
    if (fs::equivalent(path, fs::temp_directory_path())) break;
    fs::permissions(path, kOwnerWritable);
  }
  const fs::path file = folder / name;
  write_file(file.string(), bytes);
  fs::permissions(file, kOwnerWritable);
  return file.string();
}

std::string truncated_greedy() {
  const std::string bytes = read_file(kGreedy);
  REQUIRE(bytes.size() > 4096);
  return bytes.substr(0, bytes.size() / 2);
}

std::string greedy_for_aarch64() {
  std::string bytes = read_file(kGreedy);
  REQUIRE(bytes.size() > sizeof(Elf64_Ehdr));
  const std::uint16_t machine = EM_AARCH64;  // little endian, like the file
  std::memcpy(bytes.data() + offsetof(Elf64_Ehdr, e_machine), &machine, sizeof machine);
  return bytes;
}

CommandResult check_plugin(const std::string& file) { return run_command({tessera_binary(), "check-plugin", file}); }

// check-plugin on `library` fails cleanly (exit 1, no signal) with `message` in what it prints.
void check_plugin_refuses(const std::string& library, const std::string& message) {
  const CommandResult r = check_plugin(library);
  INFO(r.err << r.out);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out + r.err, Catch::Contains(message));
}

}  // namespace

TEST_CASE("a truncated plugin library is a clean error naming it, not SIGBUS", "[robustness][elf]") {
  TempDir dir;
  const fs::path folder = dir.path() / "plugins";
  const std::string bytes = truncated_greedy();
  const std::string library = plugin_file(folder, "greedy.so", bytes);
  const std::string has = "but the file has " + std::to_string(bytes.size()) + " bytes; rebuild or reinstall it";
  // A pipeline naming the plugin, with the truncated copy first on its plugin path.
  const CommandResult r =
      compile(kSmallModel, pipeline_with_plugin_dir(dir, folder.string()), (dir.path() / "p.tpkg").string());
  check_clean_failure(
      r, {"cannot load exchange scheduler 'greedy'", library + ": truncated: its segments end at byte", has},
      dir.path(), "p.tpkg");
  CHECK(r.exit_code == 1);
  // Named directly.
  check_plugin_refuses(library, library + ": truncated: its segments end at byte");
  count_bad_input_case();
}

TEST_CASE("a plugin library for another machine is named as such, not 'No such file or directory'",
          "[robustness][elf]") {
  TempDir dir;
  const fs::path folder = dir.path() / "plugins";
  const std::string library = plugin_file(folder, "greedy.so", greedy_for_aarch64());
  const CommandResult r =
      compile(kSmallModel, pipeline_with_plugin_dir(dir, folder.string()), (dir.path() / "p.tpkg").string());
  check_clean_failure(
      r, {library + ": not a shared library for this machine: built for aarch64 (e_machine 183), this tessera is"},
      dir.path(), "p.tpkg");
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, !Catch::Contains("No such file or directory"));
}

TEST_CASE("a text file named like a plugin library is 'not an ELF file'", "[robustness][elf]") {
  TempDir dir;
  const std::string library = plugin_file(dir.path() / "plugins", "libx.so", "this is not a library\n");
  check_plugin_refuses(library, library + ": not an ELF file");
  count_bad_input_case();
}

TEST_CASE("a folder scan skips broken libraries with a warning and lists the good ones", "[robustness][elf]") {
  TempDir dir;
  const fs::path folder = dir.path() / "plugins";
  const std::string truncated = plugin_file(folder, "greedy.so", truncated_greedy());
  const std::string foreign = plugin_file(folder, "arm.so", greedy_for_aarch64());
  const std::string text = plugin_file(folder, "libx.so", "not a library\n");
  const std::string good =
      plugin_file(folder, "test-throwing-pass.so", read_file(kTestPlugins + "throwing-pass/test-throwing-pass.so"));
  const CommandResult r =
      run_command({tessera_binary(), "plugins", "list"}, {"TESSERA_PLUGIN_PATH=" + folder.string()});
  INFO(r.err);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("throwing-pass") && Catch::Contains(good));
  CHECK_THAT(r.out, Catch::Contains("greedy"));  // the bundled one still loads
  CHECK_THAT(r.err, Catch::Contains("warning skipping " + truncated + ": truncated: its segments end at byte"));
  CHECK_THAT(r.err, Catch::Contains("warning skipping " + foreign +
                                    ": not a shared library for this machine: built for aarch64"));
  CHECK_THAT(r.err, Catch::Contains("warning skipping " + text + ": not an ELF file"));
  count_bad_input_case();
  // `plugins info` on the skipped name, with no good library of that name, gives the reason.
  fs::remove(truncated);
  plugin_file(folder, "only-here.so", truncated_greedy());
  const CommandResult info =
      run_command({tessera_binary(), "plugins", "info", "only-here"}, {"TESSERA_PLUGIN_PATH=" + folder.string()});
  INFO(info.err << info.out);
  CHECK(info.signal == 0);
  CHECK(info.exit_code == 1);
  CHECK_THAT(info.err, Catch::Contains((folder / "only-here.so").string() + ": truncated"));
  count_bad_input_case();
}
