// Turns A/B records into per-model comparisons, FDR-corrected tests, geomeans and a noise floor.
#include "analysis.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "arms.hpp"
#include "runner.hpp"

namespace tessera::ab {

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

using RecordKey = std::tuple<std::string, std::string, std::uint32_t>;

// The records of one (model, arm): by repeat, plus where its deterministic figures come from.
struct ArmModelRecords {
  std::map<std::uint32_t, const Record*> by_repeat;
  const Record* compiled = nullptr;  ///< the lowest repeat with a successful compile
  const Record* ran = nullptr;       ///< the record whose simulator run stands for this package
};

std::optional<double> deterministic_value(const std::string& metric, const ArmModelRecords& arm) {
  if (metric == "device_cycles" || metric == "simulated_exchange_cycles") {
    if (!arm.ran) return std::nullopt;
    return static_cast<double>(metric == "device_cycles" ? arm.ran->run.device_cycles : arm.ran->run.exchange_cycles);
  }
  if (!arm.compiled) return std::nullopt;
  const CompileRecord& c = arm.compiled->compile;
  if (metric == "estimated_cycles") return static_cast<double>(c.estimated_cycles);
  if (metric == "scheduled_exchange_cycles") return static_cast<double>(c.scheduled_exchange_cycles);
  if (metric == "exchange_lower_bound") return static_cast<double>(c.exchange_lower_bound);
  if (metric == "exchange_bound_ratio") {
    if (c.exchange_lower_bound == 0)
      return c.scheduled_exchange_cycles == 0 ? std::optional<double>(1.0) : std::nullopt;
    return static_cast<double>(c.scheduled_exchange_cycles) / static_cast<double>(c.exchange_lower_bound);
  }
  if (metric == "peak_tile_bytes") return static_cast<double>(c.peak_tile_bytes);
  return std::nullopt;
}

double noisy_sample(const std::string& metric, const Record& record) {
  if (metric == "compile_cpu_ms") return record.compile.process.cpu_ms();
  if (metric == "compile_wall_ms") return record.compile.process.wall_ms;
  if (metric == "compile_peak_rss_kib") return static_cast<double>(record.compile.process.peak_rss_kib);
  return kNaN;
}

// One (model, arm)'s samples of a noisy metric by repeat, the outliers among them left out.
struct NoisySamples {
  std::map<std::uint32_t, double> kept;
  std::size_t outliers = 0;
  std::vector<double> values() const {
    std::vector<double> list;
    for (const auto& [repeat, value] : kept) list.push_back(value);
    return list;
  }
};

NoisySamples noisy_samples(const std::string& metric, const ArmModelRecords& arm) {
  std::vector<std::uint32_t> repeats;
  std::vector<double> all;
  for (const auto& [repeat, record] : arm.by_repeat)
    if (record->compile.process.succeeded()) {
      repeats.push_back(repeat);
      all.push_back(noisy_sample(metric, *record));
    }
  NoisySamples samples;
  const std::vector<bool> outlier = mad_outliers(all);
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (outlier[i]) ++samples.outliers;
    else samples.kept[repeats[i]] = all[i];
  }
  return samples;
}

// The logs of positive samples; nothing when one is not positive (no ratio interval then).
std::vector<double> logs_of(const std::vector<double>& values) {
  std::vector<double> logs;
  for (double value : values) {
    if (!(value > 0)) return {};
    logs.push_back(std::log(value));
  }
  return logs;
}

