// The A/B history database (Debian's libsqlite3): one row per (build, arm fingerprint, model, metric).
#include "history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <sqlite3.h>

#include "report.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

namespace {

constexpr const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS sweeps(
  id INTEGER PRIMARY KEY,
  recorded_at TEXT NOT NULL,
  suite TEXT NOT NULL,
  build_hash TEXT NOT NULL,
  version TEXT NOT NULL,
  hosts TEXT NOT NULL,
  repeat INTEGER NOT NULL,
  results TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results(
  build_hash TEXT NOT NULL,
  arm_fingerprint TEXT NOT NULL,
  model TEXT NOT NULL,
  metric TEXT NOT NULL,
  arm TEXT NOT NULL,
  value REAL NOT NULL,
  samples INTEGER NOT NULL,
  sweep INTEGER NOT NULL REFERENCES sweeps(id),
  PRIMARY KEY(build_hash, arm_fingerprint, model, metric));
CREATE INDEX IF NOT EXISTS results_by_model_metric ON results(model, metric);
)SQL";

// A prepared statement finalised when it goes out of scope.
class Statement {
public:
  Statement(sqlite3* db, const std::string& sql, const std::string& path) : path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement_, nullptr) != SQLITE_OK)
      throw Error(path + ": the history database cannot be read: " + sqlite3_errmsg(db) +
                  "; give another --history FILE, or move this one away");
  }
  ~Statement() { sqlite3_finalize(statement_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  void bind(int index, const std::string& text) {
    sqlite3_bind_text(statement_, index, text.c_str(), -1, SQLITE_TRANSIENT);
  }
  void bind(int index, double value) { sqlite3_bind_double(statement_, index, value); }
  void bind(int index, std::int64_t value) { sqlite3_bind_int64(statement_, index, value); }
  /// True while there is a row; throws on an error.
  bool step() {
    const int code = sqlite3_step(statement_);
    if (code == SQLITE_ROW) return true;
    if (code == SQLITE_DONE) return false;
    throw Error(path_ + ": writing the history database failed: " + sqlite3_errmsg(sqlite3_db_handle(statement_)));
  }
  void reset() {
    sqlite3_reset(statement_);
    sqlite3_clear_bindings(statement_);
  }
  std::string text(int column) const {
    const unsigned char* value = sqlite3_column_text(statement_, column);
    return value ? reinterpret_cast<const char*>(value) : "";
  }
  double number(int column) const { return sqlite3_column_double(statement_, column); }
  std::int64_t integer(int column) const { return sqlite3_column_int64(statement_, column); }

private:
  sqlite3_stmt* statement_ = nullptr;
  std::string path_;
};

std::string utc_now() { return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr))); }

// The folder and the file are the user's own: other users see neither their models nor their timings.
// A database another user made, or can write, would feed them our results and us theirs.
void create_private(const fs::path& path) {
  if (fs::is_directory(path))
    throw Error(path.string() + ": is a folder, not a history database; give a file, e.g. --history " +
                (path / "ab-history.sqlite").string());
  const OwnedFolder folder(path.parent_path().string(), "the folder of the history database", 0700);
  const int fd =
      ::openat(folder.descriptor(), path.filename().c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    throw Error(path.string() + ": cannot open the history database: " + std::strerror(errno) +
                "; give another --history FILE");
  struct stat info {};
  const int stat_result = ::fstat(fd, &info);
  ::close(fd);
  if (stat_result != 0 || !S_ISREG(info.st_mode))
    throw Error(path.string() + ": the history database is not a regular file; give another --history FILE");
  if (info.st_uid != ::geteuid())
    throw Error(path.string() + ": refusing the history database: it is owned by " + describe_user(info.st_uid) +
                ", not by you (" + describe_user(::geteuid()) +
                "), who could read and change your results; give another --history FILE");
  if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    throw Error(path.string() + fmt::format(": refusing the history database: it is writable by others (mode {:04o}); "
                                            "fix: chmod 600 {}",
                                            info.st_mode & 07777, path.string()));
}

}  // namespace

std::string default_history_path() {
  const char* data = std::getenv("XDG_DATA_HOME");
  const char* home = std::getenv("HOME");
  const fs::path root = data && *data   ? fs::path(data) / "tessera"
                        : home && *home ? fs::path(home) / ".local/share/tessera"
                                        : fs::temp_directory_path() / "tessera";
  return (root / "ab-history.sqlite").string();
}

History::History(const std::string& path) : path_(fs::absolute(path).lexically_normal().string()) {
  create_private(path_);
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw Error(path_ + ": cannot open the history database: " + why + "; give another --history FILE");
  }
  sqlite3_busy_timeout(db_, 30000);  // shards and the Slurm report job may write at the same time
  try {
    execute(kSchema);
  } catch (...) {
    sqlite3_close(db_);
    throw;
  }
}

History::~History() { sqlite3_close(db_); }

void History::execute(const std::string& sql) const {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
    const std::string why = message ? message : sqlite3_errmsg(db_);
    sqlite3_free(message);
    throw Error(path_ + ": not a usable history database (" + why +
                "); give another --history FILE, or move this one away");
  }
}

