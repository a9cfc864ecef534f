// `tessera ab`: compile and run every suite model with every arm, resumably, then report;
// `tessera ab merge`: join the results directories of shards into one report.
#include "ab_command.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "analysis.hpp"
#include "arms.hpp"
#include "executor_local.hpp"
#include "executor_slurm.hpp"
#include "fingerprint.hpp"
#include "history.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "results.hpp"
#include "runner.hpp"
#include "suite.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

using namespace tessera::ab;

struct ReportFiles {
  std::string json, csv, markdown, html;
};

class AbCommand {
public:
  CLI::App* ab = nullptr;
  CLI::App* merge = nullptr;
  CLI::App* status = nullptr;
  CLI::App* resume = nullptr;
  CLI::App* task = nullptr;
  CLI::App* report = nullptr;
  CLI::App* history = nullptr;
  std::string base, suite, results, shard = "1/1", lock;
  std::string executor = "local";
  unsigned jobs = 1;
  SlurmOptions slurm;
  std::string directory;  ///< of status, resume, task and report
  std::uint32_t submission = 0, task_index = 0;
  std::vector<std::string> arms;
  std::uint32_t repeat = 3;
  std::uint32_t warmup = 0;
  std::uint32_t threads = 0;
  double alpha = 0.05;
  bool retry_failed = false;
  bool quiet = false;
  ReportFiles files;
  std::vector<std::string> merge_directories;
  std::string history_file;              ///< --history; "" = default_history_path()
  std::string history_metric, history_model, history_arm;  ///< of `tessera ab history`
};

namespace {

void add_history_option(CLI::App& command, AbCommand& options) {
  command.add_option("--history", options.history_file,
                     "SQLite history database every sweep's values are added to (default: " + default_history_path() + ")");
}

// Opened before any work, so a bad --history fails at once and not after the sweep.
History open_history(const AbCommand& o) { return History(o.history_file.empty() ? default_history_path() : o.history_file); }

void add_report_options(CLI::App& command, AbCommand& options) {
  command.add_option("--json", options.files.json, "write the report as JSON here");
  command.add_option("--csv", options.files.csv, "write one CSV row per (arm, model, metric) here");
  command.add_option("--markdown", options.files.markdown, "write the report as Markdown here");
  command.add_option("--html", options.files.html, "write a standalone HTML report (tables, charts, phases) here");
  command.add_option("--alpha", options.alpha, "false-discovery rate for noisy metrics; intervals are 1 - alpha")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  command.add_flag("--quiet", options.quiet, "do not print the tables on stdout");
  add_history_option(command, options);
}

void add_executor_options(CLI::App& command, AbCommand& o) {
  command.add_option("--executor", o.executor, "local: this machine (--jobs N); slurm: a job array and a report job")
      ->capture_default_str();
  command.add_option("--jobs", o.jobs, "local: work items in parallel (a model's items stay in order on one worker)")
      ->capture_default_str();
  command.add_option("--tasks", o.slurm.tasks, "slurm: array tasks, each a group of whole models (default: one per model)");
  command.add_option("--partition", o.slurm.partition, "slurm: sbatch --partition");
  command.add_option("--time", o.slurm.time, "slurm: sbatch --time limit of each task, e.g. 2:00:00");
  command.add_option("--mem", o.slurm.mem, "slurm: sbatch --mem of each task, e.g. 4G");
  command.add_option("--account", o.slurm.account, "slurm: sbatch --account");
  command.add_flag("--hold", o.slurm.hold, "slurm: submit the array held (start it with `scontrol release JOB`)");
}

std::pair<std::uint32_t, std::uint32_t> parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      const unsigned long index = std::stoul(text.substr(0, slash)), count = std::stoul(text.substr(slash + 1));
      if (count >= 1 && index >= 1 && index <= count) return {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(count)};
    }
  } catch (const std::exception&) {
  }
  throw Error("--shard " + text + ": write i/N with 1 <= i <= N, e.g. --shard 2/4 for the second of four shards");
}

std::int64_t self_peak_rss_kib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void write_text(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  write_file_atomically(path, text, "A/B report");
}

void check_report_files(const ReportFiles& files, const std::vector<InputFile>& inputs) {
  check_output_file(files.json, "the report (--json)", inputs);
  check_output_file(files.csv, "the report (--csv)", inputs);
  check_output_file(files.markdown, "the report (--markdown)", inputs);
  check_output_file(files.html, "the report (--html)", inputs);
}