// "" when an arm's exchange phases are the baseline's problems, one by one; else what differs first.
std::string plan_difference(const std::vector<PhaseRecord>& base, const std::vector<PhaseRecord>& arm,
                            const std::string& baseline) {
  const std::string counts =
      fmt::format("{} exchange phase{} vs {} of {}", arm.size(), arm.size() == 1 ? "" : "s", base.size(), baseline);
  if (base.size() != arm.size()) return counts;
  for (std::size_t i = 0; i < base.size(); ++i) {
    const PhaseRecord &a = arm[i], &b = base[i];
    if (a.phase != b.phase)
      return fmt::format("{}, and exchange phase {} of {} is in superstep {} vs {}", counts, i + 1, base.size(),
                         a.phase, b.phase);
    if (a.transfers != b.transfers || a.words != b.words || a.lower_bound != b.lower_bound)
      return fmt::format("{}, and phase {} differs ({} transfers, {} words, lower bound {} vs {}, {}, {})", counts,
                         a.phase, a.transfers, a.words, a.lower_bound, b.transfers, b.words, b.lower_bound);
    if (a.endpoint_lower_bound != b.endpoint_lower_bound || a.problem_hash != b.problem_hash)
      return fmt::format("{}, and phase {} differs (the same {} transfers and {} words between other tiles)", counts,
                         a.phase, a.transfers, a.words);
  }
  return "";
}

double ratio_of(double baseline, double value) {
  if (baseline == value) return 1.0;
  if (baseline > 0 && value > 0) return value / baseline;
  return kNaN;
}

// The smallest two-sided p an exact Mann-Whitney test can give with n samples on each side.
double smallest_p_value(std::uint32_t n) {
  double arrangements = 1;  // C(2n, n)
  for (std::uint32_t k = 1; k <= n; ++k) arrangements = arrangements * (n + k) / k;
  return 2.0 / arrangements;
}

class Analyser {
public:
  Analyser(const Manifest& manifest, const std::vector<Record>& records, double alpha) {
    result_.manifest = manifest;
    result_.alpha = alpha;
    const ArmInfo& baseline = manifest.baseline();
    for (const ArmInfo& arm : manifest.arms)
      if (arm.name != baseline.name && arm.twin_of.empty()) result_.compared_arms.push_back(arm.name);
    twin_ = twin_name(baseline.name);
    result_.load_average_low = std::numeric_limits<double>::infinity();
    result_.load_average_high = -std::numeric_limits<double>::infinity();
    index(records);
    if (records_.empty()) result_.load_average_low = result_.load_average_high = kNaN;
  }

  Analysis run() {
    const Manifest& m = result_.manifest;
    check_items();
    describe_packages();
    std::vector<std::string> arms = result_.compared_arms;
    for (const MetricDefinition& metric : ab_metrics()) {
      if (metric.determinism == Determinism::noisy) measure_noise_floor(metric);
      for (const std::string& arm : arms) compare(metric, arm, result_.comparisons);
      if (m.find_arm(twin_)) compare(metric, twin_, result_.twin_comparisons);
    }
    for (const std::string& arm : arms)
      for (const MetricDefinition& metric : ab_metrics()) summarise(metric, arm);
    build_phase_tables();
    for (const NoiseFloor& floor : result_.noise_floors)
      if (floor.pairs == 0 && !records_.empty())
        result_.warnings.push_back(
            fmt::format("{}: no A-vs-A pair of {} and {} to measure the noise floor with, so it "
                        "gets no better/worse verdict",
                        floor.metric, m.baseline().name, twin_));
    if (result_.hosts.size() > 1)
      result_.warnings.push_back(
          fmt::format("compile times were measured on {} machines; compare them only within one "
                      "machine (the deterministic metrics are unaffected)",
                      result_.hosts.size()));
    if (m.repeat > 0 && smallest_p_value(m.repeat) > result_.alpha)
      result_.warnings.push_back(fmt::format(
          "with --repeat {} the Mann-Whitney test cannot reach p <= {} (its smallest p is {:.3f}), so compile time and "
          "memory can only be 'noise'; use --repeat 4 or more for verdicts on them",
          m.repeat, result_.alpha, smallest_p_value(m.repeat)));
    return std::move(result_);
  }

private:
  void index(const std::vector<Record>& records) {
    const Manifest& m = result_.manifest;
    std::size_t ignored = 0;
    for (const Record& record : records) {
      if (!m.find_entry(record.model) || !m.find_arm(record.arm) || record.repeat >= m.repeat) continue;  // not planned
      if (!record_matches(record, m, record.model, record.arm, record.repeat)) {
        ++ignored;
        continue;
      }
      records_[{record.model, record.arm}].by_repeat[record.repeat] = &record;
      if (!record.host.empty()) result_.hosts.insert(record.host);
      result_.load_average_low = std::min(result_.load_average_low, record.load_average);
      result_.load_average_high = std::max(result_.load_average_high, record.load_average);
    }
    if (ignored)
      result_.warnings.push_back(
          fmt::format("ignored {} stored records made for another suite, arm or tessera build", ignored));
    for (auto& [key, arm] : records_)
      for (const auto& [repeat, record] : arm.by_repeat)
        if (record->compile.process.succeeded()) {
          arm.compiled = record;
          break;
        }
    // The run of repeat 0 stands for the package; an unchanged package borrows the baseline's.
    const std::string& baseline = m.baseline().name;
    for (auto& [key, arm] : records_) {
      auto zero = arm.by_repeat.find(0);
      if (zero != arm.by_repeat.end() && zero->second->run.performed && zero->second->run.device_cycles > 0)
        arm.ran = zero->second;
    }
    for (auto& [key, arm] : records_) {
      if (arm.ran || !arm.compiled || key.second == baseline) continue;
      const ArmModelRecords* base = find(key.first, baseline);
      if (base && base->ran && base->compiled &&
          base->compiled->compile.package_hash == arm.compiled->compile.package_hash)
        arm.ran = base->ran;
    }
  }

