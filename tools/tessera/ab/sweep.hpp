// One A/B sweep as `tessera ab` and `tessera tune` run it: arms prepared and checked, a results
// directory, an executor (this machine or a Slurm job array), and the reports at the end.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "arms.hpp"
#include "executor_slurm.hpp"
#include "report.hpp"
#include "results.hpp"
#include "runner.hpp"
#include "suite.hpp"
#include "tessera/output_file.hpp"

namespace CLI {
class App;
}

namespace tessera::ab {

class History;

struct ReportFiles {
  std::string json, csv, markdown, html;
};

/// The report options of `tessera ab` and `tessera tune`.
struct ReportOptions {
  ReportFiles files;
  double alpha = 0.05;
  bool quiet = false;
  std::string history_file;  ///< --history; "" = default_history_path()
};

void add_report_options(CLI::App& command, ReportOptions& options);
void add_history_option(CLI::App& command, std::string& history_file);
/// Opened before any work, so a bad --history fails at once and not after the sweep.
History open_history(const ReportOptions& options);

/// Refuses report files that are one of `inputs` or not regular files, before any work.
void check_report_files(const ReportFiles& files, const std::vector<InputFile>& inputs);
/// report.{json,csv,md,html} inside the results directory.
ReportFiles beside_results(const ResultsDir& results);

struct ExecutorOptions {
  std::string executor = "local";  ///< "local" or "slurm"
  unsigned jobs = 1;               ///< local: items in parallel
  SlurmOptions slurm;
  std::string lock;  ///< device lock for simulator runs ("" = per results directory or node)
};

void add_executor_options(CLI::App& command, ExecutorOptions& options);

/// Throws Error for an unknown executor or --jobs 0.
void check_executor(const ExecutorOptions& options);

struct SweepRequest {
  std::string base;  ///< the base pipeline file
  Suite suite;
  std::vector<ArmRequest> arms;  ///< the first is the baseline
  std::uint32_t repeat = 3, warmup = 0, threads = 0;
  std::uint32_t shard_index = 1, shard_count = 1;
  std::string results;  ///< "" = default_results_directory()
};

struct PreparedSweep {
  Manifest manifest;
  std::string results;          ///< the results directory's root
  std::vector<WorkItem> items;  ///< this shard's, in plan order
  std::size_t planned = 0;      ///< every shard's
};

/// Merges and checks every arm (Error naming the arm before any item runs), then opens the
/// results directory: a new one, or the same sweep's (resumed: records of changed inputs are
/// redone), and writes its manifest and arm pipelines. Throws Error for another sweep's folder,
/// a non-empty foreign folder or one with a Slurm job still queued.
PreparedSweep prepare_sweep(const SweepRequest& request);

/// Runs `items` on this machine with a progress line on stderr; `fresh` redoes stored ones too.
RunnerStats run_locally(const ExecutorOptions& options, const Manifest& manifest, const ResultsDir& results,
                        const std::vector<WorkItem>& items, bool retry_failed, bool fresh = false);

/// Submits `models` of a prepared sweep as a job array and a report job; sbatch options from
/// the command line first, then `suite_defaults`. Prints the job ids and how to follow them.
Submission submit_to_slurm(const ExecutorOptions& options, const SuiteSlurm& suite_defaults, const ResultsDir& results,
                           const Manifest& manifest, const std::vector<std::string>& models, bool retry_failed);

/// Blocks until none of the results directory's Slurm jobs is queued any more, polling squeue.
void wait_for_slurm(const ResultsDir& results);

/// $XDG_CACHE_HOME/tessera (else ~/.cache/tessera, else $TMPDIR/tessera): default results
/// folders live there, outside any source tree.
std::string cache_root();

/// The ids of the manifest's suite entries, in suite order.
std::vector<std::string> model_ids(const Manifest& manifest);

DriverStats driver_stats(const std::string& command, const ResultsDir& results, const RunnerStats& stats);

/// Writes the reports (beside the results and the extra files asked for), records the sweep in
/// `history`, prints the terminal table unless `quiet`, and returns 1 when items failed.
int finish_sweep(const Analysis& analysis, DriverStats driver, const ReportFiles& extra, const ReportFiles& beside,
                 bool quiet, std::chrono::steady_clock::time_point start, History& history);

}  // namespace tessera::ab
