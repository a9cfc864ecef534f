// Running a program as a child process (no shell): output to files or captured, a deadline,
// a resource limit, and wait4's measurements. The one fork/exec every command, test and
// benchmark uses (the plugin host's isolated children have their own protocol: isolation.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera {

struct ProcessOptions {
  /// NAME=VALUE entries added to (or replacing in) the inherited environment.
  std::vector<std::string> environment;
  /// Where stdout and stderr go: a file path (created or truncated, mode 0644), or "" to
  /// capture the stream into ProcessResult (at most capture_limit bytes kept).
  std::string stdout_file = "/dev/null", stderr_file = "/dev/null";
  std::size_t capture_limit = std::size_t{16} << 20;
  /// Killed with SIGKILL (its whole group when own_process_group) after this; 0: no deadline.
  std::int64_t timeout_ms = 0;
  /// The child leads a process group of its own, and whatever of the group outlives it is
  /// killed when it exits (browsers and shells leave helpers behind).
  bool own_process_group = false;
  /// RLIMIT_FSIZE in the child: a write past it fails with EFBIG (a full disk, cheaply).
  std::optional<std::uint64_t> file_size_limit;
  /// Delivers `signal` to the child `signal_after_ms` after the start (fault injection); 0: none.
  int signal = 0;
  std::int64_t signal_after_ms = 0;
};

struct ProcessResult {
  int exit_code = -1;  ///< the exit status, or -1 when a signal ended it
  int signal = 0;      ///< the signal that ended it, or 0
  bool timed_out = false;
  double wall_ms = 0, user_ms = 0, system_ms = 0;  ///< user and system CPU time from wait4
  std::int64_t peak_rss_kib = 0;                   ///< the child's (or its largest waited-for descendant's)
  std::string out, err;                            ///< the captured streams
};

/// Runs `argv` (argv[0] a path; see find_in_path) and waits for it. Throws Error only when the
/// process cannot be started (an output file that cannot be created, fork failing); a program
/// that cannot be executed exits with 127.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// The full path of `program` in PATH ("/usr/bin:/bin" when unset), `program` itself when it
/// holds a '/', or "" when it is not there.
std::string find_in_path(const std::string& program);

}  // namespace tessera