  const ArmModelRecords* find(const std::string& model, const std::string& arm) const {
    auto found = records_.find({model, arm});
    return found == records_.end() ? nullptr : &found->second;
  }

  void check_items() {
    const Manifest& m = result_.manifest;
    struct Failures {
      std::size_t failed = 0, present = 0;
      std::string first;  // what the first failure said
    };
    std::map<std::pair<std::string, std::string>, Failures> failures;  // per (model, arm), in plan order
    std::vector<std::pair<std::string, std::string>> order;
    for (const WorkItem& item : plan_work(m)) {
      ItemStatus status{m.entries[item.entry].id, m.arms[item.arm].name, item.repeat, "missing"};
      const ArmModelRecords* arm = find(status.model, status.arm);
      const auto record =
          arm ? arm->by_repeat.find(item.repeat) : std::map<std::uint32_t, const Record*>::const_iterator{};
      if (arm && record != arm->by_repeat.end()) {
        ++result_.items_present;
        const Record& r = *record->second;
        status.status = r.failed() ? "failed" : "ok";
        Failures& counts = failures[{status.model, status.arm}];
        if (counts.present++ == 0) order.push_back({status.model, status.arm});
        if (r.failed()) {
          ++result_.items_failed;
          if (counts.failed++ == 0) {
            const bool compiled = r.compile.process.succeeded();
            const ProcessRecord& p = compiled ? r.run.process : r.compile.process;
            std::string why = p.error.substr(0, p.error.find('\n'));  // the error line itself
            if (why.size() > 300) why = why.substr(0, 300) + "...";
            counts.first = fmt::format("{} failed (exit {}{}): {}", compiled ? "run" : "compile", p.exit_code,
                                       p.signal ? fmt::format(", signal {}", p.signal) : "", why);
          }
        }
      }
      result_.items.push_back(status);
    }
    for (const auto& key : order) {
      const Failures& counts = failures.at(key);
      if (counts.failed)
        result_.warnings.push_back(
            fmt::format("{} arm {}: {} of {} work items failed; the first {} (logs under logs/{}/{})", key.first,
                        key.second, counts.failed, counts.present, counts.first, key.first, key.second));
    }
    const std::size_t expected = result_.items.size();
    if (result_.items_present < expected)
      result_.warnings.push_back(fmt::format(
          "these results cover {} of {} work items{}; the missing ones are left out of every figure",
          result_.items_present, expected,
          m.shard_count > 1
              ? fmt::format(" (shard {}/{}: join the shards with `tessera ab merge`)", m.shard_index, m.shard_count)
              : ""));
  }

