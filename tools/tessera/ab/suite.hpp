// A/B suites: the models and targets every arm is compiled for (configs/suites/*.yaml).
#pragma once
#include <string>
#include <vector>

namespace tessera::ab {

struct SuiteEntry {
  std::string id;           ///< unique in the suite: `name`, or "<model stem>@<target stem>"
  std::string model;        ///< absolute path
  std::string target;       ///< absolute path
  std::string model_hash;   ///< XXH64 of the model file
  std::string target_hash;  ///< XXH64 of the target file
};

/// sbatch defaults a suite may give (`slurm: {partition: P, time: T, mem: M, account: A}`);
/// the command line's options win.
struct SuiteSlurm {
  std::string partition, time, mem, account;
};

struct Suite {
  std::string name;
  std::string file;
  std::vector<SuiteEntry> entries;
  SuiteSlurm slurm;
  /// Hash of the name and every entry's id and file contents: results are comparable only
  /// when it is equal (paths may differ between machines, contents may not).
  std::string fingerprint;
};

/// Loads a suite: `suite: NAME`, `models:` a list of {model: PATH, target: PATH[, name: ID]},
/// paths relative to the suite file, and optionally `slurm:` (SuiteSlurm). Each model and target is loaded by the core
/// to check it. Throws Error with file:line:column.
Suite load_suite(const std::string& path);

/// A name that may become a folder or file name in a results directory and a word in a job
/// script: letters, digits, '-', '_', '.', '@', not starting with '.'.
bool is_safe_name(const std::string& name);

/// The fingerprint of a suite's name and entries (as written into results manifests).
std::string suite_fingerprint(const std::string& name, const std::vector<SuiteEntry>& entries);

}  // namespace tessera::ab
