// Outputs and the device lock in folders other users can write: planted symlinks and files,
// stale temporaries, signals. Run as root, a second unprivileged user plants the traps.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>

#include "bad_input_checks.hpp"
#include "tessera/output_file.hpp"

using namespace tessera::testing;
namespace fs = std::filesystem;

namespace {

// The shell words that run a command as the other user, or nothing (as ourselves) without one.
std::string as_planter() {
  if (!other_user()) return "";
  return "setpriv --reuid=" + std::to_string(other_user()->uid) + " --regid=" + std::to_string(other_user()->gid) +
         " --clear-groups ";
}

// A world-writable sticky folder like /tmp inside `dir`, which the other user can reach.
fs::path shared_folder(const TempDir& dir) {
  fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                  fs::perms::others_read | fs::perms::others_exec);
  const fs::path shared = dir.path() / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms::all | fs::perms::sticky_bit);
  return shared;
}

// Runs `plant` (a shell command using $P, the name the writer used to take: `.NAME.tmp-PID`
// with the pid of the command that follows, since exec keeps it), then `tessera ARGUMENTS`.
CommandResult plant_then_run(const std::string& plant, const fs::path& folder, const std::string& name,
                             const std::vector<std::string>& arguments) {
  std::vector<std::string> command{
      "/bin/sh",       "-c",     "P=\"$0/." + name + ".tmp-$$\"; " + plant + " || exit 97; shift; exec \"$@\"",
      folder.string(), "unused", tessera_binary()};
  command.insert(command.end(), arguments.begin(), arguments.end());
  return run_command(command);
}

struct stat status_of(const std::string& path) {
  struct stat status {};
  REQUIRE(::lstat(path.c_str(), &status) == 0);
  return status;
}

pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

bool has_temporary(const fs::path& folder) {
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("shared folders a symlink planted at the temporary's name never redirects the package",
          "[robustness][shared]") {
  TempDir dir;
  const fs::path shared = shared_folder(dir);
  const std::string victim = dir.write("victim.txt", "precious\n");
  const std::string package = (shared / "x.tpkg").string();
  const std::string pipeline = pipeline_with(dir, "passes:", "passes:");
  auto r = plant_then_run(as_planter() + "ln -s " + victim + " \"$P\"", shared, "x.tpkg",
                          {"compile", kSmallModel, "-p", pipeline, "-o", package});
  count_bad_input_case();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(read_file(victim) == "precious\n");
  const struct stat written = status_of(package);
  CHECK(S_ISREG(written.st_mode));
  CHECK(written.st_uid == ::geteuid());
  CHECK((written.st_mode & 07777) == 0644);
}

TEST_CASE("shared folders a file planted at the temporary's name never becomes the package", "[robustness][shared]") {
  TempDir dir;
  const fs::path shared = shared_folder(dir);
  const std::string package = (shared / "x.tpkg").string();
  const std::string pipeline = pipeline_with(dir, "passes:", "passes:");
  // The planter keeps a writable handle on the file it planted: were it published, the planter
  // would own the package.
  auto r = plant_then_run(as_planter() + "sh -c 'echo planted > \"$1\" && chmod 666 \"$1\"' sh \"$P\"", shared,
                          "x.tpkg", {"compile", kSmallModel, "-p", pipeline, "-o", package});
  count_bad_input_case();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const struct stat written = status_of(package);
  CHECK(written.st_uid == ::geteuid());
  CHECK((written.st_mode & 07777) == 0644);
  CHECK(read_file(package) != "planted\n");
  if (!other_user()) WARN("not root: the traps were planted by the same user");
}

TEST_CASE("shared folders temporaries of dead processes are removed at the next write", "[robustness][shared]") {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  fs::create_directories(out);
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getpid());
  const std::string stale = dir.write("out/.x.tpkg.tmp-" + dead + "-Ab3dE9", "half a package");
  const std::string stale_old_name = dir.write("out/.x.tpkg.tmp-" + dead, "half a package");
  const std::string stale_other_file = dir.write("out/.report.html.tmp-" + dead + "-zzzzzz", "half a page");
  const std::string live = dir.write("out/.x.tpkg.tmp-" + alive + "-Ab3dE9", "being written");
  const std::string not_ours = dir.write("out/.notes.tmp-draft", "a user's file");
  std::optional<std::string> foreign;
  if (other_user()) {
    foreign = dir.write("out/.y.tpkg.tmp-" + dead + "-qwerty", "another user's");
    REQUIRE(::chown(foreign->c_str(), other_user()->uid, other_user()->gid) == 0);
  }
  const std::string package = (out / "x.tpkg").string();
  auto r = compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package);
  count_bad_input_case();
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(stale));
  CHECK_FALSE(fs::exists(stale_old_name));
  CHECK_FALSE(fs::exists(stale_other_file));
  CHECK(fs::exists(live));
  CHECK(fs::exists(not_ours));
  if (foreign) CHECK(fs::exists(*foreign));
}

