// One A/B sweep: prepare arms and the results directory, execute, report.
#include "sweep.hpp"

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "analysis.hpp"
#include "executor_local.hpp"
#include "fingerprint.hpp"
#include "history.hpp"
#include "progress.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

namespace {

std::int64_t self_peak_rss_kib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

void write_text(const std::string& path, const std::string& text) {
  if (!path.empty()) write_file_atomically(path, text, "A/B report");
}

void write_reports(const Analysis& analysis, const DriverStats& driver, const std::vector<HistoryPoint>& history,
                   const ReportFiles& files) {
  write_text(files.json, json_report(analysis, driver));
  write_text(files.csv, csv_report(analysis));
  write_text(files.markdown, markdown_report(analysis));
  write_text(files.html, html_report(analysis, driver, history));
}

// Outside the source tree, where a checkout's `git status` and grep do not see it.
std::string default_results_directory(const Manifest& manifest) {
  std::string identity = manifest.suite_fingerprint + manifest.build.build_hash;
  for (const ArmInfo& arm : manifest.arms) identity += arm.name + arm.fingerprint;
  return (fs::path(cache_root()) / "ab-results" / (manifest.suite_name + "-" + hash_text(identity).substr(0, 8)))
      .string();
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

// A scratch folder for validating merged pipelines before the results directory is known;
// removed whatever happens (errors name the base's and overlays' places, not its files).
struct StagingDirectory {
  std::string path;
  StagingDirectory() {
    std::string pattern = (fs::temp_directory_path() / "tessera-ab-arms-XXXXXX").string();
    if (!mkdtemp(pattern.data()))
      throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
    path = pattern;
  }
  ~StagingDirectory() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::string cache_root() {
  const char* cache = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  return (cache && *cache ? fs::path(cache) / "tessera"
          : home && *home ? fs::path(home) / ".cache/tessera"
                          : fs::temp_directory_path() / "tessera")
      .string();
}

void add_history_option(CLI::App& command, std::string& history_file) {
  command.add_option(
      "--history", history_file,
      "SQLite history database every sweep's values are added to (default: " + default_history_path() + ")");
}

History open_history(const ReportOptions& o) {
  return History(o.history_file.empty() ? default_history_path() : o.history_file);
}

void add_report_options(CLI::App& command, ReportOptions& options) {
  command.add_option("--json", options.files.json, "write the report as JSON here");
  command.add_option("--csv", options.files.csv, "write one CSV row per (arm, model, metric) here");
  command.add_option("--markdown", options.files.markdown, "write the report as Markdown here");
  command.add_option("--html", options.files.html, "write a standalone HTML report (tables, charts, phases) here");
  command.add_option("--alpha", options.alpha, "false-discovery rate for noisy metrics; intervals are 1 - alpha")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  command.add_flag("--quiet", options.quiet, "do not print the A/B report's tables on stdout");
  add_history_option(command, options.history_file);
}

void add_executor_options(CLI::App& command, ExecutorOptions& o) {
  command.add_option("--executor", o.executor, "local: this machine (--jobs N); slurm: a job array and a report job")
      ->capture_default_str();
  command.add_option("--jobs", o.jobs, "local: work items in parallel (a model's items stay in order on one worker)")
      ->capture_default_str();
  command.add_option("--tasks", o.slurm.tasks,
                     "slurm: array tasks, each a group of whole models (default: one per model)");
  command.add_option("--partition", o.slurm.partition, "slurm: sbatch --partition");
  command.add_option("--time", o.slurm.time, "slurm: sbatch --time limit of each task, e.g. 2:00:00");
  command.add_option("--mem", o.slurm.mem, "slurm: sbatch --mem of each task, e.g. 4G");
  command.add_option("--account", o.slurm.account, "slurm: sbatch --account");
  command.add_flag("--hold", o.slurm.hold, "slurm: submit the array held (start it with `scontrol release JOB`)");
}

void check_report_files(const ReportFiles& files, const std::vector<InputFile>& inputs) {
  check_output_file(files.json, "the report (--json)", inputs);
  check_output_file(files.csv, "the report (--csv)", inputs);
  check_output_file(files.markdown, "the report (--markdown)", inputs);
  check_output_file(files.html, "the report (--html)", inputs);
}

ReportFiles beside_results(const ResultsDir& results) {
  return {results.absolute("report.json"), results.absolute("report.csv"), results.absolute("report.md"),
          results.absolute("report.html")};
}

void check_executor(const ExecutorOptions& options) {
  if (options.executor != "local" && options.executor != "slurm")
    throw Error("--executor " + options.executor + ": choose local (this machine, --jobs N) or slurm (a job array)");
  if (options.jobs < 1) throw Error("--jobs must be at least 1");
  check_sbatch_options(options.slurm);
}

PreparedSweep prepare_sweep(const SweepRequest& request) {
  auto log = logger("tessera.ab");
  StagingDirectory staging;
  const std::vector<PreparedArm> prepared =
      prepare_arms(request.base, request.arms, staging.path, suite_targets(request.suite));

  Manifest manifest;
  manifest.build = current_build();
  manifest.suite_name = request.suite.name;
  manifest.suite_file = request.suite.file;
  manifest.suite_fingerprint = request.suite.fingerprint;
  manifest.entries = request.suite.entries;
  manifest.base_pipeline = fs::absolute(request.base).lexically_normal().string();
  for (const PreparedArm& arm : prepared) manifest.arms.push_back(arm.info);
  manifest.repeat = request.repeat;
  manifest.warmup = request.warmup;
  manifest.threads = request.threads;
  manifest.shard_index = request.shard_index;
  manifest.shard_count = request.shard_count;

  const std::string directory = request.results.empty() ? default_results_directory(manifest) : request.results;
  ResultsDir results(directory);
  if (results.has_manifest()) {
    const Manifest stored = results.read_manifest();
    if (stored.suite_name == manifest.suite_name && same_arm_names(stored, manifest)) {
      // The same sweep with changed inputs: stored records of what changed no longer match and are redone.
      for (const std::string& change : manifest_changes(stored, manifest))
        log->warn("{} since these results were made: the items it touches are redone", change);
    } else {
      throw Error(results.root() + ": this results directory holds results of " +
                  manifest_mismatch(manifest, stored, false) +
                  "; give another --results directory, or delete this one to start again");
    }
    if (const auto queued = queued_jobs(read_submissions(results)); !queued.empty())
      throw Error(results.root() + ": Slurm job " + queued.front() +
                  " is still working on this results directory; "
                  "wait for it (tessera ab status " +
                  results.root() + ") or scancel it first");
    log->info("resuming results={}", results.root());
  } else if (fs::is_directory(results.root()) && !fs::is_empty(results.root())) {
    throw Error(results.root() +
                ": not empty and not a tessera ab results directory (no manifest.json); give a new "
                "or empty --results directory");
  }
  // A damaged folder (say `records` made a file) would otherwise fail deep inside a write.
  for (const char* folder : {"arms", "records"})
    if (const fs::path inside = fs::path(results.root()) / folder; fs::exists(inside) && !fs::is_directory(inside))
      throw Error(inside.string() + ": is not a folder, but a results directory keeps its " + folder +
                  " there; move it away, or give another --results directory");
  const OwnedFolder arms = results.folder("arms");
  for (std::size_t i = 0; i < prepared.size(); ++i) {
    ArmInfo& arm = manifest.arms[i];
    const std::string& pipeline_arm = arm.twin_of.empty() ? arm.name : arm.twin_of;
    arm.pipeline = "arms/" + pipeline_arm + ".yaml";
    if (arm.twin_of.empty()) arms.write_file(pipeline_arm + ".yaml", prepared[i].yaml, "arm pipeline");
  }
  results.write_manifest(manifest);

  PreparedSweep sweep;
  const std::vector<WorkItem> all = plan_work(manifest);
  sweep.items = shard_items(all, request.shard_index, request.shard_count);
  sweep.planned = all.size();
  sweep.results = results.root();
  sweep.manifest = std::move(manifest);
  return sweep;
}

RunnerStats run_locally(const ExecutorOptions& options, const Manifest& manifest, const ResultsDir& results,
                        const std::vector<WorkItem>& items, bool retry_failed, bool fresh) {
  Progress progress(items.size(), stderr, Progress::mode_for_stderr());
  progress.attach_to_logs();
  RunnerOptions runner;
  runner.tessera = self_executable();
  runner.lock_path = options.lock.empty() ? results.absolute("device.lock") : options.lock;
  runner.retry_failed = retry_failed;
  runner.fresh = fresh;
  runner.progress = &progress;
  return run_local(manifest, results, items, runner, options.jobs, !options.lock.empty());
}

Submission submit_to_slurm(const ExecutorOptions& options, const SuiteSlurm& suite_defaults, const ResultsDir& results,
                           const Manifest& manifest, const std::vector<std::string>& models, bool retry_failed) {
  SlurmOptions slurm = options.slurm;  // the command line first, then the suite's `slurm:`
  auto fill = [](std::string& given, const std::string& fallback) {
    if (given.empty()) given = fallback;
  };
  fill(slurm.partition, suite_defaults.partition);
  fill(slurm.time, suite_defaults.time);
  fill(slurm.mem, suite_defaults.mem);
  fill(slurm.account, suite_defaults.account);
  const Submission submission =
      submit_sweep(results, manifest, models, slurm, retry_failed, options.lock, self_executable());
  fmt::print(
      "submitted to Slurm: array job {} ({} tasks), report job {} (afterany: it reports what finished)\n"
      "results: {}\nfollow it: tessera ab status {}\n",
      submission.array_job, submission.tasks.size(), submission.report_job, results.root(), results.root());
  return submission;
}

void wait_for_slurm(const ResultsDir& results) {
  const std::vector<Submission> submissions = read_submissions(results);
  bool said = false;
  while (true) {
    const std::vector<std::string> queued = queued_jobs(submissions);
    if (queued.empty()) return;
    if (!said) logger("tessera.ab")->info("waiting for Slurm jobs={} results={}", queued.size(), results.root());
    said = true;
    sleep(2);  // squeue is a controller RPC: a few a minute cost the cluster nothing
  }
}

std::vector<std::string> model_ids(const Manifest& manifest) {
  std::vector<std::string> ids;
  for (const SuiteEntry& entry : manifest.entries) ids.push_back(entry.id);
  return ids;
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

int finish_sweep(const Analysis& analysis, DriverStats driver, const ReportFiles& extra, const ReportFiles& beside,
                 bool quiet, const std::chrono::steady_clock::time_point start, History& history) {
  driver.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  driver.self_peak_rss_kib = self_peak_rss_kib();
  const std::size_t recorded =
      history.record(analysis, driver.results);  // first, so the HTML's history includes this sweep
  logger("tessera.ab")
      ->info("history recorded values={} build={} database={}", recorded, analysis.manifest.build.build_hash,
             history.path());
  const std::vector<HistoryPoint> points = history.report_points(analysis);
  write_reports(analysis, driver, points, beside);
  write_reports(analysis, driver, points, extra);
  // Said on stdout, even with --quiet: a rerun that reused everything must not look like a
  // fresh measurement.
  if (driver.executed + driver.skipped > 0)
    fmt::print("{}: ran {} work item{} now, reused {} stored in {}{}\n", driver.command, driver.executed,
               driver.executed == 1 ? "" : "s", driver.skipped, driver.results,
               driver.skipped > 0 && driver.command == "ab" ? " (--fresh runs them again)" : "");
  if (!quiet) fmt::print("{}", terminal_report(analysis, driver.results));
  logger("tessera.ab")
      ->info(
          "ab finished wall_ms={:.0f} child_wall_ms={:.0f} self_peak_rss_kib={} executed={} skipped={} runs={} "
          "items_present={} items_expected={} items_failed={}",
          driver.wall_ms, driver.child_wall_ms, driver.self_peak_rss_kib, driver.executed, driver.skipped, driver.runs,
          analysis.items_present, analysis.items.size(), analysis.items_failed);
  if (analysis.items_failed > 0) {
    fmt::print(stderr, "error: {} of {} work items failed (see the warnings and the logs under {})\n",
               analysis.items_failed, analysis.items.size(), driver.results);
    return 1;
  }
  return 0;
}

}  // namespace tessera::ab
