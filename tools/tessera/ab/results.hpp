// A/B results on disk: the manifest that says what a results directory measures, one record
// per (model, arm, repeat), and the ordered list of work items that sharding splits.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fingerprint.hpp"
#include "suite.hpp"
#include "tessera/output_file.hpp"

namespace tessera::ab {

/// One exchange phase of a compiled package: its schedule's horizon against its bounds.
struct PhaseRecord {
  std::uint32_t phase = 0;  ///< superstep index
  std::uint64_t transfers = 0;
  std::uint64_t words = 0;  ///< words sent (a multicast word counts once)
  std::uint64_t horizon = 0;
  std::uint64_t endpoint_lower_bound = 0;
  std::uint64_t lower_bound = 0;  ///< the strongest bound the core computes for the target
  /// XXH64 of the phase file (--emit-phases: tiles and every transfer's source, destinations
  /// and words): equal hashes, the same exchange problem. "" in records made before it was kept.
  std::string problem_hash;
};

/// A child process as measured by wait4.
struct ProcessRecord {
  std::vector<std::string> command;
  int exit_code = -1;  ///< -1 when killed by a signal
  int signal = 0;
  double wall_ms = 0;
  double user_ms = 0;    ///< CPU time in user mode (wait4's rusage)
  double system_ms = 0;  ///< CPU time in the kernel on its behalf
  std::int64_t peak_rss_kib = 0;
  std::string log;    ///< its stderr, relative to the results directory
  std::string error;  ///< the end of its stderr when it failed
  bool succeeded() const { return exit_code == 0 && signal == 0; }
  /// User + system CPU time: unlike wall time, not stretched by waiting for a busy CPU.
  double cpu_ms() const { return user_ms + system_ms; }
};

struct CompileRecord {
  ProcessRecord process;
  std::int64_t compile_ms = 0;  ///< as the compiler itself reports it
  std::uint64_t supersteps = 0;
  std::uint64_t estimated_cycles = 0;
  std::uint64_t estimated_exchange_cycles = 0;
  std::uint64_t scheduled_exchange_cycles = 0;
  std::uint64_t exchange_lower_bound = 0;
  std::uint64_t peak_tile_bytes = 0;
  std::string package;       ///< relative to the results directory; "" once deleted
  std::string package_hash;  ///< XXH64 of the package file
  std::vector<PhaseRecord> phases;
};

struct RunRecord {
  bool performed = false;
  /// The package equals the baseline arm's, so the baseline's run stands for this one.
  bool unchanged = false;
  ProcessRecord process;
  std::uint64_t device_cycles = 0;
  std::uint64_t compute_cycles = 0;
  std::uint64_t exchange_cycles = 0;
  std::uint64_t sync_cycles = 0;
  std::string numerical_test;  ///< "PASS", "FAIL" or "" when not checked
  double max_abs_error = 0;
};

struct Record {
  std::string model;
  std::string arm;
  std::uint32_t repeat = 0;
  std::string suite_fingerprint;
  std::string arm_fingerprint;
  std::string model_hash, target_hash;  ///< of the suite entry's files when compiled
  BuildIdentity build;
  std::string finished_at;   ///< UTC, ISO 8601
  std::string host;          ///< the machine that compiled it (gethostname)
  double load_average = 0;   ///< the 1-minute load average when the item started (getloadavg)
  std::uint32_t warmup = 0;  ///< discarded warm-up compiles of this model and arm run before it
  CompileRecord compile;
  RunRecord run;