void write_reports(const Analysis& analysis, const DriverStats& driver, const std::vector<HistoryPoint>& history,
                   const ReportFiles& files) {
  write_text(files.json, json_report(analysis, driver));
  write_text(files.csv, csv_report(analysis));
  write_text(files.markdown, markdown_report(analysis));
  write_text(files.html, html_report(analysis, driver, history));
}

// Reports, prints the table, and turns failed items into the exit code.
int finish(const Analysis& analysis, DriverStats driver, const ReportFiles& extra, const ReportFiles& beside_results,
           bool quiet, const std::chrono::steady_clock::time_point start, History& history) {
  driver.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  driver.self_peak_rss_kib = self_peak_rss_kib();
  const std::size_t recorded = history.record(analysis, driver.results);  // first, so the HTML's history includes this sweep
  logger("tessera.ab")->info("history recorded values={} build={} database={}", recorded, analysis.manifest.build.build_hash,
                             history.path());
  const std::vector<HistoryPoint> points = history.report_points(analysis);
  write_reports(analysis, driver, points, beside_results);
  write_reports(analysis, driver, points, extra);
  if (!quiet) fmt::print("{}", terminal_report(analysis, driver.results));
  logger("tessera.ab")
      ->info("ab finished wall_ms={:.0f} child_wall_ms={:.0f} self_peak_rss_kib={} executed={} skipped={} runs={} "
             "items_present={} items_expected={} items_failed={}",
             driver.wall_ms, driver.child_wall_ms, driver.self_peak_rss_kib, driver.executed, driver.skipped, driver.runs,
             analysis.items_present, analysis.items.size(), analysis.items_failed);
  if (analysis.items_failed > 0) {
    fmt::print(stderr, "error: {} of {} work items failed (see the warnings and the logs under {})\n", analysis.items_failed,
               analysis.items.size(), driver.results);
    return 1;
  }
  return 0;
}

// Outside the source tree, where a checkout's `git status` and grep do not see it.
std::string default_results_directory(const Manifest& manifest) {
  std::string identity = manifest.suite_fingerprint + manifest.build.build_hash;
  for (const ArmInfo& arm : manifest.arms) identity += arm.name + arm.fingerprint;
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const fs::path root = cache && *cache ? fs::path(cache) / "tessera"
                        : home && *home ? fs::path(home) / ".cache/tessera"
                                        : fs::temp_directory_path() / "tessera";
  return (root / "ab-results" / (manifest.suite_name + "-" + hash_text(identity).substr(0, 8))).string();
}

// Each target of the suite once, by name.
std::vector<Target> suite_targets(const Suite& suite) {
  std::map<std::string, Target> targets;
  for (const SuiteEntry& entry : suite.entries) {
    Target target = load_target(entry.target);
    targets.emplace(target.name, std::move(target));
  }
  std::vector<Target> list;
  for (auto& [name, target] : targets) list.push_back(std::move(target));
  return list;
}

// A task or a resume must not mix records of changed inputs under the manifest's fingerprints.
void check_inputs_unchanged(const ResultsDir& results, const Manifest& manifest) {
  const std::vector<std::string> changed = changed_inputs(manifest);
  if (!changed.empty())
    throw Error(changed.front() + ": changed since " + results.root() + " was prepared" +
                (changed.size() > 1 ? fmt::format(" ({} more files changed)", changed.size() - 1) : "") +
                "; run the same `tessera ab` command again: it takes the change in and redoes the items it touches");
}

void check_executor(const AbCommand& o) {
  if (o.executor != "local" && o.executor != "slurm")
    throw Error("--executor " + o.executor + ": choose local (this machine, --jobs N) or slurm (a job array)");
  if (o.jobs < 1) throw Error("--jobs must be at least 1");
}

// Results of another tessera binary must not land under this manifest's build identity.
void check_same_build(const ResultsDir& results, const Manifest& manifest) {
  const BuildIdentity build = current_build();
  if (!(build == manifest.build))
    throw Error(results.root() + ": prepared by tessera build " + manifest.build.build_hash + ", but this is build " +
                build.build_hash + " (" + self_executable() + "); run the tessera binary that prepared it, or start a "
                "new results directory");
}

