// `tessera ab`: compile and run every suite model with every arm, resumably, then report;
// `tessera ab merge`: join the results directories of shards into one report.
#include "ab_command.hpp"

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
#include "command_line.hpp"
#include "executor_slurm.hpp"
#include "fingerprint.hpp"
#include "history.hpp"
#include "report.hpp"
#include "results.hpp"
#include "runner.hpp"
#include "suite.hpp"
#include "sweep.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

using namespace tessera::ab;

class AbCommand {
public:
  CLI::App* ab = nullptr;
  CLI::App* merge = nullptr;
  CLI::App* status = nullptr;
  CLI::App* resume = nullptr;
  CLI::App* task = nullptr;
  CLI::App* report = nullptr;
  CLI::App* history = nullptr;
  std::string base, suite, results, shard = "1/1";
  ExecutorOptions exec;
  std::string directory;  ///< of status, resume, task and report
  std::uint32_t submission = 0, task_index = 0;
  std::vector<std::string> arms;
  std::uint32_t repeat = 3;
  std::uint32_t warmup = 0;
  std::uint32_t threads = 0;
  bool retry_failed = false;
  bool fresh = false;  ///< redo every item even if the results folder holds it
  ReportOptions report_options;
  std::vector<std::string> merge_directories;
  std::string history_metric, history_model, history_arm;  ///< of `tessera ab history`
};

namespace {

std::pair<std::uint32_t, std::uint32_t> parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  try {
    if (slash != std::string::npos) {
      const unsigned long index = std::stoul(text.substr(0, slash)), count = std::stoul(text.substr(slash + 1));
      if (count >= 1 && index >= 1 && index <= count)
        return {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(count)};
    }
  } catch (const std::exception&) {}
  throw Error("--shard " + text + ": write i/N with 1 <= i <= N, e.g. --shard 2/4 for the second of four shards");
}

// A task or a resume must not mix records of changed inputs under the manifest's fingerprints.
void check_inputs_unchanged(const ResultsDir& results, const Manifest& manifest) {
  const std::vector<std::string> changed = changed_inputs(manifest);
  if (!changed.empty())
    throw Error(changed.front() + ": changed since " + results.root() + " was prepared" +
                (changed.size() > 1 ? fmt::format(" ({} more files changed)", changed.size() - 1) : "") +
                "; run the same `tessera ab` command again: it takes the change in and redoes the items it touches");
}

// Results of another tessera binary must not land under this manifest's build identity.
void check_same_build(const ResultsDir& results, const Manifest& manifest) {
  const BuildIdentity build = current_build();
  if (!(build == manifest.build))
    throw Error(results.root() + ": prepared by tessera build " + manifest.build.build_hash + ", but this is build " +
                build.build_hash + " (" + self_executable() +
                "); run the tessera binary that prepared it, or start a "
                "new results directory");
}

int run_ab(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.base.empty()) throw Error("tessera ab: no base pipeline given (--base configs/pipelines/default.yaml)");
  if (o.suite.empty()) throw Error("tessera ab: no suite given (--suite configs/suites/default.yaml)");
  if (o.arms.empty())
    throw Error("tessera ab: no arms given; the first is the baseline: --arm A= --arm B=overlay.yaml");
  if (o.repeat < 1) throw Error("tessera ab: --repeat must be at least 1");
  SweepRequest request;
  std::tie(request.shard_index, request.shard_count) = parse_shard(o.shard);
  check_executor(o.exec);
  if (o.exec.executor == "slurm" && request.shard_count > 1)
    throw Error("--shard with --executor slurm: the job array is the sharding; drop --shard (or use --tasks N)");
  if (o.arms.size() == 1)
    throw Error("tessera ab: one arm only (--arm " + o.arms.front() +
                "); an A/B test compares arms with a baseline, "
                "the first --arm: add the base itself first, e.g. --arm base= --arm " +
                o.arms.front());

  request.base = o.base;
  request.suite = load_suite(o.suite);
  for (const std::string& text : o.arms) request.arms.push_back(parse_arm_argument(text));
  std::vector<InputFile> inputs{{o.base, "the base pipeline"}, {o.suite, "the suite"}};
  for (const ArmRequest& arm : request.arms) inputs.push_back({arm.overlay, "the overlay of arm " + arm.name});
  check_report_files(o.report_options.files, inputs);
  History history = open_history(o.report_options);
  request.repeat = o.repeat;
  request.warmup = o.warmup;
  request.threads = o.threads;
  request.results = o.results;
  const PreparedSweep sweep = prepare_sweep(request);
  const ResultsDir results(sweep.results);
  logger("tessera.ab")
      ->info(
          "ab starting suite={} models={} arms={} repeat={} warmup={} threads={} shard={}/{} items={} of {} results={}",
          request.suite.name, request.suite.entries.size(), request.arms.size(), o.repeat, o.warmup,
          o.threads ? std::to_string(o.threads) : std::string("default"), request.shard_index, request.shard_count,
          sweep.items.size(), sweep.planned, results.root());
  if (o.exec.executor == "slurm") {
    if (o.fresh)
      throw Error("--fresh with --executor slurm: give a new --results folder instead (the tasks resume theirs)");
    submit_to_slurm(o.exec, request.suite.slurm, results, sweep.manifest, model_ids(sweep.manifest), o.retry_failed);
    return 0;
  }
  const RunnerStats stats = run_locally(o.exec, sweep.manifest, results, sweep.items, o.retry_failed, o.fresh);
  const Analysis analysis = analyse(sweep.manifest, results.read_all_records(), o.report_options.alpha);
  return finish_sweep(analysis, driver_stats("ab", results, stats), o.report_options.files, beside_results(results),
                      o.report_options.quiet, start, history);
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
    throw Error(
        fmt::format("--submission {}: {} has submissions 1 to {}", o.submission, results.root(), submissions.size()));
  const Submission& submission = submissions[o.submission - 1];
  const std::vector<WorkItem> items = task_items(manifest, submission, o.task_index);
  logger("tessera.ab")
      ->info("ab task submission={} task={} models={} items={} results={}", o.submission, o.task_index,
             submission.tasks[o.task_index - 1].size(), items.size(), results.root());
  RunnerOptions runner;
  runner.tessera = self_executable();
  runner.retry_failed = o.retry_failed;
  runner.lock_path = o.exec.lock;  // "" = the node's own device lock: tasks on other nodes do not share one
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
  if (count)
    fmt::print(stderr, "error: {} of {} work items are missing or failed; `tessera ab resume {}` redoes them\n", count,
               analysis.items.size(), root);
  return count > 0;
}

