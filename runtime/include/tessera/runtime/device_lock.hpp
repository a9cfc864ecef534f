// An flock()ed lock file so that two processes never drive the same device.
#pragma once
#include <chrono>
#include <string>

namespace tessera::runtime {

/// "$XDG_RUNTIME_DIR/tessera/sim0.lock", or "$TMPDIR/tessera-UID/sim0.lock" (/tmp when TMPDIR
/// is unset; UID the effective user id): a folder of the user's own, created 0700 when missing
/// and refused (Error naming it) when another user owns it or can write it.
std::string default_lock_path();

/// Exclusive ownership of a device, held through flock() on a lock file. The kernel
/// releases it when the holder closes the file or dies, so a crashed run never leaves the
/// device locked. Two DeviceLock objects exclude each other even in one process (each
/// opens the file itself). The holder's pid is written into the file for messages. The file
/// must be a regular file of the current user, not a symlink, holding nothing but that pid
/// note; anything else is refused with an Error naming the path, so a lock never overwrites data.
class DeviceLock {
public:
  explicit DeviceLock(std::string path);
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  /// Takes the lock if it is free; returns false at once if another holder has it.
  bool try_acquire();
  /// Waits for the lock, logging "waiting for device ownership" first. A zero timeout
  /// waits as long as it takes; otherwise throws Error naming the path and the holder's
  /// pid when the time runs out.
  void acquire(std::chrono::milliseconds timeout = std::chrono::milliseconds{0});
  void release();

  bool held() const { return fd_ >= 0 && held_; }
  const std::string& path() const { return path_; }
  /// The pid recorded by the current holder, or 0 when unknown.
  long holder_pid() const;

private:
  void open_file();
  void record_owner();
  std::string path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace tessera::runtime