  void describe_packages() {
    const Manifest& m = result_.manifest;
    const std::string& baseline = m.baseline().name;
    for (const SuiteEntry& entry : m.entries)
      for (const ArmInfo& arm_info : m.arms) {
        ArmModel info;
        info.model = entry.id;
        info.arm = arm_info.name;
        const ArmModelRecords* arm = find(entry.id, arm_info.name);
        const ArmModelRecords* base = find(entry.id, baseline);
        if (arm) {
          std::set<std::string> hashes;
          for (const auto& [repeat, record] : arm->by_repeat) {
            if (record->compile.process.succeeded()) {
              ++info.compiles;
              hashes.insert(record->compile.package_hash);
            } else {
              ++info.failed;
            }
          }
          if (hashes.size() > 1)
            result_.warnings.push_back(
                fmt::format("{} arm {}: {} different packages from {} compiles of the same "
                            "pipeline: the compiler is not deterministic here",
                            entry.id, arm_info.name, hashes.size(), info.compiles));
          if (arm->compiled) info.package_hash = arm->compiled->compile.package_hash;
          if (arm->ran) {
            info.numerical_test = arm->ran->run.numerical_test;
            if (arm->ran->run.numerical_test == "FAIL" &&
                arm->ran == (arm->by_repeat.count(0) ? arm->by_repeat.at(0) : nullptr))
              result_.warnings.push_back(fmt::format("{} arm {}: the numerical test FAILED (max abs error {:.3g})",
                                                     entry.id, arm_info.name, arm->ran->run.max_abs_error));
          }
        }
        if (base && base->compiled && !info.package_hash.empty())
          info.same_package = base->compiled->compile.package_hash == info.package_hash;
        if (!arm_info.twin_of.empty() && !info.package_hash.empty() && base && base->compiled && !info.same_package)
          result_.warnings.push_back(
              fmt::format("{}: the baseline compiled twice gave different packages; its deterministic "
                          "metrics are not reproducible",
                          entry.id));
        result_.arm_models.push_back(info);
      }
  }

  void measure_noise_floor(const MetricDefinition& metric) {
    const Manifest& m = result_.manifest;
    NoiseFloor floor;
    floor.metric = metric.name;
    std::vector<double> logs;
    for (const SuiteEntry& entry : m.entries) {
      const ArmModelRecords* base = find(entry.id, m.baseline().name);
      const ArmModelRecords* twin = find(entry.id, twin_);
      if (!base || !twin) continue;
      const NoisySamples base_samples = noisy_samples(metric.name, *base),
                         twin_samples = noisy_samples(metric.name, *twin);
      for (const auto& [repeat, record] : twin->by_repeat) {
        auto other = base->by_repeat.find(repeat);
        if (other == base->by_repeat.end() || !record->compile.process.succeeded() ||
            !other->second->compile.process.succeeded())
          continue;
        if (!base_samples.kept.count(repeat) || !twin_samples.kept.count(repeat)) {
          ++floor.outliers;  // an outlying sample would set the floor by itself
          continue;
        }
        const double ratio = ratio_of(base_samples.kept.at(repeat), twin_samples.kept.at(repeat));
        if (std::isfinite(ratio) && ratio > 0) logs.push_back(std::log(ratio));
      }
    }
    floor.pairs = logs.size();
    floor.geomean_ratio = floor.max_abs_log_ratio = floor.log_sd = kNaN;
    if (!logs.empty()) {
      double sum = 0, largest = 0;
      for (double value : logs) sum += value, largest = std::max(largest, std::abs(value));
      const double mean = sum / static_cast<double>(logs.size());
      floor.geomean_ratio = std::exp(mean);
      floor.max_abs_log_ratio = largest;
      if (logs.size() > 1) {
        double squares = 0;
        for (double value : logs) squares += (value - mean) * (value - mean);
        floor.log_sd = std::sqrt(squares / static_cast<double>(logs.size() - 1));
      }
    }
    result_.noise_floors.push_back(floor);
  }

