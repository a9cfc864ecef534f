// Atomic output files that are safe in shared folders, and the checks that keep outputs off inputs.
#include "tessera/output_file.hpp"

#include <dirent.h>
#include <pwd.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessera/diagnostic.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

// The temporaries of writes in progress, for remove_temporary_files() from a signal handler:
// fixed buffers and lock-free states, since a handler may not allocate or lock. Several
// slots, because threads (ab, select-finalist workers) may write at once.
enum SlotState : int { kFree, kBusy, kActive };
struct TemporarySlot {
  std::atomic<int> state{kFree};
  char path[4096];
};
static_assert(std::atomic<int>::is_always_lock_free);
std::array<TemporarySlot, 64> g_temporaries;

// Published before the file exists, so a signal never misses it; -1 when no slot is free
// (the write still works, only an interrupt could leave the temporary for the next write to clean).
int announce_temporary(const std::string& temporary) {
  if (temporary.size() >= sizeof(TemporarySlot::path)) return -1;
  for (std::size_t i = 0; i < g_temporaries.size(); ++i) {
    int expected = kFree;
    if (!g_temporaries[i].state.compare_exchange_strong(expected, kBusy)) continue;
    std::memcpy(g_temporaries[i].path, temporary.c_str(), temporary.size() + 1);
    g_temporaries[i].state.store(kActive);
    return static_cast<int>(i);
  }
  return -1;
}

void withdraw_temporary(int slot) {
  if (slot >= 0) g_temporaries[static_cast<std::size_t>(slot)].state.store(kFree);
}

constexpr std::string_view kTemporaryMarker = ".tmp-";
// A model or target copied into a reproducer bundle is read whole: bounded, like every input.
constexpr std::uint64_t kMaxCopiedFileBytes = std::uint64_t{2} << 30;

// The writer's pid in a temporary's name (".NAME.tmp-PID", older writers, or
// ".NAME.tmp-PID-XXXXXX"), or 0 when `name` is not one of ours.
pid_t temporary_owner(std::string_view name) {
  if (name.size() < 2 || name[0] != '.') return 0;
  const std::size_t marker = name.rfind(kTemporaryMarker);
  if (marker == std::string_view::npos || marker == 0) return 0;
  std::string_view rest = name.substr(marker + kTemporaryMarker.size());
  if (const std::size_t dash = rest.find('-'); dash != std::string_view::npos) {
    if (rest.size() - dash - 1 != 6) return 0;
    rest = rest.substr(0, dash);
  }
  if (rest.empty() || rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string_view::npos) return 0;
  return static_cast<pid_t>(std::stol(std::string(rest)));
}

// Temporaries left by this user's processes that died without cleaning up (SIGKILL, power
// loss). Another user's files and live processes' temporaries are never touched.
void remove_stale_temporaries(int directory_fd) {
  const int own_fd = ::fcntl(directory_fd, F_DUPFD_CLOEXEC, 0);  // closedir closes it
  DIR* folder = own_fd < 0 ? nullptr : ::fdopendir(own_fd);
  if (folder == nullptr) {
    if (own_fd >= 0) ::close(own_fd);
    return;
  }
  ::rewinddir(folder);
  const int folder_fd = ::dirfd(folder);
  while (const dirent* entry = ::readdir(folder)) {
    const pid_t owner = temporary_owner(entry->d_name);
    if (owner <= 0 || owner == ::getpid()) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive, or someone else's
    struct stat status {};
    if (::fstatat(folder_fd, entry->d_name, &status, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(status.st_mode) || status.st_uid != ::geteuid()) continue;
    ::unlinkat(folder_fd, entry->d_name, 0);
  }
  ::closedir(folder);
}

std::string random_suffix() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char bytes[6] = {};
  if (::getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    static std::atomic<unsigned> counter{0};  // no entropy: O_EXCL still keeps the name ours
    const unsigned value = counter.fetch_add(1) ^ static_cast<unsigned>(::getpid());
    std::memcpy(bytes, &value, sizeof(value));
  }
  std::string suffix;
  for (unsigned char byte : bytes) suffix += kAlphabet[byte % (sizeof(kAlphabet) - 1)];
  return suffix;
}

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Opens `path` as a folder, creating missing components one at a time (mkdirat) and opening
// each one it created with O_NOFOLLOW, so a folder swapped for a symlink between the mkdir and
// the open is not followed; components that exist are the user's path and are followed.
// Returns -1 with errno set on failure.
int open_folder_creating(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0 || errno != ENOENT) return fd;
  const fs::path normal = fs::path(path).lexically_normal();
  int current = ::open(normal.is_absolute() ? "/" : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const fs::path& part : normal.relative_path()) {
    const std::string name = part.string();
    if (current < 0) return -1;
    if (name.empty() || name == ".") continue;
    int next = ::openat(current, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (next < 0 && errno == ENOENT) {
      if (::mkdirat(current, name.c_str(), 0755) != 0 && errno != EEXIST) next = -1;
      else next = ::openat(current, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    const int saved = errno;
    ::close(current);
    errno = saved;
    current = next;
  }
  return current;
}

// "16777216 (16 MiB)": the exact limit, and one a person reads.
std::string size_text(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30) && bytes % (std::uint64_t{1} << 30) == 0)
    return fmt::format("{} ({} GiB)", bytes, bytes >> 30);
  if (bytes >= (std::uint64_t{1} << 20) && bytes % (std::uint64_t{1} << 20) == 0)
    return fmt::format("{} ({} MiB)", bytes, bytes >> 20);
  return std::to_string(bytes);
}

