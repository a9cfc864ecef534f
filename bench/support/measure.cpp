// Child processes and pipeline copies for the benchmarks.
#include "measure.hpp"

#include <fstream>
#include <iterator>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "tessera/process.hpp"

namespace fs = std::filesystem;

namespace tessera::bench {

Measured measure(const std::vector<std::string>& arguments, bool capture_stdout) {
  ProcessOptions options;
  if (capture_stdout) options.stdout_file = "";
  const ProcessResult ran = run_process(arguments, options);
  Measured m;
  m.exit_code = ran.exit_code;
  m.wall_ms = ran.wall_ms;
  m.peak_rss_mib = static_cast<double>(ran.peak_rss_kib) / 1024.0;
  m.out = ran.out;
  return m;
}

std::string field(const std::string& text, const std::string& key) {
  std::smatch match;
  if (std::regex_search(text, match, std::regex("(?:^|\\s)" + key + "=(\\S+)"))) return match[1];
  return "?";
}

void write_pipeline_copy(const fs::path& source, const fs::path& build, const std::string& name,
                         const fs::path& destination,
                         const std::vector<std::pair<std::string, std::string>>& replacements) {
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
