// fork/exec/wait4 with pipes polled for captured output and the deadlines checked between reads.
#include "tessera/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <utility>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"

extern char** environ;

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;

// The inherited environment with `overrides` replacing entries of the same name; built before
// fork, since a child of a threaded parent may only call async-signal-safe functions.
std::vector<std::string> child_environment(const std::vector<std::string>& overrides) {
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> entries;
  for (char** entry = environ; entry && *entry; ++entry) {
    const std::string text = *entry;
    const bool replaced = std::any_of(overrides.begin(), overrides.end(),
                                      [&](const std::string& o) { return name_of(o) == name_of(text); });
    if (!replaced) entries.push_back(text);
  }
  entries.insert(entries.end(), overrides.begin(), overrides.end());
  return entries;
}

std::vector<char*> pointers(std::vector<std::string>& texts) {
  std::vector<char*> result;
  for (std::string& text : texts) result.push_back(text.data());
  result.push_back(nullptr);
  return result;
}

double milliseconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
}

// A stream's destination in the child: a file opened here, so a bad path is this process's
// error and not a silent exit 127 of the child, or the write end of a pipe to capture it.
struct Stream {
  int child_fd = -1;   // dup2'ed onto 1 or 2
  int parent_fd = -1;  // the read end of a capture pipe
  void close_all() {
    if (child_fd >= 0) ::close(std::exchange(child_fd, -1));
    if (parent_fd >= 0) ::close(std::exchange(parent_fd, -1));
  }
};