std::string user_name(uid_t uid) {
  const passwd* entry = ::getpwuid(uid);
  return entry ? entry->pw_name : std::to_string(uid);
}

std::string who_may_write(mode_t mode) {
  return (mode & S_IWGRP) && (mode & S_IWOTH) ? "group and others" : (mode & S_IWGRP) ? "its group" : "others";
}

// Why `folder` cannot hold `role` at `path`, or "" when it can. The folder itself and every
// folder we create must be the caller's and writable by no one else; a folder above may also be
// root's, and sticky (like /tmp), where only an entry's owner can rename or remove it.
std::string folder_problem(const struct stat& info, bool must_be_mine, const std::string& folder,
                           const std::string& path, std::string_view role) {
  const uid_t me = ::geteuid();
  const std::string what = folder == path
                               ? fmt::format("{}: refusing to use it as {}: it", path, role)
                               : fmt::format("{}: refusing to use {} as {}: the folder above it", folder, path, role);
  if (!S_ISDIR(info.st_mode)) return fmt::format("{} is {}; give a folder", what, file_kind(info.st_mode));
  if (info.st_uid != me && (must_be_mine || info.st_uid != 0))
    return fmt::format(
        "{} is owned by {}, not by you ({}), so that user could change what tessera writes and reads back there; "
        "fix: give a folder of your own",
        what, describe_user(info.st_uid), describe_user(me));
  const bool sticky = (info.st_mode & S_ISVTX) != 0;
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (must_be_mine || !sticky))
    return fmt::format(
        "{} is writable by {} (mode {:04o}), so another user could swap what is in it; fix: chmod go-w {}", what,
        who_may_write(info.st_mode), info.st_mode & 07777, folder);
  return "";
}

