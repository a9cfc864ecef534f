// StrictModes for plugins: folders and libraries other users own or can write, up to /;
// plugin paths relative to the current folder; libraries shipped inside a reproducer bundle.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>

#include "bad_input_checks.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

const std::string kThrowingPass = kTestPlugins + "throwing-pass/test-throwing-pass.so";
constexpr fs::perms kOwnerWritable = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                     fs::perms::others_read | fs::perms::others_exec;

// `folder` (and its parents) created 0755 with a copy of the throwing pass in it; returns the copy.
std::string plugin_folder_with_library(const fs::path& folder) {
  fs::create_directories(folder);
  for (fs::path path = folder; path.has_relative_path(); path = path.parent_path()) {
    if (fs::equivalent(path, fs::temp_directory_path())) break;
    fs::permissions(path, kOwnerWritable);
  }
  const fs::path library = folder / "test-throwing-pass.so";
  fs::copy_file(kThrowingPass, library);
  fs::permissions(library, kOwnerWritable);
  return library.string();
}

CommandResult list_plugins_from(const std::string& plugin_path) {
  return run_command({tessera_binary(), "plugins", "list"}, {"TESSERA_PLUGIN_PATH=" + plugin_path});
}

}  // namespace

TEST_CASE("strict modes refuse a plugin folder writable by others", "[robustness][strict-modes]") {
  TempDir dir;
  const fs::path folder = dir.path() / "plugins";
  plugin_folder_with_library(folder);
  fs::permissions(folder, fs::perms::others_write, fs::perm_options::add);
  check_clean_error(
      list_plugins_from(folder.string()),
      {folder.string() + ": refusing to load plugins: the plugin folder is writable by others (mode 0757)",
       "fix: chmod go-w " + folder.string()});
  count_bad_input_case();
  // The fix the message names is enough.
  fs::permissions(folder, kOwnerWritable);
  const CommandResult fixed = list_plugins_from(folder.string());
  INFO(fixed.err);
  CHECK(fixed.exit_code == 0);
  CHECK_THAT(fixed.out, Catch::Contains("throwing-pass"));
}

TEST_CASE("strict modes refuse a library or a folder owned by another user", "[robustness][strict-modes]") {
  if (!other_user()) {
    WARN("skipped: needs root to create the user tessera-robustness");
    return;
  }
  TempDir dir;
  const fs::path folder = dir.path() / "plugins";
  const std::string library = plugin_folder_with_library(folder);
  const std::string owner = "owned by uid " + std::to_string(other_user()->uid) + " (tessera-robustness)";
  REQUIRE(::chown(library.c_str(), other_user()->uid, other_user()->gid) == 0);
  check_clean_error(
      list_plugins_from(folder.string()),
      {library + ": refusing to load plugins: the plugin library is " + owner, "fix: chown root " + library});
  count_bad_input_case();
  // Through a pipeline's plugin_paths as well, and for the folder itself.
  REQUIRE(::chown(library.c_str(), 0, 0) == 0);
  REQUIRE(::chown(folder.c_str(), other_user()->uid, other_user()->gid) == 0);
  check_clean_failure(
      compile(kSmallModel, pipeline_with_plugin_dir(dir, folder.string()), (dir.path() / "p.tpkg").string()),
      {folder.string() + ": refusing to load plugins: the plugin folder is " + owner}, dir.path(), "p.tpkg");
  count_bad_input_case();
}

TEST_CASE("strict modes refuse an ancestor folder writable by others unless it is sticky",
          "[robustness][strict-modes]") {
  TempDir dir;
  const fs::path shared = dir.path() / "shared";
  const fs::path folder = shared / "team" / "plugins";
  plugin_folder_with_library(folder);
  fs::permissions(shared, fs::perms::all);  // 0777: anyone could rename `team` and put their own in its place
  check_clean_error(list_plugins_from(folder.string()),
                    {shared.string() + ": refusing to load plugins: the folder above " + folder.string() +
                         " is writable by group and others (mode 0777)",
                     "fix: chmod go-w " + shared.string()});
  count_bad_input_case();
  // Sticky like /tmp: only the owner of `team` (us) can rename it, so the folder is accepted.
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  const CommandResult sticky = list_plugins_from(folder.string());
  INFO(sticky.err);
  CHECK(sticky.exit_code == 0);
  CHECK_THAT(sticky.out, Catch::Contains("throwing-pass"));
  // ... but not when another user owns the component below the sticky folder.
  if (other_user()) {
    REQUIRE(::chown((shared / "team").c_str(), other_user()->uid, other_user()->gid) == 0);
    check_clean_error(list_plugins_from(folder.string()),
                      {(shared / "team").string() + ": refusing to load plugins: the folder above " + folder.string() +
                       " is owned by uid " + std::to_string(other_user()->uid)});
    count_bad_input_case();
  }
  // A sticky folder is never scanned itself: anyone could drop a new library into it.
  fs::permissions(folder, fs::perms::all | fs::perms::sticky_bit);
  check_clean_error(
      list_plugins_from(folder.string()),
      {folder.string() + ": refusing to load plugins: the plugin folder is writable by group and others"});
  count_bad_input_case();
}

