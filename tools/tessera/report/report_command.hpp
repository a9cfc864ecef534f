// `tessera report PACKAGE [--profile P.json] --html F`: pictures of a compiled program.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace tessera::cli {

struct ReportRequest {
  std::string package;
  std::string profile;                 ///< empty: cycles from the codelet cycle formulas
  std::string html;                    ///< the page to write
  std::optional<std::uint32_t> phase;  ///< empty: the phase with the largest horizon
  std::uint32_t timeline_tiles = 16;
};

/// Reads the package (and profile), writes the page atomically and prints one summary line
/// (`report=F tiles=N ... phase=K horizon=H lower_bound=L`). Throws Error naming the file.
int report_command(const ReportRequest& request);

}  // namespace tessera::cli
