// Tests of the device lock: exclusion between holders and processes, release on death.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/runtime/device_lock.hpp"

using namespace tessera::runtime;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

/// Waits for `child` and returns its exit status, or -1 if it did not exit normally.
int exit_status(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("device lock excludes a second holder until released", "[runtime][lock]") {
  tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "sim0.lock").string();
  DeviceLock first(path);
  DeviceLock second(path);
  REQUIRE(first.try_acquire());
  CHECK(first.held());
  CHECK(first.holder_pid() == ::getpid());
  CHECK_FALSE(second.try_acquire());
  CHECK_THROWS_WITH(second.acquire(30ms), Contains(path) && Contains("busy") && Contains(std::to_string(::getpid())));
  first.release();
  CHECK_FALSE(first.held());
  CHECK(second.try_acquire());
  CHECK_FALSE(first.try_acquire());
}

TEST_CASE("device lock makes another process wait until the holder releases it", "[runtime][lock]") {
  tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "sim0.lock").string();
  DeviceLock held(path);
  REQUIRE(held.try_acquire());
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child blocks until the parent releases; exit 0 if it had to wait 150 ms or more.
    int code = 3;
    try {
      DeviceLock mine(path);
      if (mine.try_acquire()) ::_exit(2);  // the parent's lock did not exclude us
      const auto start = std::chrono::steady_clock::now();
      mine.acquire();
      code = std::chrono::steady_clock::now() - start >= 150ms ? 0 : 1;
    } catch (...) {}
    ::_exit(code);
  }
  std::this_thread::sleep_for(300ms);
  held.release();
  CHECK(exit_status(child) == 0);
}

TEST_CASE("device lock is released when its holder dies", "[runtime][lock]") {
  tessera::testing::TempDir dir;
  const std::string path = (dir.path() / "sim0.lock").string();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    DeviceLock mine(path);
    const char ok = mine.try_acquire() ? 'y' : 'n';
    (void)::write(ready[1], &ok, 1);
    ::pause();  // holds the lock until killed
    ::_exit(0);
  }
  char answer = 0;
  REQUIRE(::read(ready[0], &answer, 1) == 1);
  REQUIRE(answer == 'y');
  DeviceLock mine(path);
  CHECK_FALSE(mine.try_acquire());
  CHECK(mine.holder_pid() == child);
  ::kill(child, SIGKILL);
  CHECK(exit_status(child) == -1);
  CHECK(mine.try_acquire());
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_CASE("device lock names the path when it cannot open the file", "[runtime][lock]") {
  DeviceLock lock("/nonexistent-directory-for-tessera/sim0.lock");
  CHECK_THROWS_AS(lock.try_acquire(), tessera::Error);
  CHECK_THROWS_WITH(lock.try_acquire(), Contains("/nonexistent-directory-for-tessera/sim0.lock"));
}

TEST_CASE("default lock path is in XDG_RUNTIME_DIR, else in a 0700 folder of the user's in TMPDIR", "[runtime][lock]") {
  const char* saved_tmpdir = std::getenv("TMPDIR");
  const char* saved_runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string restore_tmpdir = saved_tmpdir ? saved_tmpdir : "",
                    restore_runtime = saved_runtime ? saved_runtime : "";
  tessera::testing::TempDir dir;
  ::setenv("XDG_RUNTIME_DIR", dir.path().c_str(), 1);
  CHECK(default_lock_path() == (dir.path() / "tessera/sim0.lock").string());
  ::unsetenv("XDG_RUNTIME_DIR");
  ::setenv("TMPDIR", (dir.path().string() + "/").c_str(), 1);
  const std::filesystem::path folder = dir.path() / ("tessera-" + std::to_string(::geteuid()));
  CHECK(default_lock_path() == (folder / "sim0.lock").string());
  CHECK((std::filesystem::status(folder).permissions() & std::filesystem::perms::mask) ==
        std::filesystem::perms::owner_all);
  std::filesystem::permissions(folder, std::filesystem::perms::all);  // others could plant a lock in it
  CHECK_THROWS_WITH(default_lock_path(), Contains(folder.string()) && Contains("writable by"));
  if (saved_tmpdir) ::setenv("TMPDIR", restore_tmpdir.c_str(), 1);
  else ::unsetenv("TMPDIR");
  if (saved_runtime) ::setenv("XDG_RUNTIME_DIR", restore_runtime.c_str(), 1);
}
