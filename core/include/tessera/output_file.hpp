// Writing output files safely in shared folders: atomic replacement, temporaries that no
// other user can plant or redirect, cleanup on signals, and outputs that never destroy inputs.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

/// Writes a file atomically: the bytes go to a fresh temporary `.NAME.tmp-PID-XXXXXX` beside
/// `path` (created with O_EXCL|O_NOFOLLOW, so a file or symlink planted there by another user
/// is never opened), which is flushed, made mode 0644 and renamed over `path`. A failure, an
/// exception or a signal (see remove_temporary_files_on_signals) leaves `path` as it was and
/// no temporary behind. Opening also removes this user's temporaries of dead processes
/// (SIGKILL leftovers) from the folder.
class AtomicFileWriter {
public:
  /// `what` names the file in errors: "PATH: cannot write WHAT: reason".
  AtomicFileWriter(std::string path, std::string what);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  /// Flushes, closes and renames the temporary over the path; throws Error on failure.
  void commit();

private:
  [[noreturn]] void fail(int error_number);
  void discard() noexcept;
  std::string path_, what_, temporary_;
  int fd_ = -1;
  int slot_ = -1;
};

/// AtomicFileWriter in one call.
void write_file_atomically(const std::string& path, std::string_view contents, std::string_view what = "file");

/// Async-signal-safe: removes the temporary of every atomic write in progress.
void remove_temporary_files() noexcept;

/// Installs handlers for every catchable signal whose default action ends the process
/// (SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGALRM, SIGQUIT, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM,
/// SIGPROF) that remove the temporaries, then re-raise with the default action so the exit
/// status still names the signal. Ignores SIGXFSZ, so a write past RLIMIT_FSIZE fails with
/// EFBIG and a named error instead of killing the process mid-write.
void remove_temporary_files_on_signals();

/// A file a command reads, and what it is to the command ("the model", "the package").
struct InputFile {
  std::string path;
  std::string role;
};

/// Refuses, with an Error naming both files and the fix, an `output` (`role`: "-o", "--profile")
/// that is the same file (device and inode, so through links too) as one of `inputs`, or that
/// exists and is not a regular file (writing would replace a device node or a folder). Empty
/// paths are skipped: an absent output or input is not a conflict.
void check_output_file(const std::string& output, std::string_view role, const std::vector<InputFile>& inputs);

}  // namespace tessera
