// The A/B work loop: every compile and run is a separate `tessera` process, measured by wait4.
#include "runner.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "executor_local.hpp"
#include "progress.hpp"
#include "subprocess.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

namespace {

std::string utc_now() { return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr))); }

// A `--json` document a child wrote, or nothing with the reason in `error` (a child that
// exited 0 without a readable record is not a usable result).
std::optional<nlohmann::json> read_json_record(const std::string& path, const char* schema, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = "no JSON record at " + path;
    return std::nullopt;
  }
  nlohmann::json document = nlohmann::json::parse(in, nullptr, false);
  if (document.is_discarded() || !document.is_object() || document.value("schema", "") != schema) {
    error = path + ": not a " + std::string(schema) + " JSON record";
    return std::nullopt;
  }
  return document;
}

std::uint64_t uint_field(const nlohmann::json& document, const char* key) {
  const auto found = document.find(key);
  return found != document.end() && found->is_number_unsigned() ? found->get<std::uint64_t>() : 0;
}

// Per-phase transfers, words, horizon and bounds from the compile's schedule remarks, and the
// hash of each phase's file in `folder` (--emit-phases), which says whether two arms' phases are one problem.
std::vector<PhaseRecord> collect_phases(const nlohmann::json& compiled, const fs::path& folder) {
  std::vector<PhaseRecord> phases;
  for (const nlohmann::json& schedule : compiled.value("schedules", nlohmann::json::array())) {
    PhaseRecord record;
    record.phase = static_cast<std::uint32_t>(uint_field(schedule, "phase"));
    record.transfers = uint_field(schedule, "transfers");
    record.words = uint_field(schedule, "words");
    record.horizon = uint_field(schedule, "horizon");
    record.endpoint_lower_bound = uint_field(schedule, "endpoint_lower_bound");
    record.lower_bound = uint_field(schedule, "lower_bound");
    const fs::path file = folder / phase_file_name(record.phase);
    if (fs::exists(file)) record.problem_hash = hash_file(file.string());
    phases.push_back(record);
  }
  return phases;
}

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

std::string host_name() {
  char name[256] = {};
  return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string("unknown");
}

// The 1-minute load average: how busy the machine was when a timing was taken.
double load_average_now() {
  double loads[1] = {0};
  return ::getloadavg(loads, 1) == 1 ? loads[0] : -1.0;
}

}  // namespace

bool record_matches(const Record& record, const Manifest& manifest, const std::string& model, const std::string& arm,
                    std::uint32_t repeat) {
  const ArmInfo* info = manifest.find_arm(arm);
  const SuiteEntry* entry = manifest.find_entry(model);
  // Per model, not per suite: a changed model file redoes that model's items only.
  return info && entry && record.model == model && record.arm == arm && record.repeat == repeat &&
         record.model_hash == entry->model_hash && record.target_hash == entry->target_hash &&
         record.arm_fingerprint == info->fingerprint && record.build == manifest.build;
}

