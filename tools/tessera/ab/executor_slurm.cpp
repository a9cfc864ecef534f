// Submits an A/B sweep to Slurm: job scripts that run `tessera ab task` on the prepared results
// directory, sbatch for the array and the report job, and the queue's view for `ab status`.
#include "executor_slurm.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fingerprint.hpp"
#include "runner.hpp"
#include "subprocess.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/yaml_text.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace tessera::ab {

namespace {

constexpr std::uint64_t kMaxSubmissionsBytes = std::uint64_t{16} << 20;

std::string submissions_path(const ResultsDir& results) { return results.absolute("slurm/submissions.json"); }

// Ties the jobs to this results directory, for `sacct -c`, which knows no job arrays.
std::string job_name(const ResultsDir& results, std::uint32_t submission) {
  return "tessera-ab-" + hash_text(results.root()).substr(0, 8) + "-" + std::to_string(submission);
}

json to_json(const Submission& s) {
  return {{"number", s.number},
          {"array_job", s.array_job},
          {"report_job", s.report_job},
          {"tasks", s.tasks},
          {"retry_failed", s.retry_failed},
          {"lock", s.lock},
          {"sbatch",
           {{"partition", s.options.partition},
            {"time", s.options.time},
            {"mem", s.options.mem},
            {"account", s.options.account},
            {"hold", s.options.hold}}},
          {"submitted_at", s.submitted_at}};
}

Submission submission_from(const json& j) {
  Submission s;
  s.number = j.at("number").get<std::uint32_t>();
  s.array_job = j.at("array_job").get<std::string>();
  s.report_job = j.at("report_job").get<std::string>();
  s.tasks = j.at("tasks").get<std::vector<std::vector<std::string>>>();
  s.retry_failed = j.at("retry_failed").get<bool>();
  s.lock = j.at("lock").get<std::string>();
  const json& o = j.at("sbatch");
  s.options.partition = o.at("partition").get<std::string>();
  s.options.time = o.at("time").get<std::string>();
  s.options.mem = o.at("mem").get<std::string>();
  s.options.account = o.at("account").get<std::string>();
  s.options.hold = o.at("hold").get<bool>();
  s.submitted_at = j.at("submitted_at").get<std::string>();
  return s;
}

// A word for /bin/sh, single-quoted.
std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The one word the shell expands: everything else, paths and --lock included, is a quoted literal.
constexpr const char* kArrayTaskId = "$SLURM_ARRAY_TASK_ID";

std::string script(const std::vector<std::string>& command) {
  std::string line = "exec";
  for (const std::string& word : command) line += " " + (word == kArrayTaskId ? "\"" + word + "\"" : shell_quote(word));
  return "#!/bin/sh\n# Written by tessera ab for Slurm; the paths are absolute because the job may start anywhere.\n" +
         line + "\n";
}

// sbatch's values come from the command line, the suite or a results folder: a safe alphabet,
// so none can smuggle another option, a line or a shell word into the submission.
void check_sbatch_value(const std::string& name, const std::string& value) {
  for (char c : value)
    if (!(std::isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("-_.:,@+=").find(c) != std::string_view::npos))
      throw Error("sbatch --" + name + " " + echoed_token(value) +
                  ": use letters, digits and - _ . : , @ + = only (as Slurm's own names and times do)");
}

std::vector<std::string> sbatch_options(const SlurmOptions& o) {
  check_sbatch_options(o);
  std::vector<std::string> args;
  if (!o.partition.empty()) args.push_back("--partition=" + o.partition);
  if (!o.time.empty()) args.push_back("--time=" + o.time);
  if (!o.account.empty()) args.push_back("--account=" + o.account);
  return args;
}

// sbatch --parsable prints "JOBID" or "JOBID;CLUSTER".
std::string submit(std::vector<std::string> command, const std::string& what) {
  command.insert(command.begin(), {"sbatch", "--parsable"});
  const CapturedOutput out = run_captured(command);
  const std::string id = out.out.substr(0, out.out.find_first_of(";\n"));
  if (out.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    std::string why = out.err.empty() ? out.out : out.err;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    throw Error(
        "sbatch refused the " + what + " (exit " + std::to_string(out.exit_code) + "): " + why +
        "; check --partition, --time, --mem and --account against `sinfo`, and that SLURM_CONF names your cluster");
  }
  return id;
}

void write_submissions(const ResultsDir& results, const std::vector<Submission>& all) {
  json list = json::array();
  for (const Submission& each : all) list.push_back(to_json(each));
  results.folder("slurm").write_file("submissions.json", json{{"submissions", list}}.dump(2) + "\n",
                                     "Slurm submissions");
}

}  // namespace