RunnerOptions runner_options(const ResultsDir& results, const std::string& lock, bool retry_failed) {
  RunnerOptions runner;
  runner.tessera = self_executable();
  runner.lock_path = lock.empty() ? results.absolute("device.lock") : lock;
  runner.retry_failed = retry_failed;
  return runner;
}

RunnerStats run_locally(const AbCommand& o, const Manifest& manifest, const ResultsDir& results,
                        const std::vector<WorkItem>& items, bool retry_failed) {
  Progress progress(items.size(), stderr, Progress::mode_for_stderr());
  progress.attach_to_logs();
  RunnerOptions options = runner_options(results, o.lock, retry_failed);
  options.progress = &progress;
  return run_local(manifest, results, items, options, o.jobs, !o.lock.empty());
}

DriverStats driver_stats(const std::string& command, const ResultsDir& results, const RunnerStats& stats) {
  DriverStats driver;
  driver.command = command;
  driver.results = results.root();
  driver.child_wall_ms = stats.child_wall_ms;
  driver.executed = stats.executed;
  driver.skipped = stats.skipped;
  driver.stale = stats.stale;
  driver.failed = stats.failed;
  driver.runs = stats.runs;
  driver.warmups = stats.warmups;
  return driver;
}

ReportFiles beside_results(const ResultsDir& results) {
  return {results.absolute("report.json"), results.absolute("report.csv"), results.absolute("report.md"),
          results.absolute("report.html")};
}

void print_submission(const Submission& s, const ResultsDir& results) {
  fmt::print("submitted to Slurm: array job {} ({} tasks), report job {} (afterany: it reports what finished)\n"
             "results: {}\nfollow it: tessera ab status {}\n",
             s.array_job, s.tasks.size(), s.report_job, results.root(), results.root());
}

std::vector<std::string> model_ids(const Manifest& manifest) {
  std::vector<std::string> ids;
  for (const SuiteEntry& entry : manifest.entries) ids.push_back(entry.id);
  return ids;
}

// A scratch folder for validating merged pipelines before the results directory is known.
struct StagingDirectory {
  std::string path;
  bool keep = false;  ///< set when an error message names a file in it
  StagingDirectory() {
    std::string pattern = (fs::temp_directory_path() / "tessera-ab-arms-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
    path = pattern;
  }
  ~StagingDirectory() {
    std::error_code ec;
    if (!keep) fs::remove_all(path, ec);
  }
};

int run_ab(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.base.empty()) throw Error("tessera ab: no base pipeline given (--base configs/pipelines/default.yaml)");
  if (o.suite.empty()) throw Error("tessera ab: no suite given (--suite configs/suites/default.yaml)");
  if (o.arms.empty()) throw Error("tessera ab: no arms given; the first is the baseline: --arm A= --arm B=overlay.yaml");
  if (o.repeat < 1) throw Error("tessera ab: --repeat must be at least 1");
  const auto [shard_index, shard_count] = parse_shard(o.shard);
  check_executor(o);
  if (o.executor == "slurm" && shard_count > 1)
    throw Error("--shard with --executor slurm: the job array is the sharding; drop --shard (or use --tasks N)");
  if (o.arms.size() == 1)
    throw Error("tessera ab: one arm only (--arm " + o.arms.front() + "); an A/B test compares arms with a baseline, "
                "the first --arm: add the base itself first, e.g. --arm base= --arm " + o.arms.front());
  auto log = logger("tessera.ab");

  const Suite suite = load_suite(o.suite);
  std::vector<ArmRequest> requests;
  for (const std::string& text : o.arms) requests.push_back(parse_arm_argument(text));
  std::vector<InputFile> inputs{{o.base, "the base pipeline"}, {o.suite, "the suite"}};
  for (const ArmRequest& request : requests) inputs.push_back({request.overlay, "the overlay of arm " + request.name});
  check_report_files(o.files, inputs);
  History history = open_history(o);
  StagingDirectory staging;
  std::vector<PreparedArm> prepared;
  try {
    prepared = prepare_arms(o.base, requests, staging.path, suite_targets(suite));
  } catch (const Error&) {
    staging.keep = true;  // the error names the merged pipeline: leave it for the user to read
    throw;
  }

