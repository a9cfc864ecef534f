// Runs a child process (no shell) with its output in files, measuring wall and CPU time and peak RSS.
#pragma once
#include <string>
#include <vector>

#include "results.hpp"
#include "tessera/process.hpp"

namespace tessera::ab {

/// Runs `command` (argv[0] a path), stdout to `stdout_file` and stderr to `stderr_file`, and
/// waits for it with wait4: exit code or signal, wall time, user and system CPU time and the child's own peak RSS.
/// Throws Error only when the process cannot be started.
ProcessRecord run_process(const std::vector<std::string>& command, const std::string& stdout_file,
                          const std::string& stderr_file);

/// A program's output, read whole (for short outputs: squeue, sacct, sbatch).
struct CapturedOutput {
  int exit_code = -1;  ///< -1 when killed by a signal
  std::string out, err;
};

/// Runs `command` (argv[0] looked up in PATH) with its output in temporary files, read back.
/// Throws Error naming the program when it is not in PATH or cannot be started.
CapturedOutput run_captured(std::vector<std::string> command);

/// What a failed tessera process said: from its last "error:" line to the end (at most a
/// few lines), or the last `lines` lines when it printed no error line; "" when unreadable.
std::string error_excerpt(const std::string& path, std::size_t lines);

}  // namespace tessera::ab