void check_sbatch_options(const SlurmOptions& o) {
  check_sbatch_value("partition", o.partition);
  check_sbatch_value("time", o.time);
  check_sbatch_value("mem", o.mem);
  check_sbatch_value("account", o.account);
}

std::vector<Submission> read_submissions(const ResultsDir& results) {
  const std::string path = submissions_path(results);
  std::vector<Submission> all;
  if (!fs::exists(path)) return all;
  try {
    const json list = json::parse(read_bounded_file(path, "the list of Slurm submissions", kMaxSubmissionsBytes));
    for (const json& j : list.at("submissions")) all.push_back(submission_from(j));
  } catch (const std::exception& e) {
    throw Error(path + ": corrupt list of Slurm submissions (" + e.what() +
                "); it is rewritten by the next submission");
  }
  return all;
}

Submission submit_sweep(const ResultsDir& results, const Manifest& manifest, const std::vector<std::string>& models,
                        const SlurmOptions& options, bool retry_failed, const std::string& lock,
                        const std::string& tessera) {
  if (models.empty()) throw Error("tessera ab: nothing to submit to Slurm");
  std::vector<Submission> all = read_submissions(results);
  Submission s;
  s.number = static_cast<std::uint32_t>(all.size() + 1);
  s.retry_failed = retry_failed;
  s.lock = lock;
  s.options = options;
  s.submitted_at = fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));
  // Whole models per task, in suite order: a model's arms and its twin compile on one node.
  const std::size_t count = std::min<std::size_t>(options.tasks == 0 ? models.size() : options.tasks, models.size());
  for (std::size_t task = 0; task < count; ++task)
    s.tasks.emplace_back(models.begin() + static_cast<std::ptrdiff_t>(task * models.size() / count),
                         models.begin() + static_cast<std::ptrdiff_t>((task + 1) * models.size() / count));

  const std::string folder_name = "slurm/submission-" + std::to_string(s.number);
  const OwnedFolder submission_folder = results.folder(folder_name);
  const fs::path folder = submission_folder.path();
  // -v: a job's output file is its log, read when something went wrong (sbatch --output).
  std::vector<std::string> task = {
      tessera, "-v", "ab", "task", results.root(), "--submission", std::to_string(s.number), "--task", kArrayTaskId};
  if (retry_failed) task.push_back("--retry-failed");
  if (!lock.empty()) task.insert(task.end(), {"--lock", lock});
  const std::string sweep_script = (folder / "sweep.sh").string(), report_script = (folder / "report.sh").string();
  submission_folder.write_file("sweep.sh", script(task), "Slurm job script");
  submission_folder.write_file("report.sh", script({tessera, "-v", "ab", "report", results.root(), "--quiet"}),
                               "Slurm job script");
  const std::string name = job_name(results, s.number);

  // Recorded before sbatch: a task may start, and look its models up, before sbatch returns.
  all.push_back(s);
  write_submissions(results, all);
  all.pop_back();
  std::vector<std::string> array = sbatch_options(options);
  array.insert(array.end(), {"--job-name=" + name, fmt::format("--array=1-{}", count), "--chdir=" + results.root(),
                             "--output=" + (folder / "task-%a.out").string()});
  if (!options.mem.empty()) array.push_back("--mem=" + options.mem);
  if (options.hold) array.push_back("--hold");
  array.push_back(sweep_script);
  try {
    s.array_job = submit(array, "job array");
  } catch (const Error&) {
    write_submissions(results, all);
    throw;
  }
  std::vector<std::string> report = sbatch_options(options);
  report.insert(report.end(),
                {"--job-name=" + name + "-report", "--dependency=afterany:" + s.array_job, "--chdir=" + results.root(),
                 "--output=" + (folder / "report.out").string(), report_script});
  try {
    s.report_job = submit(report, "report job");
  } catch (const Error&) {
    run_captured({"scancel", s.array_job});  // no sweep without its report: nothing is left running unseen
    write_submissions(results, all);
    throw;
  }
  all.push_back(s);
  write_submissions(results, all);
  logger("tessera.ab")
      ->info("submitted to slurm submission={} array_job={} tasks={} report_job={} models={} results={}", s.number,
             s.array_job, count, s.report_job, models.size(), results.root());
  return s;
}