  double noise_floor_log(const std::string& metric) const {
    for (const NoiseFloor& floor : result_.noise_floors)
      if (floor.metric == metric) return floor.max_abs_log_ratio;
    return kNaN;
  }

  void compare(const MetricDefinition& metric, const std::string& arm_name, std::vector<Comparison>& out) {
    const Manifest& m = result_.manifest;
    std::vector<std::size_t> tested;  // comparisons of this (arm, metric) with a p-value
    for (const SuiteEntry& entry : m.entries) {
      Comparison c;
      c.model = entry.id;
      c.arm = arm_name;
      c.metric = metric.name;
      c.baseline = c.value = c.ratio = c.p_value = c.q_value = c.noise_floor_log = c.interval_low = c.interval_high =
          kNaN;
      const ArmModelRecords* base = find(entry.id, m.baseline().name);
      const ArmModelRecords* arm = find(entry.id, arm_name);
      c.same_package = base && arm && base->compiled && arm->compiled &&
                       base->compiled->compile.package_hash == arm->compiled->compile.package_hash;
      if (metric.determinism == Determinism::deterministic) {
        const auto baseline = base ? deterministic_value(metric.name, *base) : std::nullopt;
        const auto value = arm ? deterministic_value(metric.name, *arm) : std::nullopt;
        if (baseline && value) {
          c.baseline = *baseline;
          c.value = *value;
          c.ratio = ratio_of(c.baseline, c.value);
          c.verdict = classify_deterministic(c.baseline, c.value, metric.direction);
        }
      } else if (base && arm) {
        const NoisySamples baseline = noisy_samples(metric.name, *base), samples = noisy_samples(metric.name, *arm);
        c.baseline_samples = baseline.values();
        c.samples = samples.values();
        c.outliers = baseline.outliers + samples.outliers;
        if (!c.baseline_samples.empty() && !c.samples.empty()) {
          c.baseline = median(c.baseline_samples);
          c.value = median(c.samples);
          c.ratio = ratio_of(c.baseline, c.value);
          const MannWhitneyResult test = mann_whitney_u(c.samples, c.baseline_samples);
          c.p_value = test.p_value;
          c.exact = test.exact;
          const std::vector<double> logs = logs_of(c.samples), baseline_logs = logs_of(c.baseline_samples);
          if (!logs.empty() && !baseline_logs.empty()) {
            const ShiftInterval shift = shift_interval(logs, baseline_logs, 1 - result_.alpha);
            c.interval_low = std::exp(shift.low);
            c.interval_high = std::exp(shift.high);
          }
          tested.push_back(out.size());
        }
      }
      if (!metric.judged && c.verdict != Verdict::missing) c.verdict = Verdict::information;
      out.push_back(std::move(c));
    }
    // Benjamini-Hochberg across the models, per arm and metric.
    std::vector<double> p_values;
    for (std::size_t index : tested) p_values.push_back(out[index].p_value);
    const std::vector<double> q_values = benjamini_hochberg(p_values);
    // The twin is what measures the floor: it is held to the test alone.
    const double floor = arm_name == twin_ ? 0.0 : noise_floor_log(metric.name);
    for (std::size_t k = 0; k < tested.size(); ++k) {
      Comparison& c = out[tested[k]];
      c.q_value = q_values[k];
      c.noise_floor_log = floor;
      c.verdict = metric.judged ? classify_noisy(c.ratio, c.q_value, result_.alpha, floor, metric.direction)
                                : Verdict::information;
    }
  }