// Opens `path` (absolute after `fs::absolute`) for `role` through a walk from '/' that opens
// every component with O_NOFOLLOW and checks it (folder_problem), creating what is missing when
// `create`. Symlinks in the path as given are resolved first, and must be the caller's or root's.
int open_owned(const std::string& path, std::string_view role, mode_t mode, bool create, std::string& resolved) {
  const uid_t me = ::geteuid();
  const fs::path given = fs::absolute(path).lexically_normal();
  // Another user's symlink on the way would choose where we write (fs.protected_symlinks may be 0).
  fs::path prefix = given.root_path(), existing = prefix;
  fs::path missing;
  for (const fs::path& part : given.relative_path()) {
    if (part.empty() || part == ".") continue;
    if (!missing.empty()) {
      missing /= part;
      continue;
    }
    prefix /= part;
    struct stat link {};
    if (::lstat(prefix.c_str(), &link) != 0) {
      missing = part;
      continue;
    }
    if (S_ISLNK(link.st_mode) && link.st_uid != me && link.st_uid != 0)
      throw Error(
          fmt::format("{}: refusing to use {} as {}: this symlink on the way is owned by {}, who chooses "
                      "where it points; fix: give the path without it, or a folder of your own",
                      prefix.string(), given.string(), role, describe_user(link.st_uid)));
    existing = prefix;
  }
  std::error_code ec;
  fs::path canonical = fs::canonical(existing, ec);
  if (ec) throw Error(fmt::format("{}: cannot open {}: {}", existing.string(), role, ec.message()));
  if (!missing.empty()) {
    if (!create) throw Error(fmt::format("{}: cannot open {}: no such folder", given.string(), role));
    canonical /= missing;
  }
  resolved = canonical.string();
  int fd = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("/: cannot open {}: {}", role, std::strerror(errno)));
  fs::path current = "/";
  bool created = false;
  const fs::path relative = canonical.relative_path();
  const std::vector<fs::path> parts(relative.begin(), relative.end());
  auto check = [&](int folder_fd, const fs::path& folder, bool last) {
    struct stat info {};
    if (::fstat(folder_fd, &info) != 0) return std::string(std::strerror(errno));
    return folder_problem(info, last || created, folder.string(), resolved, role);
  };
  if (parts.empty()) {
    if (const std::string problem = check(fd, current, true); !problem.empty()) {
      ::close(fd);
      throw Error(problem);
    }
    return fd;
  }
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string name = parts[i].string();
    if (const std::string problem = check(fd, current, false); !problem.empty()) {
      ::close(fd);
      throw Error(problem);
    }
    current /= name;
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && create) {
      created = true;
      if (::mkdirat(fd, name.c_str(), mode) == 0 || errno == EEXIST)
        next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    const int error_number = errno;
    ::close(fd);
    if (next < 0)
      throw Error(fmt::format("{}: cannot open {}: {}", current.string(), role,
                              error_number == ELOOP || error_number == ENOTDIR
                                  ? std::string("it was replaced by a symlink or a file while tessera checked it")
                                  : std::string(std::strerror(error_number))));
    fd = next;
    if (i + 1 == parts.size())
      if (const std::string problem = check(fd, current, true); !problem.empty()) {
        ::close(fd);
        throw Error(problem);
      }
  }
  return fd;
}

extern "C" void remove_temporaries_and_reraise(int signal_number) {
  remove_temporary_files();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
  const fs::path target(path_);
  const std::string directory = target.has_parent_path() ? target.parent_path().string() : std::string(".");
  folder_fd_ = open_folder_creating(directory);
  if (folder_fd_ < 0)
    throw Error(fmt::format("{}: cannot write {}: {}; check that the folder exists and is writable", path_, what_,
                            std::strerror(errno)));
  open_temporary(directory, target.filename().string());
}

AtomicFileWriter::AtomicFileWriter(const OwnedFolder& folder, const std::string& name, std::string what)
    : path_((fs::path(folder.path()) / name).string()), what_(std::move(what)) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    throw Error(fmt::format("{}: cannot write {}: '{}' is not a file name", folder.path(), what_, name));
  folder_fd_ = ::fcntl(folder.descriptor(), F_DUPFD_CLOEXEC, 0);
  if (folder_fd_ < 0) fail(errno);
  open_temporary(folder.path(), name);
}

void AtomicFileWriter::open_temporary(const std::string& display_folder, const std::string& name) {
  name_ = name;
  remove_stale_temporaries(folder_fd_);
  const std::string prefix = "." + name + std::string(kTemporaryMarker) + std::to_string(::getpid()) + "-";
  // O_EXCL|O_NOFOLLOW: a name someone planted (a file, a symlink) fails with EEXIST and we
  // draw another, so neither our bytes nor the final owner can be redirected.
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temporary_name_ = prefix + random_suffix();
    temporary_ = (fs::path(display_folder) / temporary_name_).string();
    slot_ = announce_temporary(temporary_);
    fd_ = ::openat(folder_fd_, temporary_name_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ >= 0) break;
    const int error_number = errno;
    withdraw_temporary(slot_);
    slot_ = -1;
    temporary_.clear();
    if (error_number != EEXIST) {
      discard();
      throw Error(fmt::format("{}: cannot write {}: {}; check that the folder exists and is writable", path_, what_,
                              std::strerror(error_number)));
    }
  }
  if (fd_ < 0) {
    discard();
    throw Error(fmt::format("{}: cannot write {}: no free temporary name beside it", path_, what_));
  }
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty() && folder_fd_ >= 0) ::unlinkat(folder_fd_, temporary_name_.c_str(), 0);
  temporary_.clear();
  withdraw_temporary(slot_);
  slot_ = -1;
  if (folder_fd_ >= 0) ::close(folder_fd_);
  folder_fd_ = -1;
}