  Manifest manifest;
  manifest.build = current_build();
  manifest.suite_name = suite.name;
  manifest.suite_file = suite.file;
  manifest.suite_fingerprint = suite.fingerprint;
  manifest.entries = suite.entries;
  manifest.base_pipeline = fs::absolute(o.base).lexically_normal().string();
  for (const PreparedArm& arm : prepared) manifest.arms.push_back(arm.info);
  manifest.repeat = o.repeat;
  manifest.warmup = o.warmup;
  manifest.threads = o.threads;
  manifest.shard_index = shard_index;
  manifest.shard_count = shard_count;

  const std::string directory = o.results.empty() ? default_results_directory(manifest) : o.results;
  ResultsDir results(directory);
  if (results.has_manifest()) {
    const Manifest stored = results.read_manifest();
    if (stored.suite_name == manifest.suite_name && same_arm_names(stored, manifest)) {
      // The same sweep with changed inputs: stored records of what changed no longer match and are redone.
      for (const std::string& change : manifest_changes(stored, manifest))
        log->warn("{} since these results were made: the items it touches are redone", change);
    } else {
      throw Error(results.root() + ": this results directory holds results of " + manifest_mismatch(manifest, stored, false) +
                  "; give another --results directory, or delete this one to start again");
    }
    if (const auto queued = queued_jobs(read_submissions(results)); !queued.empty())
      throw Error(results.root() + ": Slurm job " + queued.front() + " is still working on this results directory; "
                  "wait for it (tessera ab status " + results.root() + ") or scancel it first");
    log->info("resuming results={}", results.root());
  } else if (fs::is_directory(results.root()) && !fs::is_empty(results.root())) {
    throw Error(results.root() + ": not empty and not a tessera ab results directory (no manifest.json); give a new "
                "or empty --results directory");
  }
  // A damaged folder (say `records` made a file) would otherwise fail deep inside a write.
  for (const char* folder : {"arms", "records"})
    if (const fs::path inside = fs::path(results.root()) / folder; fs::exists(inside) && !fs::is_directory(inside))
      throw Error(inside.string() + ": is not a folder, but a results directory keeps its " + folder +
                  " there; move it away, or give another --results directory");
  fs::create_directories(fs::path(results.root()) / "arms");
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    ArmInfo& arm = manifest.arms[i];
    const std::string& pipeline_arm = arm.twin_of.empty() ? arm.name : arm.twin_of;
    arm.pipeline = "arms/" + pipeline_arm + ".yaml";
    if (arm.twin_of.empty()) write_file_atomically(results.absolute(arm.pipeline), prepared[i].yaml, "arm pipeline");
  }
  results.write_manifest(manifest);

  const std::vector<WorkItem> all = plan_work(manifest);
  const std::vector<WorkItem> items = shard_items(all, shard_index, shard_count);
  log->info("ab starting suite={} models={} arms={} repeat={} warmup={} threads={} shard={}/{} items={} of {} results={}",
            suite.name, suite.entries.size(), requests.size(), o.repeat, o.warmup,
            o.threads ? std::to_string(o.threads) : std::string("default"), shard_index, shard_count, items.size(), all.size(),
            results.root());
  if (o.executor == "slurm") {
    SlurmOptions options = o.slurm;  // the command line first, then the suite's `slurm:`
    auto fill = [](std::string& given, const std::string& fallback) {
      if (given.empty()) given = fallback;
    };
    fill(options.partition, suite.slurm.partition);
    fill(options.time, suite.slurm.time);
    fill(options.mem, suite.slurm.mem);
    fill(options.account, suite.slurm.account);
    print_submission(submit_sweep(results, manifest, model_ids(manifest), options, o.retry_failed, o.lock, self_executable()),
                     results);
    return 0;
  }
  const RunnerStats stats = run_locally(o, manifest, results, items, o.retry_failed);
  const Analysis analysis = analyse(manifest, results.read_all_records(), o.alpha);
  return finish(analysis, driver_stats("ab", results, stats), o.files, beside_results(results), o.quiet, start, history);
}

ResultsDir open_results(const std::string& path) {
  ResultsDir results(path);
  if (!results.has_manifest()) throw Error(results.root() + ": not a tessera ab results directory (no manifest.json)");
  return results;
}