Stream open_stream(const std::string& file, const char* role) {
  Stream stream;
  if (file.empty()) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw Error(std::string("cannot capture ") + role + ": pipe failed: " + std::strerror(errno));
    stream.parent_fd = fds[0];
    stream.child_fd = fds[1];
  } else if (file == "/dev/null") {
    stream.child_fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (stream.child_fd < 0) throw Error(file + ": cannot open the " + role + " file: " + std::strerror(errno));
  } else {
    // A log in a folder another user can write would let them plant a symlink to any file we may write.
    const std::filesystem::path path(file);
    const OwnedFolder folder = OwnedFolder::existing(path.has_parent_path() ? path.parent_path().string() : ".",
                                                     std::string("the folder of the ") + role + " file");
    stream.child_fd = folder.create_file(path.filename().string(), std::string("the ") + role + " file");
  }
  return stream;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv_in, const ProcessOptions& options) {
  if (argv_in.empty()) throw Error("run_process: no program given");
  std::vector<std::string> arguments = argv_in, environment = child_environment(options.environment);
  std::vector<char*> argv = pointers(arguments), envp = pointers(environment);
  std::array<Stream, 2> streams;
  try {
    streams[0] = open_stream(options.stdout_file, "stdout");
    streams[1] = open_stream(options.stderr_file, "stderr");
  } catch (...) {
    for (Stream& s : streams) s.close_all();
    throw;
  }
  std::optional<rlimit> file_limit;
  if (options.file_size_limit) file_limit = rlimit{*options.file_size_limit, *options.file_size_limit};

  std::fflush(stdout);  // or the child would inherit and write our buffered output again
  std::fflush(stderr);
  const auto start = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    for (Stream& s : streams) s.close_all();
    throw Error("cannot start " + argv_in.front() + ": fork failed: " + why);
  }
  if (pid == 0) {  // async-signal-safe calls only from here to exec
    if (options.own_process_group) ::setpgid(0, 0);
    if (::dup2(streams[0].child_fd, STDOUT_FILENO) < 0 || ::dup2(streams[1].child_fd, STDERR_FILENO) < 0) ::_exit(127);
    if (file_limit) ::setrlimit(RLIMIT_FSIZE, &*file_limit);
    ::execve(argv[0], argv.data(), envp.data());
    for (const char* part : {"cannot execute ", static_cast<const char*>(argv[0]), "\n"})
      [[maybe_unused]] const auto written = ::write(STDERR_FILENO, part, std::strlen(part));
    ::_exit(127);
  }
  if (options.own_process_group) ::setpgid(pid, pid);  // also here, so the group exists before any kill
  std::array<int, 2> fds{streams[0].parent_fd, streams[1].parent_fd};
  for (Stream& s : streams) ::close(std::exchange(s.child_fd, -1));

  ProcessResult result;
  const pid_t victims = options.own_process_group ? -pid : pid;
  int status = 0;
  struct rusage usage {};
  bool reaped = false, signalled = false;
  auto elapsed_ms = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count(); };
  auto reap = [&](int flags) {
    pid_t done;
    while ((done = ::wait4(pid, &status, flags, &usage)) < 0 && errno == EINTR) {}
    if (done != pid) return;
    reaped = true;
    result.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (options.own_process_group) ::kill(-pid, SIGKILL);  // helpers it left behind
  };
  while (!reaped || fds[0] >= 0 || fds[1] >= 0) {
    const std::int64_t now = elapsed_ms();
    if (!reaped && options.signal && !signalled && now >= options.signal_after_ms) {
      ::kill(pid, options.signal);
      signalled = true;
    }
    if (options.timeout_ms > 0 && now >= options.timeout_ms && !result.timed_out) {
      result.timed_out = true;
      if (!reaped) ::kill(victims, SIGKILL);
      // An exited child whose descendants hold its pipes: stop waiting for their end of file.
      if (reaped)
        for (int& fd : fds)
          if (fd >= 0) ::close(std::exchange(fd, -1));
    }
    if (!reaped) reap(WNOHANG);
    if (reaped && fds[0] < 0 && fds[1] < 0) break;

    // Sleep until output arrives or the next deadline; without pipes or deadlines, in wait4.
    std::int64_t wait = -1;
    const bool signal_pending = options.signal && !signalled && !reaped;  // an ended child gets no signal
    if (signal_pending) wait = std::max<std::int64_t>(0, options.signal_after_ms - now);
    if (options.timeout_ms > 0 && !result.timed_out) {
      const std::int64_t left = std::max<std::int64_t>(0, options.timeout_ms - now);
      wait = wait < 0 ? left : std::min(wait, left);
    }
    std::vector<pollfd> waiting;
    for (int fd : fds)
      if (fd >= 0) waiting.push_back({fd, POLLIN, 0});
    const bool events_pending = signal_pending || (options.timeout_ms > 0 && !result.timed_out);
    if (waiting.empty()) {
      if (!events_pending) reap(0);
      else
        ::poll(nullptr, 0, static_cast<int>(std::min<std::int64_t>(wait, 10)));  // 10 ms: wall time stays exact enough
      continue;
    }
    // A child that exits without closing its pipes (descendants hold them) is noticed within 50 ms.
    if (!reaped) wait = wait < 0 ? 50 : std::min<std::int64_t>(wait, 50);
    if (::poll(waiting.data(), waiting.size(), static_cast<int>(wait)) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0) continue;
      pollfd one{fds[i], POLLIN, 0};
      if (::poll(&one, 1, 0) <= 0) continue;
      char buffer[65536];
      const ssize_t got = ::read(fds[i], buffer, sizeof buffer);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        ::close(std::exchange(fds[i], -1));
        continue;
      }
      std::string& text = i == 0 ? result.out : result.err;
      const std::size_t room = options.capture_limit - std::min(options.capture_limit, text.size());
      text.append(buffer, std::min(room, static_cast<std::size_t>(got)));  // the rest is drained unread
    }
  }
  result.peak_rss_kib = usage.ru_maxrss;  // Linux reports kilobytes
  result.user_ms = milliseconds(usage.ru_utime);
  result.system_ms = milliseconds(usage.ru_stime);
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

std::string find_in_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "/usr/bin:/bin");
  for (std::string folder; std::getline(folders, folder, ':');) {
    const std::string candidate = (folder.empty() ? std::string(".") : folder) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace tessera
