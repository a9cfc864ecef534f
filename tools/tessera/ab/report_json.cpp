// The JSON A/B report: everything the other reports show, for scripts (NaN is written as null).
#include <cmath>

#include <nlohmann/json.hpp>

#include "report.hpp"

using nlohmann::json;

namespace tessera::ab {

namespace {

json number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }

json comparison_json(const Comparison& c, double alpha) {
  return {{"model", c.model},
          {"arm", c.arm},
          {"metric", c.metric},
          {"baseline", number(c.baseline)},
          {"value", number(c.value)},
          {"ratio", number(c.ratio)},
          {"interval_low", number(c.interval_low)},
          {"interval_high", number(c.interval_high)},
          {"log_ratio", number(std::isfinite(c.ratio) && c.ratio > 0 ? std::log(c.ratio) : NAN)},
          {"baseline_samples", c.baseline_samples},
          {"samples", c.samples},
          {"p_value", number(c.p_value)},
          {"q_value", number(c.q_value)},
          {"exact_test", c.exact},
          {"verdict", verdict_name(c.verdict)},
          {"verdict_text", verdict_text(c, alpha)},
          {"outliers", c.outliers},
          {"noise_floor_log", number(c.noise_floor_log)},
          {"same_package", c.same_package}};
}

}  // namespace

std::string json_report(const Analysis& analysis, const DriverStats& driver) {
  const Manifest& m = analysis.manifest;
  json entries = json::array();
  for (const SuiteEntry& e : m.entries)
    entries.push_back({{"id", e.id},
                       {"model", e.model},
                       {"target", e.target},
                       {"model_hash", e.model_hash},
                       {"target_hash", e.target_hash}});
  json arms = json::array();
  for (const ArmInfo& a : m.arms)
    arms.push_back({{"name", a.name},
                    {"overlay", a.overlay},
                    {"pipeline", a.pipeline},
                    {"fingerprint", a.fingerprint},
                    {"changes", a.changes},
                    {"twin_of", a.twin_of},
                    {"baseline", a.name == m.baseline().name}});
  json metrics = json::array();
  for (const MetricDefinition& metric : ab_metrics())
    metrics.push_back({{"name", metric.name},
                       {"unit", metric.unit},
                       {"determinism", determinism_name(metric.determinism)},
                       {"better_when", direction_name(metric.direction)},
                       {"description", metric.description},
                       {"judged", metric.judged}});
  json comparisons = json::array(), twins = json::array();
  for (const Comparison& c : analysis.comparisons) comparisons.push_back(comparison_json(c, analysis.alpha));
  for (const Comparison& c : analysis.twin_comparisons) twins.push_back(comparison_json(c, analysis.alpha));
  json summaries = json::array();
  for (const ArmSummary& s : analysis.summaries)
    summaries.push_back({{"arm", s.arm},
                         {"metric", s.metric},
                         {"geomean", number(s.interval.geomean)},
                         {"interval_low", number(s.interval.low)},
                         {"interval_high", number(s.interval.high)},
                         {"confidence", 1 - analysis.alpha},
                         {"models", s.interval.count},
                         {"better", s.better},
                         {"worse", s.worse},
                         {"same", s.same},
                         {"noise", s.noise},
                         {"information", s.information},
                         {"missing", s.missing}});
  json noise = json::array();
  for (const NoiseFloor& f : analysis.noise_floors)
    noise.push_back({{"metric", f.metric},
                     {"pairs", f.pairs},
                     {"outlier_pairs", f.outliers},
                     {"geomean_ratio", number(f.geomean_ratio)},
                     {"max_abs_log_ratio", number(f.max_abs_log_ratio)},
                     {"log_sd", number(f.log_sd)}});
  json packages = json::array();
  for (const ArmModel& p : analysis.arm_models)
    packages.push_back({{"model", p.model},
                        {"arm", p.arm},
                        {"package_hash", p.package_hash},
                        {"same_package_as_baseline", p.same_package},
                        {"numerical_test", p.numerical_test},
                        {"compiles", p.compiles},
                        {"failed", p.failed}});
  json phases = json::array();
  for (const PhaseTable& table : analysis.phase_tables) {
    json rows = json::array();
    for (std::size_t r = 0; r < table.phases.size(); ++r) {
      json cells = json::array();
      for (std::size_t a = 0; a < table.arms.size(); ++a) {
        const PhaseRecord& cell = table.cells[r][a];
        cells.push_back({{"arm", table.arms[a]},
                         {"horizon", cell.horizon},
                         {"lower_bound", cell.lower_bound},
                         {"endpoint_lower_bound", cell.endpoint_lower_bound},
                         {"transfers", cell.transfers},
                         {"words", cell.words},
                         {"problem_hash", cell.problem_hash}});
      }
      rows.push_back({{"phase", table.phases[r]}, {"cells", cells}});
    }
    json omitted = json::array();
    for (const OmittedArm& arm : table.omitted)
      omitted.push_back(
          {{"arm", arm.arm}, {"phases", arm.phases ? json(*arm.phases) : json(nullptr)}, {"why", arm.why}});
    phases.push_back({{"model", table.model}, {"arms", table.arms}, {"rows", rows}, {"omitted_arms", omitted}});
  }
  json items = json::array();
  for (const ItemStatus& item : analysis.items)
    items.push_back({{"model", item.model}, {"arm", item.arm}, {"repeat", item.repeat}, {"status", item.status}});

  json report = {
      {"format", "tessera-ab-report/1"},
      {"tessera", {{"version", m.build.version}, {"build_hash", m.build.build_hash}}},
      {"suite",
       {{"name", m.suite_name}, {"file", m.suite_file}, {"fingerprint", m.suite_fingerprint}, {"entries", entries}}},
      {"base_pipeline", m.base_pipeline},
      {"baseline", m.baseline().name},
      {"arms", arms},
      {"repeat", m.repeat},
      {"warmup", m.warmup},
      {"measured",
       {{"hosts", analysis.hosts},
        {"load_average_low", number(analysis.load_average_low)},
        {"load_average_high", number(analysis.load_average_high)}}},
      {"alpha", analysis.alpha},
      {"metrics", metrics},
      {"summaries", summaries},
      {"comparisons", comparisons},
      {"twin_comparisons", twins},
      {"noise_floor", noise},
      {"packages", packages},
      {"phases", phases},
      {"items",
       {{"expected", analysis.items.size()},
        {"present", analysis.items_present},
        {"failed", analysis.items_failed},
        {"list", items}}},
      {"warnings", analysis.warnings},
      {"driver",
       {{"command", driver.command},
        {"results", driver.results},
        {"wall_ms", driver.wall_ms},
        {"self_peak_rss_kib", driver.self_peak_rss_kib},
        {"child_wall_ms", driver.child_wall_ms},
        {"executed", driver.executed},
        {"skipped", driver.skipped},
        {"stale", driver.stale},
        {"failed", driver.failed},
        {"runs", driver.runs},
        {"warmups", driver.warmups}}},
  };
  return report.dump(2) + "\n";
}

}  // namespace tessera::ab