// `tessera ab task DIR --submission N --task I`: one array task, inside a Slurm job.
int run_task(AbCommand& o) {
  const ResultsDir results = open_results(o.directory);
  const Manifest manifest = results.read_manifest();
  check_same_build(results, manifest);
  check_inputs_unchanged(results, manifest);
  const std::vector<Submission> submissions = read_submissions(results);
  if (o.submission < 1 || o.submission > submissions.size())
    throw Error(fmt::format("--submission {}: {} has submissions 1 to {}", o.submission, results.root(), submissions.size()));
  const Submission& submission = submissions[o.submission - 1];
  const std::vector<WorkItem> items = task_items(manifest, submission, o.task_index);
  logger("tessera.ab")->info("ab task submission={} task={} models={} items={} results={}", o.submission, o.task_index,
                             submission.tasks[o.task_index - 1].size(), items.size(), results.root());
  RunnerOptions runner = runner_options(results, "", o.retry_failed);
  runner.lock_path = o.lock;  // "" = the node's own device lock: tasks on other nodes do not share one
  const RunnerStats stats = run_work(manifest, results, items, runner);
  return stats.failed > 0 ? 1 : 0;
}

// Items that are not done, one line each to stderr; true when there were any.
bool report_unfinished(const Analysis& analysis, const std::string& root) {
  std::size_t count = 0;
  for (const ItemStatus& item : analysis.items)
    if (item.status != "ok") {
      fmt::print(stderr, "{} item model={} arm={} repeat={}\n", item.status, item.model, item.arm, item.repeat);
      ++count;
    }
  if (count) fmt::print(stderr, "error: {} of {} work items are missing or failed; `tessera ab resume {}` redoes them\n", count,
                        analysis.items.size(), root);
  return count > 0;
}

// `tessera ab report DIR`: the reports of what a results directory holds (the Slurm report job).
int run_report(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  const ResultsDir results = open_results(o.directory);
  History history = open_history(o);
  const Manifest manifest = results.read_manifest();
  const Analysis analysis = analyse(manifest, results.read_all_records(), o.alpha);
  const int code = finish(analysis, driver_stats("ab report", results, RunnerStats{}), o.files, beside_results(results),
                          o.quiet, start, history);
  return report_unfinished(analysis, results.root()) ? 1 : code;
}

int run_status(AbCommand& o) {
  const ResultsDir results = open_results(o.directory);
  const Manifest manifest = results.read_manifest();
  const std::vector<ItemState> states = item_states(results, manifest);
  std::map<std::string, std::size_t> counts;
  for (const ItemState& item : states) {
    ++counts[item.state];
    if (item.state != "done") fmt::print("{:<8} {} {} repeat={}\n", item.state, item.model, item.arm, item.repeat);
  }
  for (const Submission& s : read_submissions(results)) {
    const std::string ended = ended_tasks(results, s);
    fmt::print("submission {} at {}: array job {} ({} tasks), report job {}{}\n", s.number, s.submitted_at, s.array_job,
               s.tasks.size(), s.report_job, ended.empty() ? "" : "; ended tasks: " + ended);
  }
  for (const std::string& job : queued_jobs(read_submissions(results))) fmt::print("queued {}\n", job);
  fmt::print("items: {} of {} done, {} failed, {} running, {} pending, {} missing\n", counts["done"], states.size(),
             counts["failed"], counts["running"], counts["pending"], counts["missing"]);
  return 0;
}

// `tessera ab resume DIR`: redo only the items that are missing or failed.
int run_resume(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  const ResultsDir results = open_results(o.directory);
  const Manifest manifest = results.read_manifest();
  check_same_build(results, manifest);
  check_inputs_unchanged(results, manifest);
  const std::vector<Submission> submissions = read_submissions(results);
  const bool executor_given = o.resume->count("--executor") > 0;
  if (!executor_given) o.executor = submissions.empty() ? "local" : "slurm";
  check_executor(o);
  if (!submissions.empty()) {
    const std::vector<std::string> queued = queued_jobs(submissions);
    if (!queued.empty())
      throw Error(results.root() + ": job " + queued.front() + " of this results directory is still queued; wait for it "
                  "(tessera ab status " + results.root() + ") or scancel it, then resume");
  }
  std::vector<std::string> models;
  std::size_t redo = 0;
  for (const ItemState& item : item_states(results, manifest)) {
    if (item.state == "done") continue;
    ++redo;
    if (std::find(models.begin(), models.end(), item.model) == models.end()) models.push_back(item.model);
  }
  if (models.empty()) {
    fmt::print("nothing to resume: every work item in {} is done\n", results.root());
    return 0;
  }
  logger("tessera.ab")->info("resuming items={} models={} executor={} results={}", redo, models.size(), o.executor,
                             results.root());
  if (o.executor == "slurm") {
    SlurmOptions options = o.slurm;
    // Without new sbatch options, the last submission's stand.
    if (!submissions.empty() && options.partition.empty() && options.time.empty() && options.mem.empty() &&
        options.account.empty()) {
      options = submissions.back().options;
      options.tasks = o.slurm.tasks;
      options.hold = o.slurm.hold;
    }
    const std::string lock = o.resume->count("--lock") || submissions.empty() ? o.lock : submissions.back().lock;
    print_submission(submit_sweep(results, manifest, models, options, true, lock, self_executable()), results);
    return 0;
  }
  std::vector<WorkItem> items;
  for (const WorkItem& item : plan_work(manifest))
    if (std::find(models.begin(), models.end(), manifest.entries[item.entry].id) != models.end()) items.push_back(item);
  History history = open_history(o);
  const RunnerStats stats = run_locally(o, manifest, results, items, true);
  const Analysis analysis = analyse(manifest, results.read_all_records(), o.alpha);
  return finish(analysis, driver_stats("ab resume", results, stats), o.files, beside_results(results), o.quiet, start,
                history);
}