RunnerStats run_work(const Manifest& manifest, const ResultsDir& results, const std::vector<WorkItem>& items,
                     const RunnerOptions& options) {
  auto log = logger("tessera.ab");
  RunnerStats stats;
  std::map<std::size_t, Target> targets;                 // per suite entry, for a run's expected peak memory
  std::set<std::pair<std::size_t, std::size_t>> warmed;  // (entry, arm) pairs whose warm-up compiles ran
  const std::string host = host_name();
  for (std::size_t index = 0; index < items.size(); ++index) {
    const WorkItem& item = items[index];
    const SuiteEntry& entry = manifest.entries[item.entry];
    const ArmInfo& arm = manifest.arms[item.arm];
    const std::string progress =
        fmt::format("item={}/{} model={} arm={} repeat={}", index + 1, items.size(), entry.id, arm.name, item.repeat);
    bool unsigned_record = false;
    if (auto stored = results.read_record(entry.id, arm.name, item.repeat, &unsigned_record)) {
      if (!record_matches(*stored, manifest, entry.id, arm.name, item.repeat)) {
        log->warn("redoing a stored record made for another suite, arm or tessera build {} path={}", progress,
                  results.record_path(entry.id, arm.name, item.repeat));
        ++stats.stale;
      } else if (!options.fresh && !(options.retry_failed && stored->failed())) {
        ++stats.skipped;
        log->info("skipping finished ab item {}", progress);
        if (options.progress) options.progress->item_finished(false, false);
        continue;
      }
    } else if (unsigned_record) {
      log->warn(
          "redoing a stored record that does not carry your signature (edited, or written by another user) {} "
          "path={}",
          progress, results.record_path(entry.id, arm.name, item.repeat));
      ++stats.stale;
    }

    const fs::path item_path = fs::path(entry.id) / arm.name;
    const std::string stem = "repeat-" + std::to_string(item.repeat);
    const fs::path logs = fs::path(results.root()) / "logs" / item_path;
    const fs::path package = fs::path(results.root()) / "packages" / item_path / (stem + ".tpkg");
    const fs::path phases = fs::path(results.root()) / "phases" / item_path / stem;
    // Made (or checked) as ours: a planted symlink among them would redirect what the children write.
    const OwnedFolder log_folder = results.folder("logs/" + item_path.string());
    results.folder("packages/" + item_path.string());
    remove_quietly(phases);  // an interrupted attempt may have left phases of another schedule

    Record record;
    record.model = entry.id;
    record.arm = arm.name;
    record.repeat = item.repeat;
    record.suite_fingerprint = manifest.suite_fingerprint;
    record.arm_fingerprint = arm.fingerprint;
    record.model_hash = entry.model_hash;
    record.target_hash = entry.target_hash;
    record.build = manifest.build;

    const std::string compile_out = (logs / (stem + ".compile.out")).string();
    const std::string compile_err = (logs / (stem + ".compile.log")).string();
    const std::string compile_json = (logs / (stem + ".compile.json")).string();
    auto compile_command = [&](const std::string& output, const std::string& phase_folder, const std::string& json) {
      std::vector<std::string> command{options.tessera,
                                       "--log-level",
                                       "info",
                                       "compile",
                                       entry.model,
                                       "-p",
                                       results.absolute(arm.pipeline),
                                       "-t",
                                       entry.target,
                                       "-o",
                                       output,
                                       "--emit-phases",
                                       phase_folder,
                                       "--json",
                                       json};
      if (manifest.threads > 0) command.insert(command.end(), {"--threads", std::to_string(manifest.threads)});
      return command;
    };
    // Warm-up compiles (page cache, plugin libraries, CPU frequency) are made and thrown away.
    if (manifest.warmup > 0 && warmed.insert({item.entry, item.arm}).second) {
      const fs::path scratch = logs / "warmup";
      log_folder.folder("warmup");
      for (std::uint32_t k = 0; k < manifest.warmup; ++k) {
        const ProcessRecord warm =
            run_process(compile_command((scratch / "package.tpkg").string(), (scratch / "phases").string(),
                                        (scratch / "compile.json").string()),
                        (logs / "warmup.compile.out").string(), (logs / "warmup.compile.log").string());
        stats.child_wall_ms += warm.wall_ms;
        ++stats.warmups;
        log->info("warm-up compile {}/{} model={} arm={} wall_ms={:.0f} cpu_ms={:.0f} exit={}", k + 1, manifest.warmup,
                  entry.id, arm.name, warm.wall_ms, warm.cpu_ms(), warm.exit_code);
      }
      remove_quietly(scratch);
    }
    record.host = host;
    record.load_average = load_average_now();
    record.warmup = manifest.warmup;
    remove_quietly(compile_json);  // a record left by an earlier attempt is not this compile's
    record.compile.process =
        run_process(compile_command(package.string(), phases.string(), compile_json), compile_out, compile_err);
    record.compile.process.log = results.relative(compile_err);
    stats.child_wall_ms += record.compile.process.wall_ms;
    ++stats.executed;

    std::optional<nlohmann::json> compiled;
    if (record.compile.process.succeeded()) {
      compiled = read_json_record(compile_json, "tessera.compile/1", record.compile.process.error);
      if (!compiled) record.compile.process.exit_code = 1;  // exited 0 without its record: not a usable compile
    } else {
      record.compile.process.error = error_excerpt(compile_err, 6);
    }
    if (compiled) {
      CompileRecord& c = record.compile;
      c.compile_ms = static_cast<std::int64_t>(uint_field(*compiled, "compile_ms"));
      c.supersteps = uint_field(*compiled, "supersteps");
      c.estimated_cycles = uint_field(*compiled, "estimated_cycles");
      c.estimated_exchange_cycles = uint_field(*compiled, "estimated_exchange_cycles");
      c.scheduled_exchange_cycles = uint_field(*compiled, "scheduled_exchange_cycles");
      c.exchange_lower_bound = uint_field(*compiled, "exchange_lower_bound");
      c.peak_tile_bytes = uint_field(*compiled, "peak_tile_bytes");
      c.package_hash = hash_file(package.string());
      if (item.repeat == 0)
        c.phases = collect_phases(*compiled, phases);  // deterministic: the drill-down reads repeat 0
      c.package = results.relative(package.string());
    }

    // Cycles are deterministic: one run per arm and model, at repeat 0.
    if (record.compile.process.succeeded() && item.repeat == 0) {
      const ArmInfo& baseline = manifest.baseline();
      std::optional<Record> reference;
      if (arm.name != baseline.name) reference = results.read_record(entry.id, baseline.name, 0);
      if (reference && record_matches(*reference, manifest, entry.id, baseline.name, 0) &&
          reference->compile.package_hash == record.compile.package_hash && reference->run.performed &&
          !reference->failed()) {
        record.run.unchanged = true;
        log->info("package identical to the baseline's, not run again {} package_hash={}", progress,
                  record.compile.package_hash);
      } else {
        const std::string run_out = (logs / (stem + ".run.out")).string();
        const std::string run_err = (logs / (stem + ".run.log")).string();
        const std::string run_json = (logs / (stem + ".run.json")).string();
        remove_quietly(run_json);
        record.run.performed = true;
        if (!targets.count(item.entry)) targets.emplace(item.entry, load_target(entry.target));
        const MemoryReservation reserved =
            reserve_run(options.memory, results, manifest, entry, targets.at(item.entry));
        std::vector<std::string> run = {options.tessera,  "--log-level", "info",  "run",
                                        package.string(), "--json",      run_json};
        if (!options.lock_path.empty())
          run.insert(run.end(), {"--lock", options.lock_path});  // else the node's default
        record.run.process = run_process(run, run_out, run_err);
        record.run.process.log = results.relative(run_err);
        stats.child_wall_ms += record.run.process.wall_ms;
        ++stats.runs;
        std::string unread;
        if (const auto ran = read_json_record(run_json, "tessera.run/1", unread)) {
          record.run.device_cycles = uint_field(*ran, "device_cycles");
          record.run.compute_cycles = uint_field(*ran, "compute_cycles");
          record.run.exchange_cycles = uint_field(*ran, "exchange_cycles");
          record.run.sync_cycles = uint_field(*ran, "sync_cycles");
          if (const auto numerics = ran->find("numerics"); numerics != ran->end() && numerics->is_object()) {
            record.run.numerical_test = numerics->value("passed", false) ? "PASS" : "FAIL";
            record.run.max_abs_error = numerics->value("max_abs_error", 0.0);
          }
        }
        if (!record.run.process.succeeded() || record.run.device_cycles == 0)
          record.run.process.error = error_excerpt(run_err, 6);
      }
    }

    // Only repeat 0 keeps its package and phase files: later repeats only time the compile.
    if (item.repeat != 0) {
      remove_quietly(package);
      remove_quietly(phases);
      record.compile.package.clear();
    }
    record.finished_at = utc_now();
    results.write_record(record);
    if (options.progress) options.progress->item_finished(true, record.failed());
    if (record.failed()) {
      ++stats.failed;
      log->warn("ab item failed {} compile_exit={} run_exit={} log={}", progress, record.compile.process.exit_code,
                record.run.process.exit_code,
                record.compile.process.succeeded() ? record.run.process.log : record.compile.process.log);
    } else {
      const std::string run = record.run.performed   ? fmt::format(" device_cycles={}", record.run.device_cycles)
                              : record.run.unchanged ? std::string(" unchanged=true")
                                                     : std::string();
      log->info(
          "finished ab item {} compile_wall_ms={:.0f} compile_cpu_ms={:.0f} compile_peak_rss_kib={} host={} "
          "load_average={:.2f} package_hash={}{}",
          progress, record.compile.process.wall_ms, record.compile.process.cpu_ms(),
          record.compile.process.peak_rss_kib, record.host, record.load_average, record.compile.package_hash, run);
    }
  }
  return stats;
}

}  // namespace tessera::ab
