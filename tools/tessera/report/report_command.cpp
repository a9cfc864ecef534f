// `tessera report`: reads a package and its profile, writes the HTML page, prints a summary.
#include "report_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "html_report.hpp"
#include "program_figures.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/profile.hpp"

namespace tessera::cli {

int report_command(const ReportRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  auto log = logger("tessera.report");
  if (request.html.empty()) throw Error("tessera report: no page to write; give --html FILE");
  check_output_file(request.html, "the page (--html)",
                    {{request.package, "the package"}, {request.profile, "the profile"}});
  const Package package = read_package(request.package);
  report::ComputeCycles cycles = request.profile.empty() ? report::cycles_from_package(package)
                                                         : report::cycles_from_profile(package, request.profile);
  report::ReportOptions options;
  options.phase = request.phase;
  options.timeline_tiles = request.timeline_tiles;
  report::ProgramFigures figures;
  try {
    figures = report::compute_figures(package, request.package, std::move(cycles), options);
  } catch (const Error& error) {
    const std::string message = error.what();
    // Errors about the package's contents come without its name; add it.
    if (message.rfind(request.package, 0) == 0) throw;
    throw Error(request.package, 0, 0, message);
  }
  const std::string page = report::render_html_report(figures);
  write_file_atomically(request.html, page, "HTML report");

  const auto elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  log->info("report written path={} bytes={} tiles={} supersteps={} cycles_source=\"{}\" elapsed_ms={}", request.html,
            page.size(), package.tiles.size(), figures.phases.size(), figures.cycles.source, elapsed_ms);
  std::string phase = "phase=none";
  if (figures.selected_phase) {
    const report::PhaseFigures& selected = figures.phases[*figures.selected_phase];
    phase = fmt::format("phase={} horizon={} lower_bound={} endpoint_lower_bound={} timeline_tiles={}", selected.index,
                        selected.horizon, selected.lower_bound, selected.endpoint_lower_bound, figures.timeline.size());
  }
  // The same per-region peaks place-storage logs in its memory summary (address extents).
  std::uint64_t peak_standard = 0, peak_interleaved = 0;
  for (const report::TileMemory& memory : figures.memory) {
    peak_standard = std::max(peak_standard, memory.standard_extent);
    peak_interleaved = std::max(peak_interleaved, memory.interleaved_extent);
  }
  fmt::print(
      "report={} tiles={} supersteps={} peak_tile_bytes={} peak_tile={} peak_standard_bytes={} "
      "peak_interleaved_bytes={} {}\n",
      request.html, package.tiles.size(), figures.phases.size(), figures.peak_tile_bytes, figures.peak_tile,
      peak_standard, peak_interleaved, phase);
  return 0;
}

}  // namespace tessera::cli