int run_merge(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.merge_directories.empty()) throw Error("tessera ab merge: name the results directories to join");
  auto log = logger("tessera.ab");
  History history = open_history(o);
  std::vector<ResultsDir> directories;
  std::vector<Manifest> manifests;
  for (const std::string& path : o.merge_directories) {
    directories.emplace_back(path);
    if (!directories.back().has_manifest())
      throw Error(directories.back().root() + ": not a tessera ab results directory (no manifest.json)");
    manifests.push_back(directories.back().read_manifest());
  }
  Manifest manifest = manifests.front();
  for (std::size_t i = 1; i < manifests.size(); ++i) {
    const std::string mismatch = manifest_mismatch(manifest, manifests[i], true);
    if (!mismatch.empty())
      throw Error(directories[i].root() + ": cannot merge it with " + directories.front().root() + ": it holds results of " +
                  mismatch);
  }
  manifest.shard_index = manifest.shard_count = 1;

  std::map<std::string, Record> merged;
  std::size_t duplicates = 0;
  std::string roots;
  for (const ResultsDir& directory : directories) {
    roots += (roots.empty() ? "" : ";") + directory.root();
    for (Record& record : directory.read_all_records()) {
      if (!record_matches(record, manifest, record.model, record.arm, record.repeat)) continue;  // analyse() counts these
      const std::string key = record.key();
      if (merged.count(key)) {
        ++duplicates;
        continue;
      }
      merged.emplace(key, std::move(record));
    }
  }
  std::vector<Record> records;
  for (auto& [key, record] : merged) records.push_back(std::move(record));
  log->info("merged results directories={} records={} duplicates={}", directories.size(), records.size(), duplicates);
  Analysis analysis = analyse(manifest, records, o.alpha);
  if (duplicates)
    analysis.warnings.push_back(fmt::format("{} work items were found in more than one directory; the first directory's "
                                            "record was used",
                                            duplicates));
  DriverStats driver;
  driver.command = "ab merge";
  driver.results = roots;
  return finish(analysis, driver, o.files, ReportFiles{}, o.quiet, start, history);
}

// `tessera ab history METRIC --model M [--arm A]`: how a metric moved across builds.
int run_history(AbCommand& o) {
  const MetricDefinition* metric = find_metric(o.history_metric);
  if (!metric) {
    std::string names;
    for (const MetricDefinition& known : ab_metrics()) names += (names.empty() ? "" : ", ") + known.name;
    throw Error("tessera ab history: no metric " + o.history_metric + "; the metrics are " + names);
  }
  const std::string path = o.history_file.empty() ? default_history_path() : o.history_file;
  if (!fs::exists(path))
    throw Error(path + ": no history database yet; every `tessera ab` sweep adds to it (or give --history FILE)");
  const History history(path);
  const std::optional<std::string> arm = o.history_arm.empty() ? std::nullopt : std::optional<std::string>(o.history_arm);
  const std::vector<HistoryPoint> points = history.points(metric->name, o.history_model, arm);
  if (points.empty()) {
    std::string models;
    for (const std::string& model : history.models()) models += (models.empty() ? "" : ", ") + model;
    throw Error(history.path() + ": no values of " + metric->name + " for model " + o.history_model +
                (arm ? " and arm " + *arm : "") + (models.empty() ? "; it holds no sweep yet" : "; its models are " + models));
  }
  fmt::print("{}", history_table(points, metric->name, o.history_model));
  return 0;
}

}  // namespace