  /// The compile failed, or a run was made and did not produce cycles.
  bool failed() const;
  std::string key() const { return model + "/" + arm + "/" + std::to_string(repeat); }
};

/// A file an arm reads when it compiles, and the XXH64 of its bytes ("absent" when missing).
struct ArmInput {
  std::string path;
  std::string hash;
  bool operator==(const ArmInput&) const = default;
};

/// One arm as run: the name the user gave, its overlay and the merged pipeline file.
struct ArmInfo {
  std::string name;
  std::string overlay;           ///< absolute path, or "" for the base itself
  std::string pipeline;          ///< the merged pipeline, relative to the results directory
  std::string fingerprint;       ///< plugins (names, versions, library hashes), resolved options, inputs
  std::vector<ArmInput> inputs;  ///< plugin libraries and the files path options name
  std::vector<std::string> changes;
  std::string twin_of;  ///< set for the A-vs-A pseudo-arm: the baseline compiled again
};

struct Manifest {
  BuildIdentity build;
  std::string suite_name;
  std::string suite_file;
  std::string suite_fingerprint;
  std::vector<SuiteEntry> entries;
  std::string base_pipeline;
  std::vector<ArmInfo> arms;  ///< the baseline first; the twin of the baseline last
  std::uint32_t repeat = 1;
  std::uint32_t warmup = 0;   ///< --warmup: discarded compiles per model and arm before the measured ones
  std::uint32_t threads = 0;  ///< --threads of every compile (0: the compiler's default, the machine's cores)
  std::uint32_t shard_index = 1, shard_count = 1;

  const ArmInfo& baseline() const { return arms.front(); }
  const ArmInfo* find_arm(const std::string& name) const;
  const SuiteEntry* find_entry(const std::string& id) const;
};

/// Why results made under `other` cannot be mixed with those of `mine` ("" when they can):
/// another suite, other arms (names, order, pipelines) or another tessera build, naming the
/// model, target or arm input file whose contents differ. With `same_repeat`, a different
/// --repeat also counts.
std::string manifest_mismatch(const Manifest& mine, const Manifest& other, bool same_repeat);

/// True when both manifests name the same arms in the same order.
bool same_arm_names(const Manifest& a, const Manifest& b);

/// What differs between the stored manifest `before` and `now` whose arm names are the same:
/// one line per changed arm input, model or target file, or build. Empty when nothing did.
std::vector<std::string> manifest_changes(const Manifest& before, const Manifest& now);

/// Files of `manifest` (models, targets, arm inputs) whose bytes differ from their recorded
/// hash now, one "PATH (was HASH, now HASH)" each.
std::vector<std::string> changed_inputs(const Manifest& manifest);

/// A compile of one suite model with one arm, the `repeat`-th time.
struct WorkItem {
  std::size_t entry = 0;
  std::size_t arm = 0;
  std::uint32_t repeat = 0;
};

/// Every work item in execution order: repeats outermost, then models, then arms. Arms are
/// rotated by one place per repeat, so no arm always compiles first (warm caches, drift).
std::vector<WorkItem> plan_work(const Manifest& manifest);

/// The items of shard `index` of `count` (1-based): every count-th item from the index-th.
std::vector<WorkItem> shard_items(const std::vector<WorkItem>& items, std::uint32_t index, std::uint32_t count);

/// A results directory: manifest.json, records/MODEL/ARM/repeat-R.json, arms/, logs/,
/// packages/, phases/. Records are written atomically as each item finishes.
class ResultsDir {
public:
  /// Refuses (Error) an existing folder that is not the caller's own or that others can write.
  explicit ResultsDir(std::string root);
  const std::string& root() const { return root_; }

  bool has_manifest() const;
  Manifest read_manifest() const;
  void write_manifest(const Manifest& manifest) const;

  std::string record_path(const std::string& model, const std::string& arm, std::uint32_t repeat) const;
  /// The stored record, or nothing when absent or not signed with the user's key (edited, or
  /// written by someone else; `*unsigned_record` says so). A corrupt file is an Error naming it.
  std::optional<Record> read_record(const std::string& model, const std::string& arm, std::uint32_t repeat,
                                    bool* unsigned_record = nullptr) const;
  /// Writes the record atomically with an HMAC-SHA256 under the user's key
  /// (`$XDG_CONFIG_HOME/tessera/ab-records.key`, made 0600 on first use).
  void write_record(const Record& record) const;
  /// Every record stored and signed with the user's key, in path order; others are left out with a warning.
  std::vector<Record> read_all_records() const;
  /// The folder `relative` inside the results folder, created or checked as the caller's own.
  OwnedFolder folder(const std::string& relative) const;

  /// An absolute path for a path relative to the root, and the reverse.
  std::string absolute(const std::string& relative) const;
  std::string relative(const std::string& absolute) const;

private:
  std::string root_;
};

}  // namespace tessera::ab
