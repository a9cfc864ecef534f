// Plain-text A/B reports: the terminal table, Markdown and CSV.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "report.hpp"

namespace tessera::ab {

namespace {

const MetricDefinition& metric_definition(const std::string& name) {
  for (const MetricDefinition& metric : ab_metrics())
    if (metric.name == name) return metric;
  return ab_metrics().front();
}

std::string format_probability(double p) {
  if (!std::isfinite(p)) return "-";
  return p < 0.001 ? fmt::format("{:.1e}", p) : fmt::format("{:.3f}", p);
}

// Three decimals, or six when three would hide a change (2915/2914 is 1.000343, not 1.000).
std::string format_ratio(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  const std::string short_form = fmt::format("{:.3f}", ratio);
  return short_form == "1.000" && ratio != 1.0 ? fmt::format("{:.6f}", ratio) : short_form;
}

std::string format_interval(const GeomeanInterval& interval) {
  if (!std::isfinite(interval.low)) return "-";
  return fmt::format("[{:.3f}, {:.3f}]", interval.low, interval.high);
}

// Rows of one arm, largest |log ratio| first; missing values last.
std::vector<const Comparison*> sorted_rows(const std::vector<Comparison>& comparisons, const std::string& arm) {
  std::vector<const Comparison*> rows;
  for (const Comparison& c : comparisons)
    if (c.arm == arm) rows.push_back(&c);
  auto magnitude = [](const Comparison* c) { return std::isfinite(c->ratio) ? std::abs(std::log(c->ratio)) : -1.0; };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const Comparison* a, const Comparison* b) { return magnitude(a) > magnitude(b); });
  return rows;
}

std::string arm_description(const ArmInfo& arm) {
  std::string text = arm.overlay.empty() ? "the base pipeline" : "overlay " + arm.overlay;
  if (!arm.changes.empty()) {
    text += ":";
    for (std::size_t i = 0; i < arm.changes.size(); ++i) text += (i ? "; " : " ") + arm.changes[i];
  }
  return text;
}

std::string markdown_table(const std::vector<std::vector<std::string>>& rows, std::size_t left) {
  std::string text;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    text += "|";
    for (const std::string& cell : rows[r]) {
      std::string escaped;
      for (char c : cell) escaped += c == '|' ? std::string("\\|") : std::string(1, c);
      text += " " + escaped + " |";
    }
    text += "\n";
    if (r == 0) {
      text += "|";
      for (std::size_t i = 0; i < rows[r].size(); ++i) text += i < left ? " --- |" : " ---: |";
      text += "\n";
    }
  }
  return text;
}

// "deterministic", "noisy", or either with ", info only" for metrics that get no verdict.
std::string metric_kind(const MetricDefinition& metric) {
  return std::string(determinism_name(metric.determinism)) + (metric.judged ? "" : ", info only");
}

// The A-vs-A floor of a noisy metric as "±12.3%"; "-" for deterministic ones, "none" when unmeasured.
std::string format_noise_floor(const Analysis& analysis, const MetricDefinition& metric) {
  if (metric.determinism != Determinism::noisy) return "-";
  for (const NoiseFloor& floor : analysis.noise_floors)
    if (floor.metric == metric.name && std::isfinite(floor.max_abs_log_ratio))
      return fmt::format("±{:.1f}%", 100 * (std::exp(floor.max_abs_log_ratio) - 1));
  return "none";
}

std::vector<std::vector<std::string>> summary_rows(const Analysis& analysis, const std::string& arm) {
  std::vector<std::vector<std::string>> rows = {{"metric", "kind", "better when", "geomean", "interval", "noise floor",
                                                 "better", "worse", "same", "noise", "info", "missing"}};
  for (const ArmSummary& s : analysis.summaries) {
    if (s.arm != arm) continue;
    const MetricDefinition& metric = metric_definition(s.metric);
    rows.push_back({s.metric, metric_kind(metric), direction_name(metric.direction), format_ratio(s.interval.geomean),
                    format_interval(s.interval), format_noise_floor(analysis, metric), std::to_string(s.better),
                    std::to_string(s.worse), std::to_string(s.same), std::to_string(s.noise),
                    std::to_string(s.information), std::to_string(s.missing)});
  }
  return rows;
}

std::vector<std::vector<std::string>> model_rows(const Analysis& analysis, const std::string& arm) {
  const std::string& baseline = analysis.manifest.baseline().name;
  std::vector<std::vector<std::string>> rows = {
      {"model", "metric", baseline, arm, arm + "/" + baseline, "change", "p", "q", "verdict"}};
  for (const Comparison* c : sorted_rows(analysis.comparisons, arm))
    rows.push_back({c->model, c->metric, format_metric_value(c->metric, c->baseline),
                    format_metric_value(c->metric, c->value), format_ratio(c->ratio), format_change(c->ratio),
                    format_probability(c->p_value), format_probability(c->q_value), verdict_text(*c, analysis.alpha)});
  return rows;
}

