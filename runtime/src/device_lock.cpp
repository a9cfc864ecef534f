// An flock()ed lock file so that two processes never drive the same device.
#include "tessera/runtime/device_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "log.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"

namespace tessera::runtime {

std::string default_lock_path() {
  // In a folder of the user's own: a lock file another user created first in a shared folder
  // would lock this user out, and a name they could predict is one they could take.
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string folder;
  if (runtime != nullptr && runtime[0] == '/') {
    folder = std::string(runtime) + "/tessera";
  } else {
    const char* directory = std::getenv("TMPDIR");
    std::string base = directory != nullptr && directory[0] == '/' ? directory : "/tmp";
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    folder = base + "/tessera-" + std::to_string(::geteuid());
  }
  try {
    return OwnedFolder(folder, "the folder of the device lock", 0700).path() + "/sim0.lock";
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; or set XDG_RUNTIME_DIR, or give --lock FILE");
  }
}

DeviceLock::DeviceLock(std::string path) : path_(std::move(path)) {}

DeviceLock::~DeviceLock() {
  release();
  if (fd_ >= 0) ::close(fd_);
}

namespace {

constexpr std::size_t kMaxOwnerNoteBytes = 32;

// A lock file holds nothing or the holder's pid note; anything else is someone's data that
// record_owner() would overwrite.
bool holds_only_owner_note(int fd, const struct stat& status) {
  if (status.st_size == 0) return true;
  if (status.st_size > static_cast<off_t>(kMaxOwnerNoteBytes)) return false;
  char text[kMaxOwnerNoteBytes] = {};
  const ssize_t got = ::pread(fd, text, sizeof(text), 0);
  if (got < 0) return false;
  return std::string_view(text, static_cast<std::size_t>(got)).find_first_not_of("0123456789\n") ==
         std::string_view::npos;
}

}  // namespace

void DeviceLock::open_file() {
  if (fd_ >= 0) return;
  // O_EXCL first: a file we create is ours. An existing one is opened without following a
  // symlink (one planted in a shared $TMPDIR would aim our writes at another file), and
  // without blocking or becoming a terminal, in case it is a FIFO or a device.
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP)
    throw Error(path_, 0, 0,
                "refusing the device lock file: it is a symbolic link (another user may have planted it to make "
                "the lock write elsewhere); remove it or choose another lock path with --lock");
  if (fd < 0)
    throw Error(path_, 0, 0,
                fmt::format("cannot open the device lock file: {}; check that the directory "
                            "exists and is writable, or choose another lock path",
                            std::strerror(errno)));
  struct stat status {};
  std::string problem;
  if (::fstat(fd, &status) != 0) problem = std::string("cannot inspect it: ") + std::strerror(errno);
  else if (!S_ISREG(status.st_mode)) problem = "it is not a regular file";
  else if (status.st_uid != ::geteuid())
    problem = fmt::format("it is owned by uid {}, not by you (uid {}), so another user controls it", status.st_uid,
                          ::geteuid());
  else if (status.st_nlink != 1)
    problem = fmt::format("it has {} hard links, so it is also another file", status.st_nlink);
  else if (!holds_only_owner_note(fd, status))
    problem = "it holds other data, which the lock's pid note would overwrite";
  if (!problem.empty()) {
    ::close(fd);
    throw Error(
        path_, 0, 0,
        fmt::format("refusing the device lock file: {}; remove it or choose another lock path with --lock", problem));
  }
  fd_ = fd;
}

bool DeviceLock::try_acquire() {
  if (held()) return true;
  open_file();
  while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return false;
    throw Error(path_, 0, 0, fmt::format("cannot lock the device lock file: {}", std::strerror(errno)));
  }
  held_ = true;
  record_owner();
  return true;
}

void DeviceLock::acquire(std::chrono::milliseconds timeout) {
  if (held()) return;
  open_file();
  detail::logger().info("waiting for device ownership path={}", path_);
  const auto started = std::chrono::steady_clock::now();
  if (timeout.count() <= 0) {
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR)
        throw Error(path_, 0, 0, fmt::format("cannot lock the device lock file: {}", std::strerror(errno)));
    }
    held_ = true;
    record_owner();
  } else {
    // flock has no timeout; poll, backing off up to 50 ms between tries.
    auto pause = std::chrono::milliseconds{1};
    while (!try_acquire()) {
      if (std::chrono::steady_clock::now() - started >= timeout) {
        const long holder = holder_pid();
        throw Error(path_, 0, 0,
                    fmt::format("the device is busy: another process{} holds its lock and did "
                                "not release it within {} ms; wait for it to finish or raise "
                                "the lock timeout",
                                holder > 0 ? fmt::format(" (pid {})", holder) : "", timeout.count()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds{50});
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  detail::logger().info("acquired device ownership path={} waited_ms={}", path_, waited.count());
}

void DeviceLock::release() {
  if (!held()) return;
  // Clear the owner first: after unlock the file belongs to the next holder.
  if (::ftruncate(fd_, 0) != 0) { /* only the pid note is stale; the lock is what matters */
  }
  ::flock(fd_, LOCK_UN);
  held_ = false;
}

void DeviceLock::record_owner() {
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The pid is only for messages; holding the lock is what counts.
    detail::logger().debug("could not record the owner in path={}: {}", path_, std::strerror(errno));
  }
}

long DeviceLock::holder_pid() const {
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[32] = {};
  const ssize_t got = ::pread(fd, text, sizeof(text) - 1, 0);
  ::close(fd);
  return got > 0 ? std::strtol(text, nullptr, 10) : 0;
}

}  // namespace tessera::runtime