void AtomicFileWriter::fail(int error_number) {
  discard();
  throw Error(fmt::format("{}: cannot write {}: {}", path_, what_, std::strerror(error_number)));
}

void AtomicFileWriter::write(std::string_view bytes) {
  if (fd_ < 0) throw Error(fmt::format("{}: cannot write {}: the write was already finished or failed", path_, what_));
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::write_at(std::uint64_t offset, std::string_view bytes) {
  if (fd_ < 0) throw Error(fmt::format("{}: cannot write {}: the write was already finished or failed", path_, what_));
  for (std::size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail(n < 0 ? errno : EIO);
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error(fmt::format("{}: cannot write {}: the write was already finished or failed", path_, what_));
  // Our file is 0600 until now, so no one could read it half-written; the result is an ordinary artefact.
  if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0) fail(errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(errno);
  if (::renameat(folder_fd_, temporary_name_.c_str(), folder_fd_, name_.c_str()) != 0) fail(errno);
  temporary_.clear();
  discard();
}

void write_file_atomically(const std::string& path, std::string_view contents, std::string_view what) {
  AtomicFileWriter writer(path, std::string(what));
  writer.write(contents);
  writer.commit();
}

void remove_temporary_files() noexcept {
  for (auto& slot : g_temporaries) {
    int expected = kActive;
    if (slot.state.compare_exchange_strong(expected, kBusy)) ::unlink(slot.path);
  }
}

void remove_temporary_files_on_signals() {
  struct sigaction action {};
  action.sa_handler = remove_temporaries_and_reraise;
  sigemptyset(&action.sa_mask);
  for (int signal_number :
       {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGALRM, SIGQUIT, SIGUSR1, SIGUSR2, SIGXCPU, SIGVTALRM, SIGPROF})
    ::sigaction(signal_number, &action, nullptr);
  std::signal(SIGXFSZ, SIG_IGN);
}

void check_output_file(const std::string& output, std::string_view role, const std::vector<InputFile>& inputs) {
  if (output.empty()) return;
  struct stat written {};
  if (::stat(output.c_str(), &written) != 0) return;  // absent: nothing to destroy
  if (!S_ISREG(written.st_mode))
    throw Error(
        fmt::format("{}: refusing to write {} here: it exists and is {}, and writing would replace it; "
                    "give the path of a regular file",
                    output, role, file_kind(written.st_mode)));
  for (const InputFile& input : inputs) {
    struct stat read {};
    if (input.path.empty() || ::stat(input.path.c_str(), &read) != 0) continue;
    if (read.st_dev == written.st_dev && read.st_ino == written.st_ino)
      throw Error(
          fmt::format("{}: refusing to write {} here: it is the same file as {} {}, which would be destroyed; "
                      "choose another output path",
                      output, role, input.role, input.path));
  }
}

std::string describe_user(uid_t uid) {
  const std::string name = user_name(uid);
  return name == std::to_string(uid) ? fmt::format("uid {}", uid) : fmt::format("uid {} ({})", uid, name);
}

OwnedFolder::OwnedFolder(const std::string& path, std::string role, mode_t mode) : role_(std::move(role)) {
  fd_ = open_owned(path, role_, mode, true, path_);
}

OwnedFolder OwnedFolder::existing(const std::string& path, std::string role) {
  std::string resolved;
  const int fd = open_owned(path, role, 0, false, resolved);
  return OwnedFolder(fd, std::move(resolved), std::move(role));
}

OwnedFolder::~OwnedFolder() {
  if (fd_ >= 0) ::close(fd_);
}

OwnedFolder::OwnedFolder(OwnedFolder&& other) noexcept
    : path_(std::move(other.path_)), role_(std::move(other.role_)), fd_(std::exchange(other.fd_, -1)) {}

OwnedFolder OwnedFolder::folder(const std::string& relative, mode_t mode) const {
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  fs::path current = path_;
  for (const fs::path& part : fs::path(relative)) {
    const std::string name = part.string();
    if (name.empty() || name == ".") continue;
    if (fd < 0) break;
    if (name == ".." || name == "/") {
      ::close(fd);
      throw Error(fmt::format("{}: refusing to leave {} ('{}')", path_, role_, relative));
    }
    current /= name;
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && (::mkdirat(fd, name.c_str(), mode) == 0 || errno == EEXIST))
      next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int error_number = errno;
    ::close(fd);
    if (next < 0)
      throw Error(fmt::format("{}: cannot open this folder of {}: {}", current.string(), role_,
                              error_number == ELOOP || error_number == ENOTDIR
                                  ? std::string("it is a symlink or a file, not a folder; move it away")
                                  : std::string(std::strerror(error_number))));
    fd = next;
    struct stat info {};
    const std::string problem = ::fstat(fd, &info) != 0
                                    ? std::string(std::strerror(errno))
                                    : folder_problem(info, true, current.string(), current.string(), role_);
    if (!problem.empty()) {
      ::close(fd);
      throw Error(problem);
    }
  }
  if (fd < 0) throw Error(fmt::format("{}: cannot open {}: {}", current.string(), role_, std::strerror(errno)));
  return OwnedFolder(fd, current.string(), role_);
}

int OwnedFolder::create_file(const std::string& name, std::string_view what, mode_t mode) const {
  const std::string shown = (fs::path(path_) / name).string();
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    throw Error(fmt::format("{}: cannot create {}: '{}' is not a file name", path_, what, name));
  // Our folder: an old file of this name is ours to replace, and O_EXCL|O_NOFOLLOW makes sure
  // the one we open is the new one, not something that appeared in between.
  if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT)
    throw Error(fmt::format("{}: cannot replace {}: {}", shown, what, std::strerror(errno)));
  const int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) throw Error(fmt::format("{}: cannot create {}: {}", shown, what, std::strerror(errno)));
  return fd;
}

