// The standalone HTML A/B report: tables, sorted log-ratio charts, ratio charts with intervals,
// a per-phase drill-down and the history across builds, all inline (CSS, SVG, a little JS for
// sorting and filtering) so it opens without a network.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "report.hpp"
#include "tessera/html.hpp"

namespace tessera::ab {

namespace {

std::string sort_value(double value) { return std::isfinite(value) ? fmt::format("{:.10g}", value) : ""; }

const MetricDefinition& metric_definition(const std::string& name) {
  for (const MetricDefinition& metric : ab_metrics())
    if (metric.name == name) return metric;
  return ab_metrics().front();
}

// Each arm keeps its colour in every chart: the baseline first, then the compared arms.
const char* arm_colour(const Analysis& analysis, const std::string& arm) {
  static const char* kColours[] = {"#3b6ea8", "#d98c2b", "#5a9e4b", "#8e5ba8", "#b8493f", "#4f9fa6", "#a88f3b"};
  const auto& arms = analysis.compared_arms;
  const auto found = std::find(arms.begin(), arms.end(), arm);
  return kColours[found == arms.end() ? 0 : (1 + (found - arms.begin())) % 7];
}

const char* kStyle = R"CSS(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1360px; color: #1d232b; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #d8dde3; padding-bottom: 4px; }
code { background: #f1f3f5; padding: 1px 4px; border-radius: 3px; }
table.ab-table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; font-size: 13px; }
div.ab-scroll { overflow-x: auto; }
table.ab-table th, table.ab-table td { border-bottom: 1px solid #e3e6ea; padding: 3px 10px; text-align: right; white-space: nowrap; }
table.ab-table th { background: #f6f7f9; cursor: default; }
table.ab-sortable th { cursor: pointer; } table.ab-sortable th[data-order="ascending"]::after { content: " \25B2"; }
table.ab-sortable th[data-order="descending"]::after { content: " \25BC"; }
table.ab-table td.ab-text, table.ab-table th.ab-text { text-align: left; }
.ab-better { color: #1b6e20; font-weight: 600; } .ab-worse { color: #b3261e; font-weight: 600; }
.ab-noise, .ab-same, .ab-missing, .ab-information { color: #6b7280; }
rect.ab-bar.ab-better { fill: #2e7d32; } rect.ab-bar.ab-worse { fill: #c62828; }
rect.ab-bar.ab-same, rect.ab-bar.ab-noise, rect.ab-bar.ab-information { fill: #a9b0b8; }
svg.ab-chart, svg.ab-phase-chart { display: block; margin: 6px 0 18px; background: #fff; }
svg text { font: 11px system-ui, sans-serif; fill: #1d232b; }
figure.ab-chart-figure { margin: 0; } figcaption { font-weight: 600; margin-top: 12px; }
details.ab-phase-model { margin: 8px 0; } details.ab-phase-model > summary { cursor: pointer; font-weight: 600; }
circle.ab-ratio-mark { fill: #6b7280; } circle.ab-ratio-mark.ab-better { fill: #2e7d32; } circle.ab-ratio-mark.ab-worse { fill: #c62828; }
line.ab-ratio-whisker, line.ab-ratio-cap, line.ab-geomean-whisker { stroke: #1d232b; stroke-width: 1.2; }
path.ab-geomean-mark, path.ab-ratio-clipped { fill: #1d232b; } text.ab-ratio-arm { font-weight: 600; }
svg.ab-ratio-chart, svg.ab-history-chart { display: block; margin: 6px 0 18px; background: #fff; }
polyline.ab-history-line { fill: none; stroke-width: 1.5; } circle.ab-history-point.ab-history-other-version { fill: #fff; }
text.ab-history-current { font-weight: 700; }
figure.ab-history-figure { margin: 0; display: flex; flex-wrap: wrap; column-gap: 24px; }
figure.ab-history-figure > figcaption { flex-basis: 100%; }
p.ab-plan-differs { color: #8a4b00; margin: 4px 0; }
ul#ab-warnings li { color: #8a4b00; }
.ab-note { color: #4b5563; }
)CSS";

const char* kScript = R"JS(
(function () {
  'use strict';
  function sortKey(row, index) {
    var cell = row.cells[index];
    if (!cell) return '';
    var key = cell.getAttribute('data-sort');
    return key !== null ? key : cell.textContent;
  }
  function compareKeys(a, b) {
    var x = parseFloat(a), y = parseFloat(b);
    if (!isNaN(x) && !isNaN(y)) return x - y;
    if (!isNaN(x)) return -1;
    if (!isNaN(y)) return 1;
    return String(a).localeCompare(String(b));
  }
  Array.prototype.forEach.call(document.querySelectorAll('table.ab-sortable'), function (table) {
    var headers = table.querySelectorAll('thead th');
    Array.prototype.forEach.call(headers, function (header, index) {
      header.addEventListener('click', function () {
        var body = table.tBodies[0];
        if (!body) return;
        var ascending = header.getAttribute('data-order') !== 'ascending';
        Array.prototype.forEach.call(headers, function (other) { other.removeAttribute('data-order'); });
        header.setAttribute('data-order', ascending ? 'ascending' : 'descending');
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var order = compareKeys(sortKey(a, index), sortKey(b, index));
          return ascending ? order : -order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });
  var filter = document.getElementById('ab-metric-filter');
  var models = document.getElementById('ab-models');
  if (filter && models && models.tBodies[0]) {
    filter.addEventListener('change', function () {
      Array.prototype.forEach.call(models.tBodies[0].rows, function (row) {
        row.hidden = filter.value !== '' && row.getAttribute('data-metric') !== filter.value;
      });
    });
  }
  var data = document.getElementById('ab-data');
  var footer = document.getElementById('ab-footer');
  if (data && footer) {
    var report = JSON.parse(data.textContent);
    footer.setAttribute('data-comparisons', String(report.comparisons.length));
    footer.setAttribute('data-rendered', 'true');
  }
})();
)JS";

// One horizontal bar per (model, arm) for `metric`, sorted by log ratio, centred on "no change".
std::string log_ratio_chart(const Analysis& analysis, const MetricDefinition& metric) {
  std::vector<const Comparison*> bars;
  for (const Comparison& c : analysis.comparisons)
    if (c.metric == metric.name && std::isfinite(c.ratio) && c.ratio > 0) bars.push_back(&c);
  std::stable_sort(bars.begin(), bars.end(),
                   [](const Comparison* a, const Comparison* b) { return std::log(a->ratio) < std::log(b->ratio); });
  double floor = NAN;
  for (const NoiseFloor& f : analysis.noise_floors)
    if (f.metric == metric.name) floor = f.max_abs_log_ratio;
  const int label_width = 260, plot_width = 520, value_width = 90, bar_height = 18, gap = 5, top = 22;
  const int width = label_width + plot_width + value_width;
  const int height = top + static_cast<int>(std::max<std::size_t>(bars.size(), 1)) * (bar_height + gap) + 8;
  double extent = 0.01;
  for (const Comparison* c : bars) extent = std::max(extent, std::abs(std::log(c->ratio)));
  if (std::isfinite(floor)) extent = std::max(extent, floor);
  extent *= 1.1;
  const double centre = label_width + plot_width / 2.0;
  auto x_of = [&](double log_ratio) { return centre + log_ratio / extent * (plot_width / 2.0); };

  std::string svg = fmt::format(
      "<svg class=\"ab-chart\" id=\"ab-chart-{0}\" data-metric=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{1}\" "
      "height=\"{2}\" viewBox=\"0 0 {1} {2}\" role=\"img\" aria-label=\"log ratio per model for {0}\">\n",
      html_escape(metric.name), width, height);
  if (std::isfinite(floor) && floor > 0)
    svg += fmt::format(
        "<rect class=\"ab-noise-band\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#eef1f4\">"
        "<title>noise floor: +/-{:.1f}%</title></rect>\n",
        x_of(-floor), top - 4, x_of(floor) - x_of(-floor), height - top, 100 * (std::exp(floor) - 1));
  svg += fmt::format(
      "<text x=\"{:.1f}\" y=\"12\" text-anchor=\"middle\">{} is better &#8592; 0 &#8594; {} is better</text>\n", centre,
      metric.direction == Direction::smaller_is_better ? "arm" : "baseline",
      metric.direction == Direction::smaller_is_better ? "baseline" : "arm");
  svg +=
      fmt::format("<line class=\"ab-axis\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#4b5563\"/>\n",
                  centre, top - 4, height - 4);
  if (bars.empty())
    svg += fmt::format(
        "<text class=\"ab-empty\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">no comparable values</text>\n", centre,
        top + bar_height - 5);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const Comparison& c = *bars[i];
    const double log_ratio = std::log(c.ratio);
    const int y = top + static_cast<int>(i) * (bar_height + gap);
    const double x0 = std::min(x_of(0), x_of(log_ratio)), x1 = std::max(x_of(0), x_of(log_ratio));
    const std::string verdict = verdict_name(c.verdict);
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{} &#183; {}</text>\n", label_width - 8,
                       y + bar_height - 5, html_escape(c.model), html_escape(c.arm));
    svg += fmt::format(
        "<rect class=\"ab-bar ab-{}\" data-model=\"{}\" data-arm=\"{}\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" "
        "height=\"{}\"><title>{} {}: {} vs {} ({}, {})</title></rect>\n",
        verdict, html_escape(c.model), html_escape(c.arm), x0, y, std::max(1.0, x1 - x0), bar_height,
        html_escape(c.model), html_escape(c.arm), format_metric_value(c.metric, c.value),
        format_metric_value(c.metric, c.baseline), format_change(c.ratio), verdict);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", label_width + plot_width + 6, y + bar_height - 5,
                       format_change(c.ratio));
  }
  return svg + "</svg>\n";
}

// Grouped bars per exchange phase: each arm's horizon over the phase's lower bound.
std::string phase_chart(const Analysis& analysis, const PhaseTable& table) {
  const int left = 50, bar_width = 14, group_gap = 16, top = 14, plot_height = 160, bottom = 34;
  const int group_width = static_cast<int>(table.arms.size()) * bar_width + group_gap;
  const int plot_right = left + std::max(120, std::max<int>(1, static_cast<int>(table.phases.size())) * group_width);
  const int width = plot_right + 160;
  const int height = top + plot_height + bottom;
  double highest = 1.05;
  for (const auto& row : table.cells)
    for (const PhaseRecord& cell : row)
      if (cell.lower_bound > 0)
        highest = std::max(highest, static_cast<double>(cell.horizon) / static_cast<double>(cell.lower_bound));
  highest *= 1.05;
  auto y_of = [&](double ratio) { return top + plot_height - (ratio - 1.0) / (highest - 1.0) * plot_height; };

  std::string svg = fmt::format(
      "<svg class=\"ab-phase-chart\" data-model=\"{0}\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{1}\" "
      "height=\"{2}\" "
      "viewBox=\"0 0 {1} {2}\" role=\"img\" aria-label=\"horizon over lower bound per exchange phase of {0}\">\n",
      html_escape(table.model), width, height);
  for (double tick : {1.0, 1.0 + (highest - 1.0) / 2, highest})
    svg += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#e3e6ea\"/><text x=\"{}\" y=\"{:.1f}\" "
        "text-anchor=\"end\">{:.3f}</text>\n",
        left, y_of(tick), plot_right, y_of(tick), left - 4, y_of(tick) + 4, tick);
  for (std::size_t p = 0; p < table.phases.size(); ++p) {
    const int x_group = left + static_cast<int>(p) * group_width + group_gap / 2;
    for (std::size_t a = 0; a < table.arms.size(); ++a) {
      const PhaseRecord& cell = table.cells[p][a];
      if (cell.lower_bound == 0) continue;
      const double ratio = static_cast<double>(cell.horizon) / static_cast<double>(cell.lower_bound);
      const double y = y_of(ratio);
      svg += fmt::format(
          "<rect class=\"ab-phase-bar\" data-arm=\"{}\" data-phase=\"{}\" x=\"{}\" y=\"{:.1f}\" width=\"{}\" "
          "height=\"{:.1f}\" fill=\"{}\"><title>phase {} arm {}: horizon {} / lower bound {} = {:.4f}"
          "</title></rect>\n",
          html_escape(table.arms[a]), table.phases[p], x_group + static_cast<int>(a) * bar_width, y, bar_width - 2,
          std::max(1.0, top + plot_height - y), arm_colour(analysis, table.arms[a]), table.phases[p],
          html_escape(table.arms[a]), cell.horizon, cell.lower_bound, ratio);
    }
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                       x_group + static_cast<int>(table.arms.size()) * bar_width / 2, top + plot_height + 14,
                       table.phases[p]);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\">exchange phase (superstep)</text>\n", left, top + plot_height + 30);
  for (std::size_t a = 0; a < table.arms.size(); ++a)
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        plot_right + 16, top + 16 * static_cast<int>(a), arm_colour(analysis, table.arms[a]), plot_right + 31,
        top + 9 + 16 * static_cast<int>(a), html_escape(table.arms[a]));
  return svg + "</svg>\n";
}

// "+3.1% [-2.0%, +8.2%]", or the change alone when there is no interval.
std::string change_with_interval(double ratio, double low, double high) {
  if (!std::isfinite(low) || !std::isfinite(high)) return format_change(ratio);
  return fmt::format("{} [{}, {}]", format_change(ratio), format_change(low), format_change(high));
}

// Per compared arm, one row per model: its ratio as a mark on a log axis, with the whisker of its
// interval for a noisy metric, then the geomean over the models with its interval. The marks and
// the noise floor set the scale; a whisker reaching beyond it ends in an arrow at the edge (the
// text beside it has the numbers), so a wide interval does not squash every mark into the centre.
std::string ratio_interval_chart(const Analysis& analysis, const MetricDefinition& metric) {
  const bool noisy = metric.determinism == Determinism::noisy;
  const double confidence = 100 * (1 - analysis.alpha);
  double floor = NAN;
  for (const NoiseFloor& f : analysis.noise_floors)
    if (f.metric == metric.name) floor = f.max_abs_log_ratio;
  std::vector<const Comparison*> comparisons;
  std::vector<const ArmSummary*> summaries;
  double extent = 0.01;
  auto widen = [&](double ratio) {
    if (std::isfinite(ratio) && ratio > 0) extent = std::max(extent, std::abs(std::log(ratio)));
  };
  for (const Comparison& c : analysis.comparisons)
    if (c.metric == metric.name) {
      comparisons.push_back(&c);
      widen(c.ratio);
    }
  for (const ArmSummary& summary : analysis.summaries)
    if (summary.metric == metric.name) {
      summaries.push_back(&summary);
      widen(summary.interval.geomean);
    }
  if (noisy && std::isfinite(floor)) extent = std::max(extent, floor);
  extent *= 1.1;
  const int label_width = 220, plot_width = 480, value_width = 260, row = 20, top = 30;
  const int rows = static_cast<int>(comparisons.size() + 2 * summaries.size());  // a heading and a geomean row per arm
  const int width = label_width + plot_width + value_width, height = top + std::max(rows, 1) * row + 8;
  const double centre = label_width + plot_width / 2.0;
  auto x_of = [&](double ratio) {
    return centre + std::clamp(std::log(ratio) / extent, -1.0, 1.0) * (plot_width / 2.0);
  };

  std::string svg = fmt::format(
      "<svg class=\"ab-ratio-chart\" id=\"ab-ratio-chart-{0}\" data-metric=\"{0}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{1}\" height=\"{2}\" viewBox=\"0 0 {1} {2}\" role=\"img\" aria-label=\"ratio per model with intervals "
      "for "
      "{0}\">\n",
      html_escape(metric.name), width, height);
  if (noisy && std::isfinite(floor) && floor > 0)
    svg += fmt::format(
        "<rect class=\"ab-noise-band\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"#eef1f4\">"
        "<title>noise floor: +/-{:.1f}%</title></rect>\n",
        x_of(std::exp(-floor)), top - 6, x_of(std::exp(floor)) - x_of(std::exp(-floor)), height - top,
        100 * (std::exp(floor) - 1));
  for (double tick : {-extent / 1.1, -extent / 2.2, 0.0, extent / 2.2, extent / 1.1})
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"{3}\"/><text x=\"{0:.1f}\" "
        "y=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
        x_of(std::exp(tick)), top - 6, height - 4, tick == 0 ? "#4b5563" : "#e3e6ea", top - 10,
        tick == 0 ? "1 (no change)" : format_change(std::exp(tick)));
  int y = top;
  auto whisker = [&](const char* css, const std::string& data, double low, double high, int middle) {
    std::string lines = fmt::format("<line class=\"{}\" {} x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\"/>", css,
                                    data, x_of(low), middle, x_of(high), middle);
    for (double end : {low, high}) {
      const double x = x_of(end);
      if (std::abs(std::log(end)) < extent)
        lines += fmt::format("<line class=\"ab-ratio-cap\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\"/>", x,
                             middle - 4, middle + 4);
      else  // beyond the scale: an arrow pointing on
        lines += fmt::format("<path class=\"ab-ratio-clipped\" d=\"M{:.1f} {}l{} 4l{} 4z\"/>", x, middle - 4,
                             end < 1 ? -6 : 6, end < 1 ? 6 : -6);
    }
    return lines + "\n";
  };
  for (const ArmSummary* summary : summaries) {
    const std::string& arm = summary->arm;
    svg += fmt::format("<text class=\"ab-ratio-arm\" x=\"4\" y=\"{}\">{} / {}</text>\n", y + row - 6, html_escape(arm),
                       html_escape(analysis.manifest.baseline().name));
    y += row;
    for (const Comparison* c : comparisons) {
      if (c->arm != arm) continue;
      const int middle = y + row / 2;
      const std::string data =
          fmt::format("data-model=\"{}\" data-arm=\"{}\"", html_escape(c->model), html_escape(arm));
      std::string text =
          noisy ? change_with_interval(c->ratio, c->interval_low, c->interval_high) : format_change(c->ratio);
      if (noisy && std::isfinite(c->ratio) && !std::isfinite(c->interval_low))
        text += fmt::format(" (no {:.0f}% interval from {} and {} samples)", confidence, c->samples.size(),
                            c->baseline_samples.size());
      svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_width - 8, middle + 4,
                         html_escape(c->model));
      if (std::isfinite(c->ratio) && c->ratio > 0) {
        if (std::isfinite(c->interval_low) && std::isfinite(c->interval_high))
          svg += whisker("ab-ratio-whisker", data, c->interval_low, c->interval_high, middle);
        svg += fmt::format(
            "<circle class=\"ab-ratio-mark ab-{}\" {} cx=\"{:.1f}\" cy=\"{}\" r=\"4\"><title>{} {}: {} "
            "({})</title></circle>\n",
            verdict_name(c->verdict), data, x_of(c->ratio), middle, html_escape(c->model), html_escape(arm),
            html_escape(text), html_escape(verdict_text(*c, analysis.alpha)));
      } else {
        text = "missing";
      }
      svg += fmt::format("<text class=\"ab-ratio-value\" {} x=\"{}\" y=\"{}\">{}</text>\n", data,
                         label_width + plot_width + 6, middle + 4, html_escape(text));
      y += row;
    }
    const GeomeanInterval& g = summary->interval;
    const int middle = y + row / 2;
    std::string text = change_with_interval(g.geomean, g.low, g.high);
    if (g.count == 1) text += " (one model: no interval)";
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">geomean of {} model{}</text>\n", label_width - 8,
                       middle + 4, g.count, g.count == 1 ? "" : "s");
    if (std::isfinite(g.geomean) && g.geomean > 0) {
      const std::string data = fmt::format("data-arm=\"{}\"", html_escape(arm));
      if (std::isfinite(g.low) && std::isfinite(g.high))
        svg += whisker("ab-geomean-whisker", data, g.low, g.high, middle);
      const double x = x_of(g.geomean);
      svg += fmt::format(
          "<path class=\"ab-geomean-mark\" {} d=\"M{:.1f} {}l6 6l-6 6l-6 -6z\"><title>{}: geomean {}{}"
          "</title></path>\n",
          data, x, middle - 6, html_escape(arm), html_escape(text),
          std::isfinite(g.low) ? fmt::format(" ({:.0f}% t interval over the models)", confidence) : "");
    } else {
      text = "missing";
    }
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", label_width + plot_width + 6, middle + 4, html_escape(text));
    y += row;
  }
  return svg + "</svg>\n";
}

// One model's values of one metric across builds: a line per arm, one point per build (a build's
// latest sweep), oldest build on the left; a hollow point is another version of the arm than now.
std::string history_chart(const Analysis& analysis, const MetricDefinition& metric, const std::string& model,
                          const std::vector<HistoryPoint>& history) {
  std::vector<std::string> builds;                                           // x positions, oldest first
  std::map<std::string, std::map<std::string, const HistoryPoint*>> by_arm;  // arm -> build -> its latest point
  double low = INFINITY, high = -INFINITY;
  for (const HistoryPoint& point : history) {
    if (point.model != model || point.metric != metric.name) continue;
    if (std::find(builds.begin(), builds.end(), point.build_hash) == builds.end()) builds.push_back(point.build_hash);
    by_arm[point.arm][point.build_hash] = &point;
    low = std::min(low, point.value);
    high = std::max(high, point.value);
  }
  const int left = 80, step = 70, top = 12, plot_height = 120, bottom = 34;
  const int plot_right = left + std::max(240, static_cast<int>(builds.size()) * step);
  const int width = plot_right + 170, height = top + plot_height + bottom;
  const double pad = high > low ? (high - low) * 0.08 : std::max(std::abs(high) * 0.05, 1.0);
  low -= pad;
  high += pad;
  auto x_of = [&](std::size_t build) {
    return left + (static_cast<double>(build) + 0.5) * (plot_right - left) / builds.size();
  };
  auto y_of = [&](double value) { return top + plot_height - (value - low) / (high - low) * plot_height; };

  std::string svg = fmt::format(
      "<svg class=\"ab-history-chart\" data-metric=\"{0}\" data-model=\"{1}\" xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{2}\" height=\"{3}\" viewBox=\"0 0 {2} {3}\" role=\"img\" aria-label=\"{0} of {1} across tessera "
      "builds\">\n",
      html_escape(metric.name), html_escape(model), width, height);
  if (builds.empty())
    return svg + fmt::format("<text x=\"{}\" y=\"{}\">no values recorded</text></svg>\n", left, top + plot_height / 2);
  for (double tick : {low + pad, (low + high) / 2, high - pad})
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#e3e6ea\"/><text x=\"{3}\" "
        "y=\"{4:.1f}\" text-anchor=\"end\">{5}</text>\n",
        left, y_of(tick), plot_right, left - 4, y_of(tick) + 4, format_metric_value(metric.name, tick));
  for (std::size_t b = 0; b < builds.size(); ++b)
    svg += fmt::format(
        "<text class=\"ab-history-build{}\" data-build=\"{}\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">"
        "{}</text>\n",
        builds[b] == analysis.manifest.build.build_hash ? " ab-history-current" : "", html_escape(builds[b]), x_of(b),
        top + plot_height + 16, html_escape(builds[b].substr(0, 8)));
  svg += fmt::format("<text x=\"{}\" y=\"{}\">tessera build, oldest first (bold: this report's)</text>\n", left,
                     top + plot_height + 30);
  std::vector<std::string> arms{analysis.manifest.baseline().name};
  arms.insert(arms.end(), analysis.compared_arms.begin(), analysis.compared_arms.end());
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const ArmInfo* now = analysis.manifest.find_arm(arms[a]);
    const char* colour = arm_colour(analysis, arms[a]);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n",
        plot_right + 16, top + 16 * static_cast<int>(a), colour, plot_right + 31, top + 9 + 16 * static_cast<int>(a),
        html_escape(arms[a]));
    const auto found = by_arm.find(arms[a]);
    if (found == by_arm.end()) continue;
    std::string line, points;
    for (std::size_t b = 0; b < builds.size(); ++b) {
      const auto at = found->second.find(builds[b]);
      if (at == found->second.end()) continue;
      const HistoryPoint& p = *at->second;
      const bool same_version = now && now->fingerprint == p.arm_fingerprint;
      line += fmt::format("{:.1f},{:.1f} ", x_of(b), y_of(p.value));
      points += fmt::format(
          "<circle class=\"ab-history-point{}\" data-arm=\"{}\" data-build=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" "
          "r=\"3.5\" "
          "stroke=\"{}\" fill=\"{}\"><title>{} in build {} (tessera {}, recorded {}): {} from {} sample{} on {}; arm "
          "fingerprint {}{}</title></circle>\n",
          same_version ? "" : " ab-history-other-version", html_escape(arms[a]), html_escape(p.build_hash), x_of(b),
          y_of(p.value), colour, colour, html_escape(arms[a]), html_escape(p.build_hash), html_escape(p.version),
          html_escape(p.recorded_at), format_metric_value(metric.name, p.value), p.samples, p.samples == 1 ? "" : "s",
          html_escape(p.host), html_escape(p.arm_fingerprint),
          same_version ? " (this report's)" : " (another version of the arm than this report's)");
    }
    svg += fmt::format("<polyline class=\"ab-history-line\" data-arm=\"{}\" points=\"{}\" stroke=\"{}\"/>\n{}",
                       html_escape(arms[a]), line, colour, points);
  }
  return svg + "</svg>\n";
}

std::string verdict_cell(const Comparison& c, double alpha) {
  return fmt::format("<td class=\"ab-text ab-{}\">{}</td>", verdict_name(c.verdict),
                     html_escape(verdict_text(c, alpha)));
}

std::string number_cell(const std::string& text, double sort) {
  return fmt::format("<td data-sort=\"{}\">{}</td>", sort_value(sort), html_escape(text));
}

}  // namespace

std::string html_report(const Analysis& analysis, const DriverStats& driver, const std::vector<HistoryPoint>& history) {
  const Manifest& m = analysis.manifest;
  const std::string& baseline = m.baseline().name;
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  html += fmt::format("<title>tessera ab: suite {}</title>\n<style>{}</style>\n</head>\n<body>\n",
                      html_escape(m.suite_name), kStyle);
  html += fmt::format(
      "<header id=\"ab-header\">\n<h1>tessera ab: suite <code>{}</code></h1>\n<p class=\"ab-note\">{} model{}, "
      "{} arms, --repeat {}, tessera {} (build {}); ratios are arm / {}; intervals are {:.0f}%; noisy "
      "metrics use Mann-Whitney U with Benjamini-Hochberg q &lt;= {}.</p>\n<ul id=\"ab-arms\">\n",
      html_escape(m.suite_name), m.entries.size(), m.entries.size() == 1 ? "" : "s", analysis.compared_arms.size() + 1,
      m.repeat, html_escape(m.build.version), html_escape(m.build.build_hash), html_escape(baseline),
      100 * (1 - analysis.alpha), analysis.alpha);
  for (const ArmInfo& arm : m.arms) {
    if (!arm.twin_of.empty()) continue;
    std::string changes;
    for (const std::string& change : arm.changes) changes += (changes.empty() ? "" : "; ") + change;
    html +=
        fmt::format("<li data-arm=\"{0}\"><b>{0}</b>{1}: {2}{3}</li>\n", html_escape(arm.name),
                    arm.name == baseline ? " (baseline)" : "",
                    arm.overlay.empty() ? "the base pipeline" : "overlay <code>" + html_escape(arm.overlay) + "</code>",
                    changes.empty() ? "" : " &#8212; " + html_escape(changes));
  }
  html += fmt::format("</ul>\n<p id=\"ab-measured\" class=\"ab-note\">{}</p>\n</header>\n",
                      html_escape(measurement_line(analysis).substr(2)));

  // Summary: geomean per arm and metric.
  html +=
      "<section id=\"ab-overview\">\n<h2>Summary</h2>\n<div class=\"ab-scroll\"><table id=\"ab-summary\" "
      "class=\"ab-table ab-sortable\">\n"
      "<thead><tr><th class=\"ab-text\">arm</th><th class=\"ab-text\">metric</th><th class=\"ab-text\">kind</th>"
      "<th class=\"ab-text\">better when</th><th>geomean</th><th>change</th><th>interval</th>"
      "<th>models</th><th>better</th><th>worse</th><th>same</th><th>noise</th><th>info</th><th>missing</th></tr></"
      "thead>\n<tbody>\n";
  for (const ArmSummary& s : analysis.summaries) {
    const MetricDefinition& metric = metric_definition(s.metric);
    html += fmt::format(
        "<tr data-arm=\"{}\" data-metric=\"{}\"><td class=\"ab-text\">{}</td><td class=\"ab-text\">{}</td>"
        "<td class=\"ab-text\">{}</td><td class=\"ab-text\">{}</td>{}{}{}<td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        html_escape(s.arm), html_escape(s.metric), html_escape(s.arm), html_escape(s.metric),
        determinism_name(metric.determinism) + std::string(metric.judged ? "" : ", info only"),
        direction_name(metric.direction),
        number_cell(std::isfinite(s.interval.geomean) ? fmt::format("{:.4f}", s.interval.geomean) : "-",
                    s.interval.geomean),
        number_cell(format_change(s.interval.geomean), s.interval.geomean),
        number_cell(
            std::isfinite(s.interval.low) ? fmt::format("{:.4f} to {:.4f}", s.interval.low, s.interval.high) : "-",
            s.interval.low),
        s.interval.count, s.better, s.worse, s.same, s.noise, s.information, s.missing);
  }
  html += "</tbody>\n</table></div>\n</section>\n";

  // Charts: one sorted log-ratio chart per metric.
  html +=
      "<section id=\"ab-charts\">\n<h2>Log ratio per model, sorted</h2>\n<p class=\"ab-note\">Each bar is log(arm / "
      "baseline) for one model; the shaded band is the A-vs-A noise floor of noisy metrics. Hover a bar for its "
      "values.</p>\n";
  for (const MetricDefinition& metric : ab_metrics())
    html += fmt::format(
        "<figure class=\"ab-chart-figure\" data-metric=\"{0}\"><figcaption>{0} <span class=\"ab-note\">({1}, "
        "{2} is better; {3})</span></figcaption>\n{4}</figure>\n",
        html_escape(metric.name), determinism_name(metric.determinism), direction_name(metric.direction),
        html_escape(metric.description), log_ratio_chart(analysis, metric));
  html += "</section>\n";

  // Ratio charts: every judged metric's per-model ratios with their intervals, and the geomean.
  html += fmt::format(
      "<section id=\"ab-ratios\">\n<h2>Ratio per model with {0:.0f}% intervals</h2>\n<p class=\"ab-note\">"
      "Per compared arm, each model's ratio arm / {1} on a log axis, then the geometric mean over the "
      "models. Noisy metrics: the ratio of the medians with a distribution-free interval (the "
      "Mann-Whitney test inverted on the log samples; none when the repeats are too few to reach {0:.0f}%), "
      "the A-vs-A noise floor shaded. Deterministic metrics: a point, exact. Geomean: Student's t "
      "interval over the models (how much the ratio varies between them).</p>\n",
      100 * (1 - analysis.alpha), html_escape(baseline));
  for (const MetricDefinition& metric : ab_metrics())
    if (metric.judged)
      html += fmt::format(
          "<figure class=\"ab-ratio-figure\" data-metric=\"{0}\"><figcaption>{0} <span class=\"ab-note\">"
          "({1}, {2} is better)</span></figcaption>\n{3}</figure>\n",
          html_escape(metric.name), determinism_name(metric.determinism), direction_name(metric.direction),
          ratio_interval_chart(analysis, metric));
  html += "</section>\n";

  // Per-model table with a metric filter.
  html +=
      "<section id=\"ab-per-model\">\n<h2>Per model</h2>\n<label>metric <select id=\"ab-metric-filter\"><option "
      "value=\"\">all</option>";
  for (const MetricDefinition& metric : ab_metrics())
    html += fmt::format("<option value=\"{0}\">{0}</option>", html_escape(metric.name));
  html += fmt::format(
      "</select></label>\n<div class=\"ab-scroll\"><table id=\"ab-models\" class=\"ab-table ab-sortable\">\n<thead><tr>"
      "<th class=\"ab-text\">model</th><th class=\"ab-text\">arm</th><th class=\"ab-text\">metric</th>"
      "<th>{} value</th><th>arm value</th><th>ratio</th><th>change</th><th>p</th><th>q</th>"
      "<th class=\"ab-text\">verdict</th><th class=\"ab-text\">package</th></tr></thead>\n<tbody>\n",
      html_escape(baseline));
  for (const Comparison& c : analysis.comparisons) {
    html += fmt::format(
        "<tr data-model=\"{0}\" data-arm=\"{1}\" data-metric=\"{2}\"><td class=\"ab-text\">{0}</td>"
        "<td class=\"ab-text\">{1}</td><td class=\"ab-text\">{2}</td>{3}{4}{5}{6}{7}{8}{9}"
        "<td class=\"ab-text\">{10}</td></tr>\n",
        html_escape(c.model), html_escape(c.arm), html_escape(c.metric),
        number_cell(format_metric_value(c.metric, c.baseline), c.baseline),
        number_cell(format_metric_value(c.metric, c.value), c.value),
        number_cell(std::isfinite(c.ratio) ? fmt::format("{:.4f}", c.ratio) : "-", c.ratio),
        number_cell(format_change(c.ratio), c.ratio),
        number_cell(std::isfinite(c.p_value) ? fmt::format("{:.3g}", c.p_value) : "-", c.p_value),
        number_cell(std::isfinite(c.q_value) ? fmt::format("{:.3g}", c.q_value) : "-", c.q_value),
        verdict_cell(c, analysis.alpha), c.same_package ? "identical" : "differs");
  }
  html += "</tbody>\n</table></div>\n</section>\n";

  // Noise floor.
  html += fmt::format(
      "<section id=\"ab-noise-floor\">\n<h2>Noise floor</h2>\n<p class=\"ab-note\">{0} compiled a second "
      "time as <code>{0}.twin</code> in every repeat; a noisy metric's change smaller than the largest "
      "twin change is reported as noise.</p>\n<table id=\"ab-noise\" class=\"ab-table\">\n<thead><tr>"
      "<th class=\"ab-text\">metric</th><th>pairs</th><th>outlier pairs</th><th>geomean twin / base</th><th>largest "
      "change</th>"
      "<th>sd of log ratio</th></tr></thead>\n<tbody>\n",
      html_escape(baseline));
  for (const NoiseFloor& f : analysis.noise_floors)
    html += fmt::format(
        "<tr data-metric=\"{0}\"><td class=\"ab-text\">{0}</td><td>{1}</td><td>{2}</td>{3}{4}{5}</tr>\n",
        html_escape(f.metric), f.pairs, f.outliers,
        number_cell(std::isfinite(f.geomean_ratio) ? fmt::format("{:.4f}", f.geomean_ratio) : "-", f.geomean_ratio),
        number_cell(std::isfinite(f.max_abs_log_ratio)
                        ? fmt::format("{:.1f}%", 100 * (std::exp(f.max_abs_log_ratio) - 1))
                        : "-",
                    f.max_abs_log_ratio),
        number_cell(std::isfinite(f.log_sd) ? fmt::format("{:.4f}", f.log_sd) : "-", f.log_sd));
  html += "</tbody>\n</table>\n</section>\n";

  // Per-phase drill-down, for the arms that share the baseline's plan.
  html += fmt::format(
      "<section id=\"ab-phases\">\n<h2>Exchange phases</h2>\n<p class=\"ab-note\">Per exchange phase of "
      "each model: the schedule horizon against the phase's lower bound (from the compile log and "
      "<code>--emit-phases</code>; the phase files of repeat 0 are kept under <code>phases/</code> in the "
      "results directory for <code>tessera schedule</code>), for {} and the arms whose exchange phases are "
      "the same problems, phase by phase (byte-identical phase files). An arm whose plan differs has other "
      "phases, so its phase N is not {}'s phase N and it is left out.</p>\n",
      html_escape(baseline), html_escape(baseline));
  for (const PhaseTable& table : analysis.phase_tables) {
    std::string arms;
    for (const std::string& arm : table.arms) arms += (arms.empty() ? "" : ", ") + arm;
    html += fmt::format("<details class=\"ab-phase-model\" data-model=\"{0}\" open>\n<summary>{0} ({1})</summary>\n",
                        html_escape(table.model),
                        table.arms.empty() ? std::string("no per-phase comparison")
                                           : fmt::format("{} exchange phase{} of {}; compared: {}", table.phases.size(),
                                                         table.phases.size() == 1 ? "" : "s", html_escape(baseline),
                                                         html_escape(arms)));
    for (const OmittedArm& omitted : table.omitted)
      html += fmt::format("<p class=\"ab-plan-differs\" data-arm=\"{}\">{}</p>\n", html_escape(omitted.arm),
                          html_escape(omitted.why));
    if (!table.arms.empty() && table.phases.empty())
      html += fmt::format("<p class=\"ab-note\">The plan of {} has no exchange phase in this model.</p>\n",
                          html_escape(baseline));
    if (table.phases.empty()) {
      html += "</details>\n";
      continue;
    }
    html +=
        "<div class=\"ab-scroll\"><table class=\"ab-phase-table ab-table ab-sortable\">\n<thead><tr><th>phase</th>"
        "<th>transfers</th><th>words</th><th>lower bound</th><th>endpoint bound</th>";
    for (const std::string& arm : table.arms)
      html += fmt::format("<th data-arm=\"{0}\">{0} horizon</th><th>{0} / bound</th>", html_escape(arm));
    html += "</tr></thead>\n<tbody>\n";
    for (std::size_t p = 0; p < table.phases.size(); ++p) {
      const PhaseRecord& r = table.cells[p].front();  // the same problem in every column
      html += fmt::format("<tr data-phase=\"{0}\"><td>{0}</td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td>",
                          table.phases[p], r.transfers, r.words, r.lower_bound, r.endpoint_lower_bound);
      for (const PhaseRecord& cell : table.cells[p]) {
        const double ratio =
            cell.lower_bound ? static_cast<double>(cell.horizon) / static_cast<double>(cell.lower_bound) : NAN;
        html += fmt::format("<td>{}</td>{}", cell.horizon,
                            number_cell(std::isfinite(ratio) ? fmt::format("{:.4f}", ratio) : "-", ratio));
      }
      html += "</tr>\n";
    }
    html += "</tbody>\n</table></div>\n" + phase_chart(analysis, table) + "</details>\n";
  }
  html += "</section>\n";

  // History: how each judged metric of these models moved across the builds the database holds.
  html += fmt::format(
      "<section id=\"ab-history\">\n<h2>History across builds</h2>\n<p class=\"ab-note\">From the "
      "history database (<code>tessera ab history</code>), this sweep included: per judged metric and "
      "model, the value of {} and of each arm in every tessera build recorded (deterministic metrics: "
      "the package's figure; noisy ones: the median over the repeats, on the machines each point's "
      "title names), oldest build first. A hollow point is another version of the arm (another "
      "fingerprint: its plugins, options or files differed) than this report's.</p>\n",
      html_escape(baseline));
  for (const MetricDefinition& metric : ab_metrics()) {
    if (!metric.judged) continue;
    html += fmt::format(
        "<figure class=\"ab-history-figure\" data-metric=\"{0}\"><figcaption>{0} <span "
        "class=\"ab-note\">({1}, {2} is better)</span></figcaption>\n",
        html_escape(metric.name), determinism_name(metric.determinism), direction_name(metric.direction));
    for (const SuiteEntry& entry : m.entries)
      html += fmt::format("<div class=\"ab-history-model\"><div class=\"ab-note\">{}</div>\n{}</div>\n",
                          html_escape(entry.id), history_chart(analysis, metric, entry.id, history));
    html += "</figure>\n";
  }
  html += "</section>\n";

  html += "<section id=\"ab-warnings-section\">\n<h2>Warnings</h2>\n<ul id=\"ab-warnings\">\n";
  for (const std::string& warning : analysis.warnings) html += "<li>" + html_escape(warning) + "</li>\n";
  if (analysis.warnings.empty()) html += "<li class=\"ab-none\">none</li>\n";
  html += "</ul>\n</section>\n";
  html += fmt::format(
      "<footer id=\"ab-footer\" class=\"ab-note\"><p>{} of {} work items present, {} failed. Made by "
      "<code>tessera {}</code> from {}.</p></footer>\n",
      analysis.items_present, analysis.items.size(), analysis.items_failed, html_escape(driver.command),
      html_escape(driver.results));

  // The JSON report, for scripts that read the page. JSON may write '<' as \u003c (it occurs only
  // in strings), so no name can end the script or open a comment ("<!--") that swallows the page.
  std::string data;
  for (char c : json_report(analysis, driver)) data += c == '<' ? std::string("\\u003c") : std::string(1, c);
  html += "<script type=\"application/json\" id=\"ab-data\">\n" + data + "</script>\n";
  html += std::string("<script>") + kScript + "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace tessera::ab