std::vector<WorkItem> task_items(const Manifest& manifest, const Submission& submission, std::uint32_t task) {
  if (task < 1 || task > submission.tasks.size())
    throw Error(
        fmt::format("--task {}: submission {} has tasks 1 to {}", task, submission.number, submission.tasks.size()));
  const std::set<std::string> models(submission.tasks[task - 1].begin(), submission.tasks[task - 1].end());
  std::vector<WorkItem> items;
  for (const WorkItem& item : plan_work(manifest))
    if (models.count(manifest.entries[item.entry].id)) items.push_back(item);
  return items;
}

std::vector<std::string> queued_jobs(const std::vector<Submission>& submissions) {
  std::string ids;
  for (const Submission& s : submissions) ids += (ids.empty() ? "" : ",") + s.array_job + "," + s.report_job;
  if (ids.empty()) return {};
  const CapturedOutput out = run_captured({"squeue", "-h", "-r", "-j", ids, "-o", "%i %T"});
  // squeue fails on ids the controller has forgotten: then nothing of them is queued.
  std::vector<std::string> lines;
  std::istringstream text(out.exit_code == 0 ? out.out : "");
  for (std::string line; std::getline(text, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<ItemState> item_states(const ResultsDir& results, const Manifest& manifest) {
  const std::vector<Submission> submissions = read_submissions(results);
  // The state of each model's newest task still in the queue.
  std::map<std::string, std::string> queued;  // "ARRAY_TASK" -> state
  for (const std::string& line : queued_jobs(submissions)) {
    const std::size_t space = line.find(' ');
    queued[line.substr(0, space)] = line.substr(space + 1);
  }
  std::map<std::string, std::string> model_state;
  for (const Submission& s : submissions)
    for (std::size_t task = 0; task < s.tasks.size(); ++task) {
      const auto found = queued.find(s.array_job + "_" + std::to_string(task + 1));
      if (found == queued.end()) continue;
      const std::string state = found->second == "RUNNING" || found->second == "COMPLETING" ? "running" : "pending";
      for (const std::string& model : s.tasks[task]) model_state[model] = state;
    }
  std::vector<ItemState> states;
  for (const WorkItem& item : plan_work(manifest)) {
    const std::string& model = manifest.entries[item.entry].id;
    const std::string& arm = manifest.arms[item.arm].name;
    std::string state = model_state.count(model) ? model_state.at(model) : "missing";
    if (auto record = results.read_record(model, arm, item.repeat);
        record && record_matches(*record, manifest, model, arm, item.repeat))
      state = record->failed() ? "failed" : "done";
    states.push_back({model, arm, item.repeat, state});
  }
  return states;
}

std::string ended_tasks(const ResultsDir& results, const Submission& submission) {
  const std::string name = job_name(results, submission.number);
  // Lines "JOBID|NAME|STATE"; a job id below the array's is an older job of the same name.
  const unsigned long first_id = std::strtoul(submission.array_job.c_str(), nullptr, 10);
  auto count = [&](const CapturedOutput& out) {
    std::map<std::string, int> counts;
    std::istringstream text(out.exit_code == 0 ? out.out : "");
    for (std::string line; std::getline(text, line);) {
      std::istringstream fields(line);
      std::string id, job, state;
      if (!std::getline(fields, id, '|') || !std::getline(fields, job, '|') || !std::getline(fields, state)) continue;
      if (job != name || std::strtoul(id.c_str(), nullptr, 10) < first_id) continue;
      ++counts[state.substr(0, state.find(' '))];  // "CANCELLED by 0" -> CANCELLED
    }
    return counts;
  };
  // Full accounting knows array tasks by id; a job-completion file (`sacct -c`) only by name.
  std::map<std::string, int> counts =
      count(run_captured({"sacct", "-n", "-P", "-X", "-o", "JobID,JobName,State", "-j", submission.array_job}));
  if (counts.empty()) counts = count(run_captured({"sacct", "-c", "-n", "-P", "-o", "JobID,JobName,State"}));
  std::string summary;
  for (const auto& [state, number] : counts)
    summary += (summary.empty() ? "" : " ") + fmt::format("{}={}", state, number);
  return summary;
}

}  // namespace tessera::ab