std::vector<std::vector<std::string>> noise_rows(const Analysis& analysis) {
  std::vector<std::vector<std::string>> rows = {
      {"metric", "pairs", "outlier pairs", "geomean twin/base", "largest change", "sd of log ratio"}};
  for (const NoiseFloor& floor : analysis.noise_floors)
    rows.push_back(
        {floor.metric, std::to_string(floor.pairs), std::to_string(floor.outliers), format_ratio(floor.geomean_ratio),
         std::isfinite(floor.max_abs_log_ratio) ? fmt::format("{:.1f}%", 100 * (std::exp(floor.max_abs_log_ratio) - 1))
                                                : "-",
         std::isfinite(floor.log_sd) ? fmt::format("{:.4f}", floor.log_sd) : "-"});
  return rows;
}

std::size_t unchanged_models(const Analysis& analysis, const std::string& arm) {
  std::size_t count = 0;
  for (const ArmModel& info : analysis.arm_models) count += info.arm == arm && info.same_package;
  return count;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string csv_number(double value) { return std::isfinite(value) ? fmt::format("{:.10g}", value) : ""; }

}  // namespace

std::string text_table(const std::vector<std::vector<std::string>>& rows, std::size_t left) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (widths.size() <= i) widths.push_back(0);
      widths[i] = std::max(widths[i], row[i].size());
    }
  std::string text;
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t i = 0; i < row.size(); ++i)
      line += " " + (i < left ? fmt::format("{:<{}}", row[i], widths[i]) : fmt::format("{:>{}}", row[i], widths[i]));
    line.erase(line.find_last_not_of(' ') + 1);
    text += line + "\n";
  }
  return text;
}

std::string measurement_line(const Analysis& analysis) {
  std::string hosts;
  for (const std::string& host : analysis.hosts) hosts += (hosts.empty() ? "" : ", ") + host;
  if (hosts.empty()) return "  measured: no records yet";
  return fmt::format(
      "  measured on {}, 1-minute load average {:.2f} to {:.2f} at item starts, {} warm-up compile{} per "
      "model and arm, tessera build {}",
      hosts, analysis.load_average_low, analysis.load_average_high, analysis.manifest.warmup,
      analysis.manifest.warmup == 1 ? "" : "s", analysis.manifest.build.build_hash);
}

std::string format_metric_value(const std::string& metric, double value) {
  if (!std::isfinite(value)) return "-";
  if (metric == "exchange_bound_ratio") return fmt::format("{:.4f}", value);
  if (metric == "compile_wall_ms" || metric == "compile_cpu_ms") return fmt::format("{:.1f}", value);
  return fmt::format("{:.0f}", value);
}

std::string format_change(double ratio) {
  if (!std::isfinite(ratio)) return "-";
  const double percent = 100 * (ratio - 1);
  // One decimal, or two significant digits below 0.1%, so a one-cycle change is not "+0.0%".
  if (percent == 0 || std::abs(percent) >= 0.1) return fmt::format("{:+.1f}%", percent);
  return fmt::format("{:+.2g}%", percent);
}

std::string arm_verdict(const Analysis& analysis, const std::string& arm) {
  std::string text;
  std::size_t models = analysis.manifest.entries.size();
  for (const ArmSummary& s : analysis.summaries) {
    if (s.arm != arm || !metric_definition(s.metric).judged) continue;
    for (const auto& [count, word] : {std::pair{s.worse, "worse"}, std::pair{s.better, "better"}})
      if (count > 0)
        text += fmt::format("{}{} on {} in {} of {} model{}, geomean {}", text.empty() ? "" : "; ", word, s.metric,
                            count, models, models == 1 ? "" : "s", format_change(s.interval.geomean));
  }
  if (text.empty()) text = "no judged metric changed beyond its noise on any model";
  return fmt::format("{}: {} (against {})", arm, text, analysis.manifest.baseline().name);
}