std::size_t History::record(const Analysis& analysis, const std::string& results) {
  const Manifest& m = analysis.manifest;
  std::string hosts;
  for (const std::string& host : analysis.hosts) hosts += (hosts.empty() ? "" : ", ") + host;
  // One value per (arm, model, metric): an arm's own, and the baseline's from its comparisons.
  struct Value {
    double value;
    std::size_t samples;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Value> values;
  for (const Comparison& c : analysis.comparisons) {
    const MetricDefinition* metric = find_metric(c.metric);
    const bool noisy = metric && metric->determinism == Determinism::noisy;
    if (std::isfinite(c.value)) values[{c.arm, c.model, c.metric}] = {c.value, noisy ? c.samples.size() : 1};
    if (std::isfinite(c.baseline))
      values[{m.baseline().name, c.model, c.metric}] = {c.baseline, noisy ? c.baseline_samples.size() : 1};
  }
  execute("BEGIN IMMEDIATE");
  try {
    Statement sweep(db_,
                    "INSERT INTO sweeps(recorded_at, suite, build_hash, version, hosts, repeat, results) "
                    "VALUES(?, ?, ?, ?, ?, ?, ?)",
                    path_);
    sweep.bind(1, utc_now());
    sweep.bind(2, m.suite_name);
    sweep.bind(3, m.build.build_hash);
    sweep.bind(4, m.build.version);
    sweep.bind(5, hosts);
    sweep.bind(6, static_cast<std::int64_t>(m.repeat));
    sweep.bind(7, results);
    sweep.step();
    const std::int64_t sweep_id = sqlite3_last_insert_rowid(db_);
    Statement insert(db_,
                     "INSERT OR REPLACE INTO results(build_hash, arm_fingerprint, model, metric, arm, value, samples, "
                     "sweep) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                     path_);
    for (const auto& [key, value] : values) {
      const auto& [arm, model, metric] = key;
      const ArmInfo* info = m.find_arm(arm);
      if (!info) continue;
      insert.bind(1, m.build.build_hash);
      insert.bind(2, info->fingerprint);
      insert.bind(3, model);
      insert.bind(4, metric);
      insert.bind(5, arm);
      insert.bind(6, value.value);
      insert.bind(7, static_cast<std::int64_t>(value.samples));
      insert.bind(8, sweep_id);
      insert.step();
      insert.reset();
    }
    execute("COMMIT");
  } catch (...) {
    char* ignored = nullptr;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, &ignored);  // nothing half-written
    sqlite3_free(ignored);
    throw;
  }
  return values.size();
}

std::vector<HistoryPoint> History::points(const std::string& metric, const std::string& model,
                                          const std::optional<std::string>& arm) const {
  Statement query(
      db_,
      "SELECT s.recorded_at, r.build_hash, s.version, r.arm, r.arm_fingerprint, s.hosts, r.value, r.samples "
      "FROM results r JOIN sweeps s ON s.id = r.sweep WHERE r.metric = ? AND r.model = ? "
      "AND (? = '' OR r.arm = ?) ORDER BY s.id, r.arm",
      path_);
  query.bind(1, metric);
  query.bind(2, model);
  query.bind(3, arm.value_or(""));
  query.bind(4, arm.value_or(""));
  std::vector<HistoryPoint> points;
  while (query.step())
    points.push_back({model, metric, query.text(0), query.text(1), query.text(2), query.text(3), query.text(4),
                      query.text(5), query.number(6), static_cast<std::size_t>(query.integer(7))});
  return points;
}

std::vector<HistoryPoint> History::report_points(const Analysis& analysis) const {
  std::set<std::string> arms(analysis.compared_arms.begin(), analysis.compared_arms.end());
  arms.insert(analysis.manifest.baseline().name);
  std::vector<HistoryPoint> points;
  for (const SuiteEntry& entry : analysis.manifest.entries)
    for (const MetricDefinition& metric : ab_metrics())
      if (metric.judged)
        for (HistoryPoint& point : this->points(metric.name, entry.id, std::nullopt))
          if (arms.count(point.arm)) points.push_back(std::move(point));
  return points;
}

std::vector<std::string> History::models() const {
  Statement query(db_, "SELECT DISTINCT model FROM results ORDER BY model", path_);
  std::vector<std::string> models;
  while (query.step()) models.push_back(query.text(0));
  return models;
}

std::string history_table(const std::vector<HistoryPoint>& points, const std::string& metric,
                          const std::string& model) {
  std::string text = fmt::format("history of {} for model {}, oldest first; change is against the arm's previous row\n",
                                 metric, model);
  std::vector<std::vector<std::string>> rows = {
      {"recorded (UTC)", "build", "version", "arm", "arm fingerprint", "hosts", "samples", metric, "change"}};
  std::map<std::string, double> previous;  // per arm
  for (const HistoryPoint& p : points) {
    const auto before = previous.find(p.arm);
    const std::string change =
        before == previous.end() ? "first" : format_change(before->second > 0 ? p.value / before->second : NAN);
    rows.push_back({p.recorded_at, p.build_hash, p.version, p.arm, p.arm_fingerprint, p.host, std::to_string(p.samples),
                    format_metric_value(metric, p.value), change});
    previous[p.arm] = p.value;
  }
  text += text_table(rows, 6);
  return text;
}

}  // namespace tessera::ab
