// Runs a command with fork/exec and collects its output through temporary files.
#include "run_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "temp_dir.hpp"

namespace tessera::testing {

static std::string read_all(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult run_command(const std::vector<std::string>& arguments, const std::vector<std::string>& environment) {
  TempDir dir;
  const std::string out_file = (dir.path() / "out").string(), err_file = (dir.path() / "err").string();
  std::fflush(stdout);  // or the child would write our buffered output again
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out_file.c_str(), "w", stdout) || !freopen(err_file.c_str(), "w", stderr)) _exit(127);
    for (const auto& assignment : environment) putenv(const_cast<char*>(assignment.c_str()));
    std::vector<char*> argv;
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  result.out = read_all(out_file);
  result.err = read_all(err_file);
  return result;
}

std::string tessera_binary() { return std::string(TESSERA_BINARY_DIR) + "/tools/tessera"; }

}  // namespace tessera::testing