// `tessera ab report DIR`: the reports of what a results directory holds (the Slurm report job).
int run_report(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  const ResultsDir results = open_results(o.directory);
  History history = open_history(o.report_options);
  const Manifest manifest = results.read_manifest();
  const Analysis analysis = analyse(manifest, results.read_all_records(), o.report_options.alpha);
  const int code = finish_sweep(analysis, driver_stats("ab report", results, RunnerStats{}), o.report_options.files,
                                beside_results(results), o.report_options.quiet, start, history);
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
  if (!executor_given) o.exec.executor = submissions.empty() ? "local" : "slurm";
  check_executor(o.exec);
  if (!submissions.empty()) {
    const std::vector<std::string> queued = queued_jobs(submissions);
    if (!queued.empty())
      throw Error(results.root() + ": job " + queued.front() +
                  " of this results directory is still queued; wait for it "
                  "(tessera ab status " +
                  results.root() + ") or scancel it, then resume");
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
  logger("tessera.ab")
      ->info("resuming items={} models={} executor={} results={}", redo, models.size(), o.exec.executor,
             results.root());
  if (o.exec.executor == "slurm") {
    ExecutorOptions exec = o.exec;
    // Without new sbatch options, the last submission's stand.
    if (!submissions.empty() && exec.slurm.partition.empty() && exec.slurm.time.empty() && exec.slurm.mem.empty() &&
        exec.slurm.account.empty()) {
      exec.slurm = submissions.back().options;
      exec.slurm.tasks = o.exec.slurm.tasks;
      exec.slurm.hold = o.exec.slurm.hold;
    }
    if (!o.resume->count("--lock") && !submissions.empty()) exec.lock = submissions.back().lock;
    submit_to_slurm(exec, SuiteSlurm{}, results, manifest, models, true);
    return 0;
  }
  std::vector<WorkItem> items;
  for (const WorkItem& item : plan_work(manifest))
    if (std::find(models.begin(), models.end(), manifest.entries[item.entry].id) != models.end()) items.push_back(item);
  History history = open_history(o.report_options);
  const RunnerStats stats = run_locally(o.exec, manifest, results, items, true);
  const Analysis analysis = analyse(manifest, results.read_all_records(), o.report_options.alpha);
  return finish_sweep(analysis, driver_stats("ab resume", results, stats), o.report_options.files,
                      beside_results(results), o.report_options.quiet, start, history);
}

int run_merge(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.merge_directories.empty()) throw Error("tessera ab merge: name the results directories to join");
  auto log = logger("tessera.ab");
  History history = open_history(o.report_options);
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
      throw Error(directories[i].root() + ": cannot merge it with " + directories.front().root() +
                  ": it holds results of " + mismatch);
  }
  manifest.shard_index = manifest.shard_count = 1;

  std::map<std::string, Record> merged;
  std::size_t duplicates = 0;
  std::string roots;
  for (const ResultsDir& directory : directories) {
    roots += (roots.empty() ? "" : ";") + directory.root();
    for (Record& record : directory.read_all_records()) {
      if (!record_matches(record, manifest, record.model, record.arm, record.repeat))
        continue;  // analyse() counts these
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
  Analysis analysis = analyse(manifest, records, o.report_options.alpha);
  if (duplicates)
    analysis.warnings.push_back(
        fmt::format("{} work items were found in more than one directory; the first directory's "
                    "record was used",
                    duplicates));
  DriverStats driver;
  driver.command = "ab merge";
  driver.results = roots;
  return finish_sweep(analysis, driver, o.report_options.files, ReportFiles{}, o.report_options.quiet, start, history);
}

// `tessera ab history METRIC --model M [--arm A]`: how a metric moved across builds.
int run_history(AbCommand& o) {
  const MetricDefinition* metric = find_metric(o.history_metric);
  if (!metric) {
    std::string names;
    for (const MetricDefinition& known : ab_metrics()) names += (names.empty() ? "" : ", ") + known.name;
    throw Error("tessera ab history: no metric " + o.history_metric + "; the metrics are " + names);
  }
  const std::string path =
      o.report_options.history_file.empty() ? default_history_path() : o.report_options.history_file;
  if (!fs::exists(path))
    throw Error(path + ": no history database yet; every `tessera ab` sweep adds to it (or give --history FILE)");
  const History history(path);
  const std::optional<std::string> arm =
      o.history_arm.empty() ? std::nullopt : std::optional<std::string>(o.history_arm);
  const std::vector<HistoryPoint> points = history.points(metric->name, o.history_model, arm);
  if (points.empty()) {
    std::string models;
    for (const std::string& model : history.models()) models += (models.empty() ? "" : ", ") + model;
    throw Error(history.path() + ": no values of " + metric->name + " for model " + o.history_model +
                (arm ? " and arm " + *arm : "") +
                (models.empty() ? "; it holds no sweep yet" : "; its models are " + models));
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
  o.ab->add_option("--base", o.base, "base pipeline YAML (or a shipped one's name) every arm's overlay is merged onto")
      ->transform(shipped_config("pipelines"))
      ->check(CLI::ExistingFile);
  o.ab->add_option("--arm", o.arms,
                   "NAME=OVERLAY.yaml, or NAME= for the base itself; the first arm is the baseline "
                   "(repeatable)");
  o.ab->add_option("--suite", o.suite, "suite YAML: the models and targets, or a shipped suite's name (quick, default)")
      ->transform(shipped_config("suites"))
      ->check(CLI::ExistingFile);
  o.ab->add_option("--repeat", o.repeat, "compiles per model and arm, interleaved, for compile time and memory")
      ->capture_default_str();
  o.ab->add_option("--warmup", o.warmup,
                   "discarded compiles of each model and arm before its measured ones (page cache, "
                   "plugin libraries)")
      ->capture_default_str();
  o.ab->add_option("--threads", o.threads,
                   "passed to every compile as its --threads (default: the compiler's, the "
                   "machine's cores); CPU time counts every thread")
      ->check(CLI::PositiveNumber);
  o.ab->add_option("--shard", o.shard,
                   "i/N: do every N-th work item from the i-th (join shards with `tessera ab merge`)");
  o.ab->add_option("--results", o.results, "results directory; rerunning resumes it (default: ab-results/SUITE-HASH)");
  o.ab->add_option("--lock", o.exec.lock,
                   "device lock file for the simulator runs (default: in the results directory)");
  o.ab->add_flag("--retry-failed", o.retry_failed, "redo stored work items whose compile or run failed");
  o.ab->add_flag("--fresh", o.fresh,
                 "run every work item again, replacing what the results folder holds (a rerun otherwise reuses it)");
  add_executor_options(*o.ab, o.exec);
  add_report_options(*o.ab, o.report_options);

  o.merge = o.ab->add_subcommand("merge", "join results directories of shards of one A/B run and report them");
  o.merge->add_option("directories", o.merge_directories, "results directories (same suite, arms and tessera build)")
      ->required()
      ->check(CLI::ExistingDirectory);
  add_report_options(*o.merge, o.report_options);

  o.status =
      o.ab->add_subcommand("status", "done, failed, running, pending and missing work items of a results directory");
  o.status->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  o.resume = o.ab->add_subcommand("resume",
                                  "redo only the missing or failed work items of a results directory "
                                  "(through Slurm again when it was submitted there)");
  o.resume->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  o.resume->add_option("--lock", o.exec.lock, "device lock file for the simulator runs");
  add_executor_options(*o.resume, o.exec);
  add_report_options(*o.resume, o.report_options);
  o.report = o.ab->add_subcommand("report", "report what a results directory holds, naming missing and failed items");
  o.report->add_option("directory", o.directory, "results directory")->required()->check(CLI::ExistingDirectory);
  add_report_options(*o.report, o.report_options);
  o.history =
      o.ab->add_subcommand("history", "how a metric of one model moved across tessera builds (the history database)");
  o.history->add_option("metric", o.history_metric, "a metric, e.g. device_cycles or compile_cpu_ms")->required();
  o.history->add_option("--model", o.history_model, "suite model id, e.g. mlp-small@t16")->required();
  o.history->add_option("--arm", o.history_arm, "only this arm");
  add_history_option(*o.history, o.report_options.history_file);
  // Internal: what each array task of a Slurm submission runs.
  o.task = o.ab->add_subcommand("task", "")->group("");
  o.task->add_option("directory", o.directory)->required()->check(CLI::ExistingDirectory);
  o.task->add_option("--submission", o.submission)->required();
  o.task->add_option("--task", o.task_index)->required();
  o.task->add_option("--lock", o.exec.lock);
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
