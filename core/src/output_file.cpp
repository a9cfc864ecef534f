// Atomic output files that are safe in shared folders, and the checks that keep outputs off inputs.
#include "tessera/output_file.hpp"

#include <dirent.h>
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
void remove_stale_temporaries(const fs::path& directory) {
  DIR* folder = ::opendir(directory.c_str());
  if (folder == nullptr) return;
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
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a named pipe";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
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
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ignored;
  fs::create_directories(directory, ignored);
  remove_stale_temporaries(directory);
  const std::string prefix = (directory / ("." + target.filename().string() + std::string(kTemporaryMarker) +
                                           std::to_string(::getpid()) + "-"))
                                 .string();
  // O_EXCL|O_NOFOLLOW: a name someone planted (a file, a symlink) fails with EEXIST and we
  // draw another, so neither our bytes nor the final owner can be redirected.
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temporary_ = prefix + random_suffix();
    slot_ = announce_temporary(temporary_);
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd_ >= 0) break;
    const int error_number = errno;
    withdraw_temporary(slot_);
    slot_ = -1;
    if (error_number != EEXIST)
      throw Error(fmt::format("{}: cannot write {}: {}; check that the folder exists and is writable", path_, what_,
                              std::strerror(error_number)));
  }
  if (fd_ < 0) throw Error(fmt::format("{}: cannot write {}: no free temporary name beside it", path_, what_));
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
  temporary_.clear();
  withdraw_temporary(slot_);
  slot_ = -1;
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

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw Error(fmt::format("{}: cannot write {}: the write was already finished or failed", path_, what_));
  // Our file is 0600 until now, so no one could read it half-written; the result is an ordinary artefact.
  if (::fchmod(fd_, 0644) != 0 || ::fsync(fd_) != 0) fail(errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail(errno);
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) fail(errno);
  temporary_.clear();
  withdraw_temporary(slot_);
  slot_ = -1;
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

}  // namespace tessera
