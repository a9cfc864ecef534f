// An flock()ed lock file so that two processes never drive the same device.
#include "tessera/runtime/device_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "log.hpp"
#include "tessera/diagnostic.hpp"

namespace tessera::runtime {

std::string default_lock_path() {
  const char* directory = std::getenv("TMPDIR");
  std::string base = directory != nullptr && directory[0] != '\0' ? directory : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  return base + "/tessera-sim0.lock";
}

DeviceLock::DeviceLock(std::string path) : path_(std::move(path)) {}

DeviceLock::~DeviceLock() {
  release();
  if (fd_ >= 0) ::close(fd_);
}

void DeviceLock::open_file() {
  if (fd_ >= 0) return;
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0)
    throw Error(path_, 0, 0,
                fmt::format("cannot open the device lock file: {}; check that the directory "
                            "exists and is writable, or choose another lock path",
                            std::strerror(errno)));
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
        throw Error(path_, 0, 0,
                    fmt::format("cannot lock the device lock file: {}", std::strerror(errno)));
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
                                holder > 0 ? fmt::format(" (pid {})", holder) : "",
                                timeout.count()));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds{50});
    }
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  detail::logger().info("acquired device ownership path={} waited_ms={}", path_, waited.count());
}

void DeviceLock::release() {
  if (!held()) return;
  // Clear the owner first: after unlock the file belongs to the next holder.
  if (::ftruncate(fd_, 0) != 0) { /* only the pid note is stale; the lock is what matters */ }
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