void OwnedFolder::write_file(const std::string& name, std::string_view bytes, std::string_view what) const {
  AtomicFileWriter writer(*this, name, std::string(what));
  writer.write(bytes);
  writer.commit();
}

void OwnedFolder::copy_file(const std::string& source, const std::string& name, std::string_view what) const {
  write_file(name, read_bounded_file(source, what, kMaxCopiedFileBytes), what);
}

void check_owned_folder_if_present(const std::string& path, std::string_view role) {
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0 && errno == ENOENT) return;
  (void)OwnedFolder::existing(path, std::string(role));
}

int open_bounded_file(const std::string& path, std::string_view role, std::uint64_t max_bytes, std::uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw Error(fmt::format("{}: cannot read {}: {}; check the path", path, role, std::strerror(errno)));
  auto refuse = [&](std::string message) {
    ::close(fd);
    throw Error(std::move(message));
  };
  struct stat info {};
  if (::fstat(fd, &info) != 0) refuse(fmt::format("{}: cannot read {}: {}", path, role, std::strerror(errno)));
  if (!S_ISREG(info.st_mode))
    refuse(fmt::format("{}: cannot read {}: it is {}, which could block or never end; give a regular file", path, role,
                       file_kind(info.st_mode)));
  if (static_cast<std::uint64_t>(info.st_size) > max_bytes)
    refuse(fmt::format("{}: {} bytes; {} may hold at most {}", path, info.st_size, role, size_text(max_bytes)));
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // opened without blocking on a FIFO
  size = static_cast<std::uint64_t>(info.st_size);
  return fd;
}

std::string read_bounded_file(const std::string& path, std::string_view role, std::uint64_t max_bytes,
                              bool allow_stdin) {
  const bool from_stdin = allow_stdin && path == "-";
  std::uint64_t size = 0;  // stdin's is not known: the limit is applied while reading
  const int fd =
      from_stdin ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0) : open_bounded_file(path, role, max_bytes, size);
  if (fd < 0) throw Error(fmt::format("{}: cannot read {}: {}; check the path", path, role, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::string bytes;
  bytes.reserve(static_cast<std::size_t>(size));
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(fmt::format("{}: cannot read {}: {}", path, role, std::strerror(errno)));
    if (n == 0) break;
    if (bytes.size() + static_cast<std::size_t>(n) > max_bytes)
      throw Error(
          fmt::format("{}: more than {} bytes; {} may hold at most {}", path, max_bytes, role, size_text(max_bytes)));
    bytes.append(buffer, static_cast<std::size_t>(n));
  }
  return bytes;
}

}  // namespace tessera
