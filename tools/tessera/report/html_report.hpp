// Renders the figures of a compiled program as one standalone HTML page.
#pragma once
#include <string>

#include "program_figures.hpp"

namespace tessera::report {

/// The whole page: inline CSS, SVG charts drawn by an inline script from embedded JSON, and
/// tables of the figures. Stable ids: #package-summary, #memory-chart, #cycles-chart,
/// #cycles-superstep, #exchange-chart, #phase-summary, #superstep-summary, #tile-summary,
/// #render-errors; <body data-render> becomes "ok" once everything is drawn.
std::string render_html_report(const ProgramFigures& figures);

/// The data the page's script draws from (also embedded in the page as #report-data).
std::string report_data_json(const ProgramFigures& figures);

}  // namespace tessera::report
