// fork/exec/wait4 for the A/B driver: each compile and run is a separate tessera process.
#include "subprocess.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "tessera/diagnostic.hpp"

namespace tessera::ab {

ProcessRecord run_process(const std::vector<std::string>& command, const std::string& stdout_file,
                          const std::string& stderr_file) {
  ProcessRecord record;
  record.command = command;
  // Open the files before forking, so a bad path is reported here and not lost in the child.
  const int out = ::open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = out < 0 ? -1 : ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || err < 0) {
    const std::string why = std::strerror(errno);
    if (out >= 0) ::close(out);
    throw Error((out < 0 ? stdout_file : stderr_file) + ": cannot create the output file: " + why);
  }
  std::vector<char*> argv;
  for (const std::string& argument : command) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);

  std::fflush(stdout);  // or the child would inherit and write our buffered output again
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::string why = std::strerror(errno);
    ::close(out);
    ::close(err);
    throw Error("cannot start " + command.front() + ": fork failed: " + why);
  }
  if (pid == 0) {
    if (::dup2(out, STDOUT_FILENO) < 0 || ::dup2(err, STDERR_FILENO) < 0) ::_exit(127);
    ::execv(argv[0], argv.data());
    const char* message = "tessera ab: exec failed\n";
    [[maybe_unused]] auto written = ::write(STDERR_FILENO, message, std::strlen(message));
    ::_exit(127);
  }
  ::close(out);
  ::close(err);
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) throw Error("waiting for " + command.front() + " failed: " + std::strerror(errno));
  }
  record.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  record.peak_rss_kib = usage.ru_maxrss;  // Linux reports kilobytes
  auto milliseconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  record.user_ms = milliseconds(usage.ru_utime);
  record.system_ms = milliseconds(usage.ru_stime);
  if (WIFEXITED(status)) record.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) record.signal = WTERMSIG(status);
  return record;
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

CapturedOutput run_captured(std::vector<std::string> command) {
  const std::string program = find_in_path(command.front());
  if (program.empty()) throw Error(command.front() + ": not found in PATH (is Slurm's client installed and on PATH?)");
  command.front() = program;
  std::string folder = (std::filesystem::temp_directory_path() / "tessera-capture-XXXXXX").string();
  if (!::mkdtemp(folder.data())) throw Error("cannot create a temporary folder in " + std::filesystem::temp_directory_path().string());
  const std::string out = folder + "/out", err = folder + "/err";
  CapturedOutput captured;
  try {
    const ProcessRecord process = run_process(command, out, err);
    captured.exit_code = process.signal ? -1 : process.exit_code;
    auto read = [](const std::string& path) {
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      return text.str();
    };
    captured.out = read(out);
    captured.err = read(err);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(folder, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove_all(folder, ec);
  return captured;
}

std::string error_excerpt(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::vector<std::string> from_error;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("error: ", 0) == 0 || line.rfind("internal error: ", 0) == 0) from_error.clear(), from_error.push_back(line);
    else if (!from_error.empty() && from_error.size() < 4) from_error.push_back(line);
    last.push_back(line);
    if (last.size() > lines) last.pop_front();
  }
  std::string text;
  if (!from_error.empty())
    for (const std::string& line : from_error) text += line.substr(0, 600) + "\n";
  else
    for (const std::string& line : last) text += line.substr(0, 600) + "\n";
  return text;
}

}  // namespace tessera::ab
