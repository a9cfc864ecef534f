// A/B reports: terminal table, JSON, CSV, Markdown and a standalone HTML page.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "analysis.hpp"
#include "history.hpp"

namespace tessera::ab {

/// What this invocation of `tessera ab` itself did and cost (for the JSON report and bench/ab).
struct DriverStats {
  std::string command;                 ///< "ab" or "ab merge"
  std::string results;                 ///< results directories, ';'-separated
  double wall_ms = 0;                  ///< the whole invocation
  std::int64_t self_peak_rss_kib = 0;  ///< the driver process alone (getrusage RUSAGE_SELF)
  double child_wall_ms = 0;            ///< compiles and runs started by this invocation
  std::size_t executed = 0, skipped = 0, stale = 0, failed = 0, runs = 0, warmups = 0;
};

/// Tables sorted by change, for a terminal (plain text, fixed-width columns).
std::string terminal_report(const Analysis& analysis, const std::string& results);
std::string markdown_report(const Analysis& analysis);
/// One row per (arm, model, metric), the baseline's twin included.
std::string csv_report(const Analysis& analysis);
std::string json_report(const Analysis& analysis, const DriverStats& driver);
/// A standalone page (inline CSS, JS and SVG; no network) with stable ids: #ab-summary,
/// #ab-models, #ab-noise, #ab-ratios, #ab-phases, #ab-history, #ab-warnings, svg.ab-chart,
/// svg.ab-ratio-chart, svg.ab-phase-chart, svg.ab-history-chart. `history` is what the
/// history charts draw (History::report_points, read after this sweep was recorded).
std::string html_report(const Analysis& analysis, const DriverStats& driver, const std::vector<HistoryPoint>& history);

/// Formats a metric's value for people: cycles and bytes as integers, ratios with 3 decimals.
std::string format_metric_value(const std::string& metric, double value);
/// A fixed-width text table: the first `left` columns left-aligned, the rest right-aligned.
std::string text_table(const std::vector<std::vector<std::string>>& rows, std::size_t left);

/// Where and under what load the timings were taken: hosts, load averages, warm-ups, build.
std::string measurement_line(const Analysis& analysis);
/// "+12.5%", "-3.0%", "+0.0%", "+0.034%" (two significant digits below 0.1%), or "-" for NaN.
std::string format_change(double ratio);

/// One line per compared arm: "in-order: worse on device_cycles in 3 of 3 models, geomean +1.0%
/// (against default)", over the judged metrics.
std::string arm_verdict(const Analysis& analysis, const std::string& arm);

}  // namespace tessera::ab
