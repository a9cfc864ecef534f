// The Slurm executor: a prepared results directory swept by a job array (one task per group of
// whole models) and a merge-and-report job after it; status and resubmission of what is left.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "results.hpp"

namespace tessera::ab {

/// sbatch options passed through; empty ones are left to the site's defaults.
struct SlurmOptions {
  std::string partition, time, mem, account;
  std::uint32_t tasks = 0;  ///< array tasks; 0 = one per model
  bool hold = false;        ///< submit held (release with `scontrol release JOB`)
};

/// One sbatch submission, recorded in DIR/slurm/submissions.json.
struct Submission {
  std::uint32_t number = 0;  ///< 1-based; its files are under DIR/slurm/submission-N/
  std::string array_job, report_job;
  std::vector<std::vector<std::string>> tasks;  ///< the model ids of each array task (task i at [i-1])
  bool retry_failed = false;
  std::string lock;  ///< --lock given to the tasks ("" = each node's default)
  SlurmOptions options;
  std::string submitted_at;
};

std::vector<Submission> read_submissions(const ResultsDir& results);

/// Writes the job scripts and submits the array over `models` (suite entry ids) and the
/// report job (`afterany` on the array); records and returns the submission.
Submission submit_sweep(const ResultsDir& results, const Manifest& manifest, const std::vector<std::string>& models,
                        const SlurmOptions& options, bool retry_failed, const std::string& lock,
                        const std::string& tessera);

/// The work items of array task `task` (1-based) of `submission`, in plan order.
std::vector<WorkItem> task_items(const Manifest& manifest, const Submission& submission, std::uint32_t task);

/// An item's state: "done", "failed", "running", "pending" (its task is queued) or "missing".
struct ItemState {
  std::string model, arm;
  std::uint32_t repeat = 0;
  std::string state;
};

/// Every planned item's state from the records and, for items without one, `squeue`.
std::vector<ItemState> item_states(const ResultsDir& results, const Manifest& manifest);

/// Ended array tasks by state per submission ("COMPLETED=2 CANCELLED=1"), from `sacct`
/// (accounting) or `sacct -c` (a job-completion file); "" when neither answers.
std::string ended_tasks(const ResultsDir& results, const Submission& submission);

/// The queued (pending or running) jobs of `submissions`, as "JOB STATE" lines.
/// Refuses (Error naming the option) an sbatch value outside a safe alphabet (letters, digits,
/// - _ . : , @ + =): none may add an option, a line or a shell word to a submission.
void check_sbatch_options(const SlurmOptions& options);

std::vector<std::string> queued_jobs(const std::vector<Submission>& submissions);

}  // namespace tessera::ab
