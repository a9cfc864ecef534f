// Writing output files safely in shared folders: atomic replacement, temporaries that no
// other user can plant or redirect, cleanup on signals, and outputs that never destroy inputs.
#pragma once
#include <sys/types.h>

#include <string>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tessera {

/// Writes a file atomically: the bytes go to a fresh temporary `.NAME.tmp-PID-XXXXXX` beside
/// `path` (created with O_EXCL|O_NOFOLLOW, so a file or symlink planted there by another user
/// is never opened), which is flushed, made mode 0644 and renamed over `path`. A failure, an
/// exception or a signal (see remove_temporary_files_on_signals) leaves `path` as it was and
/// no temporary behind. Opening also removes this user's temporaries of dead processes
/// (SIGKILL leftovers) from the folder.
class OwnedFolder;
class AtomicFileWriter {
public:
  /// `what` names the file in errors: "PATH: cannot write WHAT: reason". Missing folders are
  /// created by a mkdirat walk; each one created is opened with O_NOFOLLOW.
  AtomicFileWriter(std::string path, std::string what);
  /// Writes `name` inside `folder`, relative to its descriptor: a folder swapped after the
  /// check is not followed.
  AtomicFileWriter(const OwnedFolder& folder, const std::string& name, std::string what);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view bytes);
  /// Overwrites bytes already written (a header whose contents are known last), not moving
  /// where write() goes on.
  void write_at(std::uint64_t offset, std::string_view bytes);
  /// Flushes, closes and renames the temporary over the path; throws Error on failure.
  void commit();

private:
  void open_temporary(const std::string& display_folder, const std::string& name);
  [[noreturn]] void fail(int error_number);
  void discard() noexcept;
  std::string path_, what_, name_, temporary_name_, temporary_;
  int folder_fd_ = -1;
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

/// A folder that is the caller's own, held open: results, reproducer, dump and cache folders,
/// where another user who could swap a folder for a symlink, or plant a file, would redirect
/// what we write or choose what we read back. Missing folders are created (mkdirat) and opened
/// with O_DIRECTORY|O_NOFOLLOW relative to the one above; files are made relative to the
/// descriptor, so a folder renamed or swapped after the check is never followed.
class OwnedFolder {
public:
  /// Opens `path` (`role`: "the results folder"), creating it and missing parents with `mode`.
  /// Refuses with an Error naming the folder, why and the fix: the folder (or a folder it
  /// creates) not owned by the caller or writable by group or others; a folder above it owned
  /// by another user (not root), or writable by group or others without the sticky bit; a
  /// symlink on the way that another user (not root) owns.
  OwnedFolder(const std::string& path, std::string role, mode_t mode = 0755);
  /// The same checks on an existing folder, never creating it: Error when it is missing.
  static OwnedFolder existing(const std::string& path, std::string role);
  ~OwnedFolder();
  OwnedFolder(OwnedFolder&& other) noexcept;
  OwnedFolder& operator=(OwnedFolder&&) = delete;
  OwnedFolder(const OwnedFolder&) = delete;

  /// The folder `relative` (components separated by '/', no "..") below this one, each
  /// created or checked like the folder itself.
  OwnedFolder folder(const std::string& relative, mode_t mode = 0755) const;
  /// A new file `name` for writing (a stream: child logs), opened O_CREAT|O_EXCL|O_NOFOLLOW
  /// after removing an older file of that name; returns the descriptor (O_CLOEXEC).
  int create_file(const std::string& name, std::string_view what, mode_t mode = 0644) const;
  /// `name` written atomically inside the folder (AtomicFileWriter).
  void write_file(const std::string& name, std::string_view bytes, std::string_view what) const;
  /// Copies the regular file `source` (read with O_NOFOLLOW on the last component) into `name`.
  void copy_file(const std::string& source, const std::string& name, std::string_view what) const;

  const std::string& path() const { return path_; }
  const std::string& role() const { return role_; }
  int descriptor() const { return fd_; }

private:
  OwnedFolder(int fd, std::string path, std::string role) : path_(std::move(path)), role_(std::move(role)), fd_(fd) {}
  std::string path_, role_;
  int fd_ = -1;
};

/// "uid 998 (tessera-robustness)": a user as errors name them (a number alone does not say whom to ask).
std::string describe_user(uid_t uid);

/// OwnedFolder::existing's checks on `path` when it exists; nothing when it does not.
void check_owned_folder_if_present(const std::string& path, std::string_view role);

/// Opens `path` for reading as `role`, refusing up front what is not a regular file (a FIFO
/// would block, a device would never end) and a file over `max_bytes`; the limit is applied
/// again while reading, so a file that grows is cut off with an Error, not read without end.
/// "-" reads stdin when `allow_stdin`. Errors name the file, what it is and the fix.
std::string read_bounded_file(const std::string& path, std::string_view role, std::uint64_t max_bytes,
                              bool allow_stdin = false);

/// read_bounded_file's opening and checks, for a reader that reads by range (pread): a blocking
/// descriptor of a regular file of at most `max_bytes`, whose size is set. The caller closes it.
int open_bounded_file(const std::string& path, std::string_view role, std::uint64_t max_bytes, std::uint64_t& size);

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