std::string terminal_report(const Analysis& analysis, const std::string& results) {
  const Manifest& m = analysis.manifest;
  const std::string& baseline = m.baseline().name;
  std::string text = fmt::format("tessera ab: suite {} ({} model{}) x {} arms, --repeat {}, results in {}\n",
                                 m.suite_name, m.entries.size(), m.entries.size() == 1 ? "" : "s",
                                 analysis.compared_arms.size() + 1, m.repeat, results);
  for (const ArmInfo& arm : m.arms)
    if (arm.twin_of.empty())
      text +=
          fmt::format("  arm {}{}: {}\n", arm.name, arm.name == baseline ? " (baseline)" : "", arm_description(arm));
  text += measurement_line(analysis) + "\n";
  for (const std::string& arm : analysis.compared_arms) text += "verdict " + arm_verdict(analysis, arm) + "\n";
  for (const std::string& arm : analysis.compared_arms) {
    text += fmt::format(
        "\n{} vs {}: geometric mean of {}/{} over the models, {:.0f}% interval ({} of {} packages "
        "identical to {}'s)\n",
        arm, baseline, arm, baseline, 100 * (1 - analysis.alpha), unchanged_models(analysis, arm), m.entries.size(),
        baseline);
    text += text_table(summary_rows(analysis, arm), 3);
    text += fmt::format("\n{} vs {} per model, largest change first\n", arm, baseline);
    text += text_table(model_rows(analysis, arm), 2);
  }
  text += fmt::format("\nnoise floor: {} against itself ({} compiled again), per (model, repeat)\n", baseline,
                      baseline + ".twin");
  text += text_table(noise_rows(analysis), 1);
  if (!analysis.warnings.empty()) {
    text += "\nwarnings:\n";
    for (const std::string& warning : analysis.warnings) text += "  - " + warning + "\n";
  }
  return text;
}

std::string markdown_report(const Analysis& analysis) {
  const Manifest& m = analysis.manifest;
  const std::string& baseline = m.baseline().name;
  std::string text =
      fmt::format("# tessera ab: suite `{}`\n\n{} model{}, {} arms, `--repeat {}`, tessera {} (build {}).\n\n",
                  m.suite_name, m.entries.size(), m.entries.size() == 1 ? "" : "s", analysis.compared_arms.size() + 1,
                  m.repeat, m.build.version, m.build.build_hash);
  for (const ArmInfo& arm : m.arms)
    if (arm.twin_of.empty())
      text +=
          fmt::format("- **{}**{}: {}\n", arm.name, arm.name == baseline ? " (baseline)" : "", arm_description(arm));
  text += "\n" + measurement_line(analysis).substr(2) + ".\n";
  for (const std::string& arm : analysis.compared_arms) {
    text += fmt::format(
        "\n## {} vs {}\n\nGeometric mean of {}/{} over the models with a {:.0f}% interval; {} of {} "
        "packages identical to {}'s.\n\n",
        arm, baseline, arm, baseline, 100 * (1 - analysis.alpha), unchanged_models(analysis, arm), m.entries.size(),
        baseline);
    text += markdown_table(summary_rows(analysis, arm), 3);
    text += "\nPer model, largest change first:\n\n";
    text += markdown_table(model_rows(analysis, arm), 2);
  }
  text += fmt::format(
      "\n## Noise floor\n\n{} compiled twice per (model, repeat); the largest change is the floor below "
      "which a noisy metric's change is called noise.\n\n",
      baseline);
  text += markdown_table(noise_rows(analysis), 1);
  if (!analysis.warnings.empty()) {
    text += "\n## Warnings\n\n";
    for (const std::string& warning : analysis.warnings) text += "- " + warning + "\n";
  }
  return text;
}

std::string csv_report(const Analysis& analysis) {
  std::string text =
      "arm,baseline_arm,model,metric,determinism,better_when,baseline,value,ratio,log_ratio,p_value,q_value,exact,"
      "verdict,"
      "same_package,baseline_samples,samples,outliers,noise_floor_log,verdict_text\n";
  auto join = [](const std::vector<double>& values) {
    std::string joined;
    for (double v : values) joined += (joined.empty() ? "" : " ") + csv_number(v);
    return joined;
  };
  for (const auto* list : {&analysis.comparisons, &analysis.twin_comparisons})
    for (const Comparison& c : *list) {
      const MetricDefinition& metric = metric_definition(c.metric);
      text +=
          fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_field(c.arm),
                      csv_field(analysis.manifest.baseline().name), csv_field(c.model), c.metric,
                      determinism_name(metric.determinism), direction_name(metric.direction), csv_number(c.baseline),
                      csv_number(c.value), csv_number(c.ratio),
                      csv_number(std::isfinite(c.ratio) && c.ratio > 0 ? std::log(c.ratio) : NAN),
                      csv_number(c.p_value), csv_number(c.q_value), c.exact ? "true" : "false", verdict_name(c.verdict),
                      c.same_package ? "true" : "false", join(c.baseline_samples), join(c.samples), c.outliers,
                      csv_number(c.noise_floor_log), csv_field(verdict_text(c, analysis.alpha)));
    }
  return text;
}

}  // namespace tessera::ab
