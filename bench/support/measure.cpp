// Child processes for the benchmarks: fork, exec, wait4.
#include "measure.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace tessera::bench {

Measured measure(const std::vector<std::string>& arguments, bool capture_stdout) {
  const std::string out_file = capture_stdout
                                   ? (fs::temp_directory_path() / ("tessera-bench-" + std::to_string(getpid()))).string()
                                   : "/dev/null";
  std::fflush(stdout);  // or the child would write our buffered output again
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(out_file.c_str(), "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
    std::vector<char*> argv;
    for (const auto& a : arguments) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Measured m;
  m.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  m.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  m.peak_rss_mib = usage.ru_maxrss / 1024.0;
  if (capture_stdout) {
    std::ifstream in(out_file);
    std::stringstream text;
    text << in.rdbuf();
    m.out = text.str();
    fs::remove(out_file);
  }
  return m;
}

std::string field(const std::string& text, const std::string& key) {
  std::smatch match;
  if (std::regex_search(text, match, std::regex("(?:^|\\s)" + key + "=(\\S+)"))) return match[1];
  return "?";
}

void write_pipeline_copy(const fs::path& source, const fs::path& build, const std::string& name,
                         const fs::path& destination, const std::vector<std::pair<std::string, std::string>>& replacements) {
  std::ifstream in(source / "configs/pipelines" / name);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    if (at == std::string::npos) throw std::runtime_error("pipeline " + name + " has no '" + from + "'");
    text.replace(at, from.size(), to);
  };
  // Every path the pipeline names under the build folder (plugins, calibration tables).
  for (auto at = text.find("../../build/"); at != std::string::npos; at = text.find("../../build/", at))
    text.replace(at, 12, (build / "").string());
  replace("../targets/", (source / "configs/targets/").string());
  for (const auto& [from, to] : replacements) replace(from, to);
  std::ofstream(destination) << text;
}

}  // namespace tessera::bench
