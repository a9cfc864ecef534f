// run_process: captured and redirected output, environment, deadline, injected signal, file-size
// limit, a program that cannot run. Every check is on what the child did, not on how long it took.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/process.hpp"

using namespace tessera;
using tessera::testing::TempDir;

TEST_CASE("run_process captures both streams and the exit status", "[process]") {
  ProcessOptions options;
  options.stdout_file = options.stderr_file = "";
  const ProcessResult ran = run_process({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, options);
  CHECK(ran.exit_code == 3);
  CHECK(ran.signal == 0);
  CHECK_FALSE(ran.timed_out);
  CHECK(ran.out == "out\n");
  CHECK(ran.err == "err\n");
  CHECK(ran.peak_rss_kib > 0);
}

TEST_CASE("run_process writes streams to files and adds to the environment", "[process]") {
  TempDir dir;
  ProcessOptions options;
  options.stdout_file = (dir.path() / "out").string();
  options.environment = {"TESSERA_PROCESS_TEST=from-the-parent", "HOME=/replaced"};
  const ProcessResult ran =
      run_process({"/bin/sh", "-c", "echo $TESSERA_PROCESS_TEST $HOME; echo ${PATH:+path-kept}"}, options);
  CHECK(ran.exit_code == 0);
  std::ifstream in(options.stdout_file);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  CHECK(first == "from-the-parent /replaced");
  CHECK(second == "path-kept");
  CHECK(ran.out.empty());
}

TEST_CASE("run_process keeps at most capture_limit bytes and still drains the rest", "[process]") {
  ProcessOptions options;
  options.stdout_file = "";
  options.capture_limit = 1000;
  const ProcessResult ran = run_process({"/bin/sh", "-c", "head -c 1000000 /dev/zero; echo done >&2"}, options);
  CHECK(ran.exit_code == 0);  // not blocked on a full pipe
  CHECK(ran.out.size() == 1000);
}

TEST_CASE("run_process kills a child at its deadline and delivers an injected signal", "[process]") {
  ProcessOptions deadline;
  deadline.timeout_ms = 100;
  deadline.own_process_group = true;
  const ProcessResult slept = run_process({"/bin/sleep", "600"}, deadline);
  CHECK(slept.timed_out);
  CHECK(slept.signal == SIGKILL);
  CHECK(slept.exit_code == -1);

  ProcessOptions injected;
  injected.signal = SIGTERM;
  injected.signal_after_ms = 50;
  const ProcessResult terminated = run_process({"/bin/sleep", "600"}, injected);
  CHECK_FALSE(terminated.timed_out);
  CHECK(terminated.signal == SIGTERM);
}

TEST_CASE("run_process applies the file-size limit in the child only", "[process]") {
  TempDir dir;
  const std::string file = (dir.path() / "big").string();
  ProcessOptions options;
  options.file_size_limit = 4096;
  const ProcessResult ran = run_process({"/bin/sh", "-c", "head -c 100000 /dev/zero > " + file}, options);
  CHECK((ran.exit_code != 0 || ran.signal != 0));
  CHECK(std::filesystem::file_size(file) <= 4096);
}

TEST_CASE("run_process: a missing program exits 127; an output file it cannot create is an error", "[process]") {
  ProcessOptions options;
  options.stderr_file = "";
  const ProcessResult ran = run_process({"/nonexistent/program"}, options);
  CHECK(ran.exit_code == 127);
  CHECK(ran.err == "cannot execute /nonexistent/program\n");

  TempDir dir;
  ProcessOptions bad;
  bad.stdout_file = (dir.path() / "no-such-folder" / "out").string();
  CHECK_THROWS_WITH(run_process({"/bin/true"}, bad),
                    Catch::Contains("no-such-folder: cannot open the folder of the stdout file"));
  CHECK(find_in_path("sh") != "");
  CHECK(find_in_path("tessera-no-such-program") == "");
}