  void summarise(const MetricDefinition& metric, const std::string& arm) {
    ArmSummary summary;
    summary.arm = arm;
    summary.metric = metric.name;
    std::vector<double> ratios;
    for (const Comparison& c : result_.comparisons) {
      if (c.arm != arm || c.metric != metric.name) continue;
      switch (c.verdict) {
        case Verdict::better:
          ++summary.better;
          break;
        case Verdict::worse:
          ++summary.worse;
          break;
        case Verdict::same:
          ++summary.same;
          break;
        case Verdict::noise:
          ++summary.noise;
          break;
        case Verdict::information:
          ++summary.information;
          break;
        case Verdict::missing:
          ++summary.missing;
          break;
      }
      if (std::isfinite(c.ratio) && c.ratio > 0) ratios.push_back(c.ratio);
    }
    summary.interval = geomean_interval(ratios, 1 - result_.alpha);
    result_.summaries.push_back(summary);
  }

  // Only repeat 0 keeps the per-phase figures (runner.cpp); none when it did not compile.
  const std::vector<PhaseRecord>* phases_of(const std::string& model, const std::string& arm) const {
    const ArmModelRecords* records = find(model, arm);
    if (!records) return nullptr;
    const auto zero = records->by_repeat.find(0);
    if (zero == records->by_repeat.end() || !zero->second->compile.process.succeeded()) return nullptr;
    return &zero->second->compile.phases;
  }

  void build_phase_tables() {
    const std::string& baseline = result_.manifest.baseline().name;
    for (const SuiteEntry& entry : result_.manifest.entries) {
      PhaseTable table;
      table.model = entry.id;
      const std::vector<PhaseRecord>* base = phases_of(entry.id, baseline);
      std::vector<const std::vector<PhaseRecord>*> columns;  // per arm of the table
      if (base) {
        table.arms.push_back(baseline);
        columns.push_back(base);
        for (const PhaseRecord& phase : *base) table.phases.push_back(phase.phase);
      }
      for (const std::string& arm : result_.compared_arms) {
        const std::vector<PhaseRecord>* phases = phases_of(entry.id, arm);
        const std::string difference = base && phases ? plan_difference(*base, *phases, baseline) : "";
        if (base && phases && difference.empty()) {
          table.arms.push_back(arm);
          columns.push_back(phases);
          continue;
        }
        OmittedArm omitted{arm, phases ? std::optional<std::size_t>(phases->size()) : std::nullopt, ""};
        if (!phases)
          omitted.why = fmt::format("arm {} has no compiled repeat 0 of this model; per-phase comparison omitted", arm);
        else if (!base)
          omitted.why = fmt::format(
              "the baseline {} has no compiled repeat 0 of this model to compare arm {} with; "
              "per-phase comparison omitted",
              baseline, arm);
        else
          omitted.why = fmt::format("arm {} chose a different plan for this model: {}; per-phase comparison omitted",
                                    arm, difference);
        table.omitted.push_back(std::move(omitted));
      }
      for (std::size_t p = 0; p < table.phases.size(); ++p) {
        std::vector<PhaseRecord> row;
        for (const std::vector<PhaseRecord>* column : columns) row.push_back((*column)[p]);
        table.cells.push_back(std::move(row));
      }
      result_.phase_tables.push_back(std::move(table));
    }
  }

  Analysis result_;
  std::string twin_;
  std::map<std::pair<std::string, std::string>, ArmModelRecords> records_;
};

}  // namespace

