// Shared by the benchmarks: run a command as a child process, timing it and reading its peak RSS.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tessera::bench {

struct Measured {
  int exit_code = -1;
  double wall_ms = 0;
  double peak_rss_mib = 0;  ///< wait4: the child, or its largest waited-for descendant
  std::string out;          ///< stdout, when captured
};

/// Runs `arguments` (argv[0] a path, no shell) with stderr discarded and stdout captured
/// when `capture_stdout`, else discarded; wall time and peak RSS from wait4.
Measured measure(const std::vector<std::string>& arguments, bool capture_stdout = false);

/// The value of `key=` in key=value output, or "?" when absent.
std::string field(const std::string& text, const std::string& key);

/// Writes a copy of the shipped pipeline `source/configs/pipelines/NAME` to `destination`, with
/// its target and every ../../build/ path made absolute for this build, and each (from, to)
/// replaced once.
void write_pipeline_copy(const std::filesystem::path& source, const std::filesystem::path& build,
                         const std::string& name, const std::filesystem::path& destination,
                         const std::vector<std::pair<std::string, std::string>>& replacements = {});

}  // namespace tessera::bench