std::shared_ptr<AbCommand> add_ab_command(CLI::App& app) {
  auto command = std::make_shared<AbCommand>();
  AbCommand& o = *command;
  o.ab = app.add_subcommand("ab", "A/B test pipeline arms over a suite of models: compile, run, compare, report");
  o.ab->require_subcommand(0, 1);
  o.ab->add_option("--base", o.base, "base pipeline YAML every arm's overlay is merged onto")->check(CLI::ExistingFile);
  o.ab->add_option("--arm", o.arms, "NAME=OVERLAY.yaml, or NAME= for the base itself; the first arm is the baseline "
                                    "(repeatable)");
  o.ab->add_option("--suite", o.suite, "suite YAML: the models and targets (configs/suites/)")->check(CLI::ExistingFile);
  o.ab->add_option("--repeat", o.repeat, "compiles per model and arm, interleaved, for compile time and memory")
      ->capture_default_str();
  o.ab->add_option("--warmup", o.warmup, "discarded compiles of each model and arm before its measured ones (page cache, "
                                         "plugin libraries)")
      ->capture_default_str();
  o.ab->add_option("--threads", o.threads, "passed to every compile as its --threads (default: the compiler's, the "
                                           "machine's cores); CPU time counts every thread")
      ->check(CLI::PositiveNumber);
  o.ab->add_option("--shard", o.shard, "i/N: do every N-th work item from the i-th (join shards with `tessera ab merge`)");
  o.ab->add_option("--results", o.results, "results directory; rerunning resumes it (default: ab-results/SUITE-HASH)");
  o.ab->add_option("--lock", o.lock, "device lock file for the simulator runs (default: in the results directory)");
  o.ab->add_flag("--retry-failed", o.retry_failed, "redo stored work items whose compile or run failed");
  add_executor_options(*o.ab, o);
  add_report_options(*o.ab, o);

  o.merge = o.ab->add_subcommand("merge", "join results directories of shards of one A/B run and report them");
  o.merge->add_option("directories", o.merge_directories, "results directories (same suite, arms and tessera build)")
      ->required()
      ->check(CLI::ExistingDirectory);
  add_report_options(*o.merge, o);

  o.status = o.ab->add_subcommand("status", "done, failed, running, pending and missing work items of a results directory");
  o.status->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  o.resume = o.ab->add_subcommand("resume", "redo only the missing or failed work items of a results directory "
                                            "(through Slurm again when it was submitted there)");
  o.resume->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  o.resume->add_option("--lock", o.lock, "device lock file for the simulator runs");
  add_executor_options(*o.resume, o);
  add_report_options(*o.resume, o);
  o.report = o.ab->add_subcommand("report", "report what a results directory holds, naming missing and failed items");
  o.report->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  add_report_options(*o.report, o);
  o.history = o.ab->add_subcommand("history", "how a metric of one model moved across tessera builds (the history database)");
  o.history->add_option("metric", o.history_metric, "a metric, e.g. device_cycles or compile_cpu_ms")->required();
  o.history->add_option("--model", o.history_model, "suite model id, e.g. mlp-small@t16")->required();
  o.history->add_option("--arm", o.history_arm, "only this arm");
  add_history_option(*o.history, o);
  // Internal: what each array task of a Slurm submission runs.
  o.task = o.ab->add_subcommand("task", "")->group("");
  o.task->add_option("directory", o.directory)->required()->check(CLI::ExistingDirectory);
  o.task->add_option("--submission", o.submission)->required();
  o.task->add_option("--task", o.task_index)->required();
  o.task->add_option("--lock", o.lock);
  o.task->add_flag("--retry-failed", o.retry_failed);
  return command;
}

bool ab_command_chosen(const AbCommand& command) { return command.ab && command.ab->parsed(); }

int run_ab_command(AbCommand& command) {
  if (command.merge->parsed()) return run_merge(command);
  if (command.status->parsed()) return run_status(command);
  if (command.resume->parsed()) return run_resume(command);
  if (command.report->parsed()) return run_report(command);
  if (command.task->parsed()) return run_task(command);
  if (command.history->parsed()) return run_history(command);
  return run_ab(command);
}

}  // namespace tessera::cli