TEST_CASE("strict modes refuse relative and empty TESSERA_PLUGIN_PATH entries", "[robustness][strict-modes]") {
  const std::string plugins = std::string(TESSERA_BINARY_DIR) + "/plugins";
  check_clean_error(list_plugins_from("."),
                    {"TESSERA_PLUGIN_PATH: plugin path '.' is relative", "give an absolute folder"});
  check_clean_error(list_plugins_from("build/plugins"),
                    {"TESSERA_PLUGIN_PATH: plugin path 'build/plugins' is relative"});
  for (const std::string& with_empty_entry : {plugins + "::" + plugins, plugins + ":", ":" + plugins}) {
    INFO(with_empty_entry);
    check_clean_error(list_plugins_from(with_empty_entry),
                      {"TESSERA_PLUGIN_PATH: empty plugin path entry, which would mean the current folder"});
    count_bad_input_case();
  }
  // An empty variable names no folder at all, as when it is unset.
  CHECK(list_plugins_from("").exit_code == 0);
}

TEST_CASE("strict modes refuse an empty plugin_paths entry and a relative --plugin-path",
          "[robustness][strict-modes]") {
  TempDir dir;
  for (const std::string& entry : {std::string("\"\""), std::string("''"), std::string("~")}) {
    INFO(entry);
    const std::string pipeline = pipeline_with(dir, "plugin_paths: [", "plugin_paths: [" + entry + ", ");
    check_clean_failure(compile(kSmallModel, pipeline, (dir.path() / "p.tpkg").string()),
                        {pipeline + ":4:", "empty plugin_paths entry"}, dir.path(), "p.tpkg");
    count_bad_input_case();
  }
  const CommandResult relative =
      run_command({"/bin/sh", "-c", "cd \"$1\" && exec \"$2\" plugins list --plugin-path plugins", "sh",
                   std::string(TESSERA_BINARY_DIR), tessera_binary()});
  check_clean_error(relative, {"--plugin-path: plugin path 'plugins' is relative"});
  count_bad_input_case();
}

TEST_CASE("strict modes replay never loads a library from inside the bundle unless named",
          "[robustness][strict-modes]") {
  TempDir dir;
  const std::string pipeline =
      pipeline_with(dir, "  - {plugin: lower-mid}\n", "  - {plugin: lower-mid}\n  - {plugin: throwing-pass}\n");
  const CommandResult compiled =
      run_command({tessera_binary(), "compile", kSmallModel, "-p", pipeline, "-o", (dir.path() / "p.tpkg").string(),
                   "--reproducer-dir", (dir.path() / "bundles").string()},
                  {"TESSERA_PLUGIN_PATH=" + kTestPlugins + "throwing-pass"});
  REQUIRE(compiled.exit_code == 1);
  const fs::path bundle = dir.path() / "bundles" / "throwing-pass-1";
  REQUIRE(fs::is_directory(bundle));
  // A forged bundle ships its own library and points its pipeline at it instead of the original.
  const std::string shipped = plugin_folder_with_library(bundle / "lib");
  const std::string original_folder = fs::weakly_canonical(kTestPlugins + "throwing-pass").string();
  std::string bundled_pipeline = read_file((bundle / "pipeline.yaml").string());
  REQUIRE(bundled_pipeline.find(original_folder) != std::string::npos);
  bundled_pipeline.replace(bundled_pipeline.find(original_folder), original_folder.size(), "lib");
  write_file((bundle / "pipeline.yaml").string(), bundled_pipeline);
  const auto replay = [&](std::vector<std::string> extra) {
    std::vector<std::string> command{tessera_binary(), "replay", bundle.string()};
    command.insert(command.end(), extra.begin(), extra.end());
    return run_command(command, {"TESSERA_PLUGIN_PATH="});
  };
  check_clean_error(
      replay({}), {shipped + ": refusing to load a plugin library from inside the reproducer bundle " + bundle.string(),
                   "--trust-bundle-plugin FILE` naming " + shipped});
  count_bad_input_case();
  // Named on the command line, it is loaded and the replay reaches the plugin's own failure.
  const CommandResult trusted = replay({"--trust-bundle-plugin", shipped});
  CHECK(trusted.exit_code == 1);
  CHECK_THAT(trusted.err, Catch::Contains("run threw: deliberate failure"));
}
