// The A/B history: every sweep's per-(arm, model, metric) values in a SQLite database, across builds.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "analysis.hpp"

struct sqlite3;

namespace tessera::ab {

/// $XDG_DATA_HOME/tessera/ab-history.sqlite, else ~/.local/share/tessera/ab-history.sqlite.
std::string default_history_path();

/// One value of a metric as a sweep recorded it.
struct HistoryPoint {
  std::string model, metric;
  std::string recorded_at;  ///< UTC, ISO 8601, when the sweep was reported
  std::string build_hash, version;
  std::string arm, arm_fingerprint;
  std::string host;         ///< the machines its timings came from, ", "-joined
  double value = 0;         ///< deterministic: the package's figure; noisy: the median over repeats
  std::size_t samples = 0;  ///< noisy: repeats behind the median (1 for deterministic metrics)
};

/// A history database, created (with its folder) readable by its owner only when missing.
class History {
public:
  /// Opens or creates `path`; `purpose` names the option that chose it, for errors.
  explicit History(const std::string& path);
  ~History();
  History(const History&) = delete;
  History& operator=(const History&) = delete;

  /// Stores every (arm, model, metric) value of `analysis` (the twin left out), keyed by build,
  /// arm fingerprint, model and metric: a later sweep of the same build and arm replaces its
  /// values. Returns the number of values written.
  std::size_t record(const Analysis& analysis, const std::string& results);

  /// Every stored value of `metric` for `model` (only of `arm` when given), oldest first.
  std::vector<HistoryPoint> points(const std::string& metric, const std::string& model,
                                   const std::optional<std::string>& arm) const;
  /// Every stored value of a judged metric for a model of `analysis`, of its baseline and
  /// compared arms (by name), each (model, metric) oldest first: what the HTML report's
  /// history charts draw.
  std::vector<HistoryPoint> report_points(const Analysis& analysis) const;
  /// The model ids the database holds values for, sorted.
  std::vector<std::string> models() const;

  const std::string& path() const { return path_; }

private:
  void execute(const std::string& sql) const;
  std::string path_;
  sqlite3* db_ = nullptr;
};

/// The table `tessera ab history` prints: one row per stored value, oldest first, with the
/// change from the arm's previous build.
std::string history_table(const std::vector<HistoryPoint>& points, const std::string& metric, const std::string& model);

}  // namespace tessera::ab
