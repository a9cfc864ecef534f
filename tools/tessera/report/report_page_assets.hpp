// The inline CSS and scripts of the `tessera report` page (no network: everything is inline).
#pragma once

namespace tessera::report {

/// The page's style sheet.
extern const char* const kReportStyle;
/// Runs first, in <head>: records every script error (syntax errors of the main script too),
/// lists them in #render-errors and sets <body data-render="error">, so a reader or a
/// headless browser check sees them.
extern const char* const kErrorCatcherScript;
/// Draws the charts from the JSON in <script id="report-data">, wires the controls, then sets
/// <body data-render="ok"> (or "error").
extern const char* const kReportScript;

}  // namespace tessera::report
