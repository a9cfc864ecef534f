// `tessera ab`: compile and run every suite model with every arm, resumably, then report;
// `tessera ab merge`: join the results directories of shards into one report.
#include "ab_command.hpp"

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "analysis.hpp"
#include "arms.hpp"
#include "fingerprint.hpp"
#include "report.hpp"
#include "results.hpp"
#include "runner.hpp"
#include "suite.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"

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
  std::string base, suite, results, shard = "1/1", lock;
  std::vector<std::string> arms;
  std::uint32_t repeat = 3;
  double alpha = 0.05;
  bool retry_failed = false;
  bool quiet = false;
  ReportFiles files;
  std::vector<std::string> merge_directories;
};

namespace {

void add_report_options(CLI::App& command, AbCommand& options) {
  command.add_option("--json", options.files.json, "write the report as JSON here");
  command.add_option("--csv", options.files.csv, "write one CSV row per (arm, model, metric) here");
  command.add_option("--markdown", options.files.markdown, "write the report as Markdown here");
  command.add_option("--html", options.files.html, "write a standalone HTML report (tables, charts, phases) here");
  command.add_option("--alpha", options.alpha, "false-discovery rate for noisy metrics; intervals are 1 - alpha")
      ->check(CLI::Range(1e-6, 0.5))
      ->capture_default_str();
  command.add_flag("--quiet", options.quiet, "do not print the tables on stdout");
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

void write_reports(const Analysis& analysis, const DriverStats& driver, const ReportFiles& files) {
  write_text(files.json, json_report(analysis, driver));
  write_text(files.csv, csv_report(analysis));
  write_text(files.markdown, markdown_report(analysis));
  write_text(files.html, html_report(analysis, driver));
}

// Reports, prints the table, and turns failed items into the exit code.
int finish(const Analysis& analysis, DriverStats driver, const ReportFiles& extra, const ReportFiles& beside_results,
           bool quiet, const std::chrono::steady_clock::time_point start) {
  driver.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  driver.self_peak_rss_kib = self_peak_rss_kib();
  write_reports(analysis, driver, beside_results);
  write_reports(analysis, driver, extra);
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

std::string default_results_directory(const Manifest& manifest) {
  std::string identity = manifest.suite_fingerprint + manifest.build.build_hash;
  for (const ArmInfo& arm : manifest.arms) identity += arm.name + arm.fingerprint;
  return (fs::path("ab-results") / (manifest.suite_name + "-" + hash_text(identity).substr(0, 8))).string();
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
  auto log = logger("tessera.ab");

  const Suite suite = load_suite(o.suite);
  std::vector<ArmRequest> requests;
  for (const std::string& text : o.arms) requests.push_back(parse_arm_argument(text));
  std::vector<InputFile> inputs{{o.base, "the base pipeline"}, {o.suite, "the suite"}};
  for (const ArmRequest& request : requests) inputs.push_back({request.overlay, "the overlay of arm " + request.name});
  check_report_files(o.files, inputs);
  StagingDirectory staging;
  std::vector<PreparedArm> prepared;
  try {
    prepared = prepare_arms(o.base, requests, staging.path);
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
  manifest.shard_index = shard_index;
  manifest.shard_count = shard_count;

  const std::string directory = o.results.empty() ? default_results_directory(manifest) : o.results;
  ResultsDir results(directory);
  if (results.has_manifest()) {
    const std::string mismatch = manifest_mismatch(manifest, results.read_manifest(), false);
    if (!mismatch.empty())
      throw Error(results.root() + ": this results directory holds results of " + mismatch +
                  "; give another --results directory, or delete this one to start again");
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
  log->info("ab starting suite={} models={} arms={} repeat={} shard={}/{} items={} of {} results={}", suite.name,
            suite.entries.size(), requests.size(), o.repeat, shard_index, shard_count, items.size(), all.size(),
            results.root());
  RunnerOptions runner;
  runner.tessera = self_executable();
  runner.lock_path = o.lock.empty() ? results.absolute("device.lock") : o.lock;
  runner.retry_failed = o.retry_failed;
  const RunnerStats stats = run_work(manifest, results, items, runner);

  const Analysis analysis = analyse(manifest, results.read_all_records(), o.alpha);
  DriverStats driver;
  driver.command = "ab";
  driver.results = results.root();
  driver.child_wall_ms = stats.child_wall_ms;
  driver.executed = stats.executed;
  driver.skipped = stats.skipped;
  driver.stale = stats.stale;
  driver.failed = stats.failed;
  driver.runs = stats.runs;
  const ReportFiles beside{results.absolute("report.json"), results.absolute("report.csv"), results.absolute("report.md"),
                           results.absolute("report.html")};
  return finish(analysis, driver, o.files, beside, o.quiet, start);
}

int run_merge(AbCommand& o) {
  const auto start = std::chrono::steady_clock::now();
  if (o.merge_directories.empty()) throw Error("tessera ab merge: name the results directories to join");
  auto log = logger("tessera.ab");
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
  return finish(analysis, driver, o.files, ReportFiles{}, o.quiet, start);
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
  o.ab->add_option("--shard", o.shard, "i/N: do every N-th work item from the i-th (join shards with `tessera ab merge`)");
  o.ab->add_option("--results", o.results, "results directory; rerunning resumes it (default: ab-results/SUITE-HASH)");
  o.ab->add_option("--lock", o.lock, "device lock file for the simulator runs (default: in the results directory)");
  o.ab->add_flag("--retry-failed", o.retry_failed, "redo stored work items whose compile or run failed");
  add_report_options(*o.ab, o);

  o.merge = o.ab->add_subcommand("merge", "join results directories of shards of one A/B run and report them");
  o.merge->add_option("directories", o.merge_directories, "results directories (same suite, arms and tessera build)")
      ->required()
      ->check(CLI::ExistingDirectory);
  add_report_options(*o.merge, o);
  return command;
}

bool ab_command_chosen(const AbCommand& command) { return command.ab && command.ab->parsed(); }

int run_ab_command(AbCommand& command) { return command.merge->parsed() ? run_merge(command) : run_ab(command); }

}  // namespace tessera::cli