const std::vector<MetricDefinition>& ab_metrics() {
  using D = Determinism;
  static const std::vector<MetricDefinition> metrics = {
      {"device_cycles", "cycles", D::deterministic, Direction::smaller_is_better,
       "cycles of one run on the simulator (compute, exchange and barriers)"},
      {"simulated_exchange_cycles", "cycles", D::deterministic, Direction::smaller_is_better,
       "the exchange part of device_cycles (schedule horizons plus phase overheads)"},
      {"estimated_cycles", "cycles", D::deterministic, Direction::smaller_is_better,
       "the cost model's estimate of the compiled program (information: an estimate is not a measurement)", false},
      {"scheduled_exchange_cycles", "cycles", D::deterministic, Direction::smaller_is_better,
       "sum over exchange phases of the schedule's horizon"},
      {"exchange_lower_bound", "cycles", D::deterministic, Direction::smaller_is_better,
       "sum over exchange phases of the strongest lower bound on the horizon"},
      {"exchange_bound_ratio", "x", D::deterministic, Direction::smaller_is_better,
       "scheduled_exchange_cycles / exchange_lower_bound: 1 means every schedule reaches its bound"},
      {"peak_tile_bytes", "bytes", D::deterministic, Direction::smaller_is_better,
       "the largest memory use of one tile"},
      {"compile_cpu_ms", "ms", D::noisy, Direction::smaller_is_better,
       "user + system CPU time of the `tessera compile` process (wait4): what compile-time verdicts use"},
      {"compile_wall_ms", "ms", D::noisy, Direction::smaller_is_better,
       "wall time of the `tessera compile` process (information: a busy machine stretches it)", false},
      {"compile_peak_rss_kib", "KiB", D::noisy, Direction::smaller_is_better,
       "peak resident memory of the `tessera compile` process (wait4)"},
  };
  return metrics;
}

const MetricDefinition* find_metric(const std::string& name) {
  for (const MetricDefinition& metric : ab_metrics())
    if (metric.name == name) return &metric;
  return nullptr;
}

const char* determinism_name(Determinism d) { return d == Determinism::deterministic ? "deterministic" : "noisy"; }
const char* direction_name(Direction d) { return d == Direction::smaller_is_better ? "smaller" : "larger"; }

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::better:
      return "better";
    case Verdict::worse:
      return "worse";
    case Verdict::same:
      return "same";
    case Verdict::noise:
      return "noise";
    case Verdict::information:
      return "information";
    case Verdict::missing:
      return "missing";
  }
  return "?";
}

Verdict classify_deterministic(double baseline, double value, Direction direction) {
  if (!std::isfinite(baseline) || !std::isfinite(value)) return Verdict::missing;
  if (baseline == value) return Verdict::same;
  const bool smaller = value < baseline;
  return smaller == (direction == Direction::smaller_is_better) ? Verdict::better : Verdict::worse;
}

Verdict classify_noisy(double ratio, double q_value, double alpha, double noise_floor_log, Direction direction) {
  if (!std::isfinite(ratio) || !(ratio > 0)) return Verdict::missing;
  if (!(q_value <= alpha)) return Verdict::noise;
  if (!std::isfinite(noise_floor_log) || std::abs(std::log(ratio)) <= noise_floor_log) return Verdict::noise;
  if (ratio == 1) return Verdict::noise;
  const bool smaller = ratio < 1;
  return smaller == (direction == Direction::smaller_is_better) ? Verdict::better : Verdict::worse;
}

std::string verdict_text(const Comparison& c, double alpha) {
  const MetricDefinition* metric = find_metric(c.metric);
  if (c.verdict != Verdict::noise || !metric || metric->determinism != Determinism::noisy)
    return verdict_name(c.verdict);
  if (!std::isfinite(c.noise_floor_log)) return "no verdict: no A-vs-A noise floor measured";
  const bool inside = std::isfinite(c.ratio) && c.ratio > 0 && std::abs(std::log(c.ratio)) <= c.noise_floor_log;
  if (inside) return fmt::format("within noise (floor {:.1f}%)", 100 * (std::exp(c.noise_floor_log) - 1));
  return fmt::format("not significant (q {:.2g})", c.q_value);
}

Analysis analyse(const Manifest& manifest, const std::vector<Record>& records, double alpha) {
  return Analyser(manifest, records, alpha).run();
}

}  // namespace tessera::ab