TEST_CASE("shared folders every catchable signal removes the temporary and still kills", "[robustness][shared]") {
  for (int signal_number :
       {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGALRM, SIGQUIT, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF}) {
    DYNAMIC_SECTION("signal " << signal_number << " (" << strsignal(signal_number) << ")") {
      TempDir dir;
      const std::string path = (dir.path() / "x.out").string();
      std::fflush(nullptr);
      const pid_t child = ::fork();
      if (child == 0) {
        const rlimit no_core{0, 0};  // SIGQUIT dumps core by default
        ::setrlimit(RLIMIT_CORE, &no_core);
        tessera::remove_temporary_files_on_signals();
        tessera::AtomicFileWriter writer(path, "test output");
        writer.write("half of it");
        ::raise(signal_number);  // the signal arrives mid-write, deterministically
        ::_exit(99);
      }
      int status = 0;
      REQUIRE(::waitpid(child, &status, 0) == child);
      count_bad_input_case();
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == signal_number);
      CHECK_FALSE(fs::exists(path));
      CHECK_FALSE(has_temporary(dir.path()));
    }
  }
}

TEST_CASE("shared folders the device lock refuses symlinks, other users' files and files with data",
          "[robustness][shared]") {
  TempDir dir;
  const fs::path shared = shared_folder(dir);
  const std::string package = (dir.path() / "small.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  const std::string victim = dir.write("victim.txt", "precious\n");
  const auto run_with_lock = [&](const std::string& lock) {
    return run_command({tessera_binary(), "run", package, "--lock", lock});
  };

  const std::string symlink = (shared / "symlink.lock").string();
  REQUIRE(run_command({"/bin/sh", "-c", as_planter() + "ln -s \"$0\" \"$1\"", victim, symlink}).exit_code == 0);
  check_clean_error(run_with_lock(symlink), {symlink, "symbolic link", "--lock"});
  CHECK(read_file(victim) == "precious\n");

  const std::string with_data = dir.write("notes.txt", "a user's notes\n");
  check_clean_error(run_with_lock(with_data), {with_data, "holds other data"});
  CHECK(read_file(with_data) == "a user's notes\n");

  if (other_user()) {
    const std::string foreign = (shared / "foreign.lock").string();
    REQUIRE(run_command({"/bin/sh", "-c", as_planter() + "touch \"$0\"", foreign}).exit_code == 0);
    check_clean_error(run_with_lock(foreign), {foreign, "owned by uid " + std::to_string(other_user()->uid)});
  }

  // Our own lock file, with the pid note a previous run left, is reused.
  const std::string mine = (dir.path() / "mine.lock").string();
  REQUIRE(run_with_lock(mine).exit_code == 0);
  write_file(mine, "12345\n");
  CHECK(run_with_lock(mine).exit_code == 0);
}

TEST_CASE("shared folders the default device lock is per user and refuses a planted symlink", "[robustness][shared]") {
  TempDir dir;
  const fs::path shared = shared_folder(dir);
  const std::string package = (dir.path() / "small.tpkg").string();
  REQUIRE(compile(kSmallModel, pipeline_with(dir, "passes:", "passes:"), package).exit_code == 0);
  const std::vector<std::string> environment{"TMPDIR=" + shared.string(), "XDG_RUNTIME_DIR="};
  const fs::path folder = shared / ("tessera-" + std::to_string(::geteuid()));
  const std::string lock = (folder / "sim0.lock").string();

  // The folder is ours (0700), so only we could plant a symlink in it; the lock still refuses one.
  const std::string victim = dir.write("victim.txt", "precious\n");
  fs::create_directories(folder);
  fs::permissions(folder, fs::perms::owner_all);
  fs::create_symlink(victim, lock);
  check_clean_error(run_command({tessera_binary(), "run", package}, environment), {lock, "symbolic link"});
  CHECK(read_file(victim) == "precious\n");

  fs::remove(lock);
  auto r = run_command({tessera_binary(), "run", package}, environment);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::is_regular_file(lock));
  // Another user's default lock is in another folder, so theirs cannot lock us out.
  if (other_user()) {
    const std::string theirs = (shared / ("tessera-" + std::to_string(other_user()->uid))).string();
    REQUIRE(run_command({"/bin/sh", "-c", as_planter() + "mkdir -m 700 \"$0\" && touch \"$0/sim0.lock\"", theirs})
                .exit_code == 0);
    CHECK(run_command({tessera_binary(), "run", package}, environment).exit_code == 0);
  }
}
