// The A/B analysis: metrics, per-model ratios against the baseline arm, significance, noise floor.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "results.hpp"
#include "stats.hpp"

namespace tessera::ab {

enum class Determinism { deterministic, noisy };
enum class Direction { smaller_is_better, larger_is_better };

struct MetricDefinition {
  std::string name;
  std::string unit;
  Determinism determinism = Determinism::deterministic;
  Direction direction = Direction::smaller_is_better;
  std::string description;
  /// False for figures shown as information only: estimates (a cost model's guess, not a
  /// measurement) and wall time (stretched by a busy machine; CPU time gets the verdicts).
  bool judged = true;
};

/// Every metric `tessera ab` reports, in report order.
const std::vector<MetricDefinition>& ab_metrics();
const MetricDefinition* find_metric(const std::string& name);
const char* determinism_name(Determinism);
const char* direction_name(Direction);

/// `information`: a metric shown but never judged (an estimate, or wall time).
enum class Verdict { better, worse, same, noise, information, missing };
const char* verdict_name(Verdict);

/// A deterministic metric changed or not: any difference is real.
Verdict classify_deterministic(double baseline, double value, Direction direction);
/// A noisy metric is better or worse only when the FDR-corrected test says so (q <= alpha)
/// and the change is larger than the A-vs-A noise floor (a log ratio). A floor that was not
/// measured (NaN) supports no verdict: the result is noise.
Verdict classify_noisy(double ratio, double q_value, double alpha, double noise_floor_log, Direction direction);

/// One metric of one model, one arm against the baseline.
struct Comparison {
  std::string model, arm, metric;
  double baseline = 0, value = 0;  ///< deterministic: the values; noisy: the medians of the samples
  double ratio = 0;                ///< value / baseline (NaN when undefined)
  /// Noisy: a (1 - alpha) interval of the ratio, shift_interval on the log samples (NaN when
  /// there are too few samples to reach it, and for deterministic metrics: they have no spread).
  double interval_low = 0, interval_high = 0;
  std::vector<double> baseline_samples, samples;  ///< noisy metrics: one per repeat
  double p_value = 0, q_value = 0;  ///< noisy: Mann-Whitney U, then Benjamini-Hochberg across models (NaN otherwise)
  bool exact = false;
  std::size_t outliers = 0;    ///< noisy: samples of both arms left out as outliers (mad_outliers)
  double noise_floor_log = 0;  ///< noisy: the A-vs-A floor the verdict was held to (NaN: none measured)
  Verdict verdict = Verdict::missing;
  bool same_package = false;  ///< the arm's package is byte-identical to the baseline's
};

/// One metric over all models, one arm against the baseline.
struct ArmSummary {
  std::string arm, metric;
  GeomeanInterval interval;  ///< of the per-model ratios
  std::size_t better = 0, worse = 0, same = 0, noise = 0, information = 0, missing = 0;
};

/// The spread of the baseline against itself (its twin), per noisy metric.
struct NoiseFloor {
  std::string metric;
  std::size_t pairs = 0;         ///< (model, repeat) pairs with both compiles, outliers left out
  std::size_t outliers = 0;      ///< pairs left out because a sample was an outlier of its (model, arm)
  double geomean_ratio = 0;      ///< twin / baseline over the pairs (NaN when none)
  double max_abs_log_ratio = 0;  ///< the floor: the largest |log(twin / baseline)| seen
  double log_sd = 0;             ///< sample standard deviation of the log ratios
};

/// One model's package per arm.
struct ArmModel {
  std::string model, arm;
  std::string package_hash;   ///< of the first successful compile ("" if none)
  bool same_package = false;  ///< equal to the baseline's
  std::string numerical_test;
  std::size_t compiles = 0, failed = 0;
};

/// An arm left out of a model's per-phase comparison, and why in words.
struct OmittedArm {
  std::string arm;
  std::optional<std::size_t> phases;  ///< its exchange phases (none: no compiled repeat 0 to read them from)
  std::string why;
};

/// Per-phase horizon against bound of one model (the HTML drill-down), for the baseline and
/// the arms that share its plan: the same exchange phases, each with the same problem hash
/// (PhaseRecord::problem_hash), so phase N is one problem for all of them.
struct PhaseTable {
  std::string model;
  std::vector<std::string> arms;                ///< the baseline first; empty when it has no compiled repeat 0
  std::vector<std::uint32_t> phases;            ///< the baseline's exchange phases (supersteps)
  std::vector<std::vector<PhaseRecord>> cells;  ///< [phase][arm]
  std::vector<OmittedArm> omitted;              ///< compared arms with another plan or none
};

struct ItemStatus {
  std::string model, arm;
  std::uint32_t repeat = 0;
  std::string status;  ///< "ok", "failed" or "missing"
};

struct Analysis {
  Manifest manifest;
  double alpha = 0.05;
  std::vector<std::string> compared_arms;  ///< every arm but the baseline and its twin
  std::vector<Comparison> comparisons;     ///< compared arms against the baseline
  std::vector<Comparison> twin_comparisons;
  std::vector<ArmSummary> summaries;
  std::vector<NoiseFloor> noise_floors;
  std::vector<ArmModel> arm_models;
  std::vector<PhaseTable> phase_tables;
  std::vector<ItemStatus> items;
  std::size_t items_present = 0, items_failed = 0;
  std::set<std::string> hosts;                         ///< machines the records were measured on
  double load_average_low = 0, load_average_high = 0;  ///< 1-minute load averages at item starts (NaN: no records)
  std::vector<std::string> warnings;
};

/// What a comparison's verdict means in words: "better", "within noise (floor 12.3%)",
/// "not significant (q 0.21)", "no verdict: no A-vs-A noise floor measured", "information".
std::string verdict_text(const Comparison& comparison, double alpha);

/// Analyses the records made under `manifest` (others are ignored with a warning). `alpha`
/// is the false-discovery rate for noisy verdicts and 1 - the confidence of intervals.
Analysis analyse(const Manifest& manifest, const std::vector<Record>& records, double alpha);

}  // namespace tessera::ab
