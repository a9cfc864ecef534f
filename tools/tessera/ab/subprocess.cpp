// The A/B driver's child processes: each compile and run is a separate tessera process.
#include "subprocess.hpp"

#include <deque>
#include <fstream>
#include <vector>

#include "tessera/diagnostic.hpp"

namespace tessera::ab {

ProcessRecord run_process(const std::vector<std::string>& command, const std::string& stdout_file,
                          const std::string& stderr_file) {
  ProcessOptions options;
  options.stdout_file = stdout_file;
  options.stderr_file = stderr_file;
  const ProcessResult ran = tessera::run_process(command, options);
  ProcessRecord record;
  record.command = command;
  record.exit_code = ran.exit_code;
  record.signal = ran.signal;
  record.wall_ms = ran.wall_ms;
  record.user_ms = ran.user_ms;
  record.system_ms = ran.system_ms;
  record.peak_rss_kib = ran.peak_rss_kib;
  return record;
}

CapturedOutput run_captured(std::vector<std::string> command) {
  const std::string program = find_in_path(command.front());
  if (program.empty()) throw Error(command.front() + ": not found in PATH (is it installed and on PATH?)");
  command.front() = program;
  ProcessOptions options;
  options.stdout_file = options.stderr_file = "";  // both captured
  const ProcessResult ran = tessera::run_process(command, options);
  return {ran.signal ? -1 : ran.exit_code, ran.out, ran.err};
}

std::string error_excerpt(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::deque<std::string> last;
  std::vector<std::string> from_error;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("error: ", 0) == 0 || line.rfind("internal error: ", 0) == 0)
      from_error.clear(), from_error.push_back(line);
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
