// The A/B work loop: every compile and run is a separate `tessera` process, measured by wait4.
#include "runner.hpp"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "executor_local.hpp"
#include "key_values.hpp"
#include "subprocess.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string utc_now() { return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr))); }

// Per-phase horizon and bounds from the compile log, transfers and words from the phase files
// (`--emit-phases`), and the strongest lower bound recomputed by the core for the target.
std::vector<PhaseRecord> collect_phases(const std::string& log_text, const std::string& phase_directory,
                                        const Target& target) {
  std::vector<PhaseRecord> phases;
  std::istringstream lines(log_text);
  const std::string marker = "optimized physical exchange schedule ";
  for (std::string line; std::getline(lines, line);) {
    const std::size_t at = line.find(marker);
    if (at == std::string::npos) continue;
    const auto fields = parse_key_values(line.substr(at + marker.size()));
    const auto phase = field_uint(fields, "phase"), horizon = field_uint(fields, "selected_horizon");
    const auto endpoint = field_uint(fields, "endpoint_lower_bound"), gap = field_uint(fields, "lower_bound_gap");
    if (!phase || !horizon || !endpoint) continue;
    PhaseRecord record;
    record.phase = static_cast<std::uint32_t>(*phase);
    record.horizon = *horizon;
    record.endpoint_lower_bound = *endpoint;
    record.lower_bound = gap && *gap <= *horizon ? *horizon - *gap : *endpoint;
    const fs::path file = fs::path(phase_directory) / ("phase-" + std::to_string(record.phase) + ".txt");
    if (fs::exists(file)) {
      const ExchangePhase exchange = read_phase_file(file.string());
      record.transfers = exchange.transfers.size();
      for (const Transfer& transfer : exchange.transfers) record.words += transfer.words;
      record.lower_bound = lower_bound(exchange, target);
    }
    phases.push_back(record);
  }
  return phases;
}

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
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
  std::map<std::size_t, Target> targets;  // per suite entry, for the phases' lower bounds
  for (std::size_t index = 0; index < items.size(); ++index) {
    const WorkItem& item = items[index];
    const SuiteEntry& entry = manifest.entries[item.entry];
    const ArmInfo& arm = manifest.arms[item.arm];
    const std::string progress = fmt::format("item={}/{} model={} arm={} repeat={}", index + 1, items.size(), entry.id,
                                             arm.name, item.repeat);
    if (auto stored = results.read_record(entry.id, arm.name, item.repeat)) {
      if (!record_matches(*stored, manifest, entry.id, arm.name, item.repeat)) {
        log->warn("redoing a stored record made for another suite, arm or tessera build {} path={}", progress,
                  results.record_path(entry.id, arm.name, item.repeat));
        ++stats.stale;
      } else if (!(options.retry_failed && stored->failed())) {
        ++stats.skipped;
        log->info("skipping finished ab item {}", progress);
        continue;
      }
    }

    const fs::path item_path = fs::path(entry.id) / arm.name;
    const std::string stem = "repeat-" + std::to_string(item.repeat);
    const fs::path logs = fs::path(results.root()) / "logs" / item_path;
    const fs::path package = fs::path(results.root()) / "packages" / item_path / (stem + ".tpkg");
    const fs::path phases = fs::path(results.root()) / "phases" / item_path / stem;
    fs::create_directories(logs);
    fs::create_directories(package.parent_path());
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
    record.compile.process = run_process({options.tessera, "--log-level", "info", "compile", entry.model, "-p",
                                          results.absolute(arm.pipeline), "-t", entry.target, "-o", package.string(),
                                          "--emit-phases", phases.string()},
                                         compile_out, compile_err);
    record.compile.process.log = results.relative(compile_err);
    stats.child_wall_ms += record.compile.process.wall_ms;
    ++stats.executed;

    const std::string compiled = read_text(compile_out);
    const auto result = find_key_values(compiled, "scheduled_exchange_cycles=");
    if (record.compile.process.succeeded() && result.empty()) {
      record.compile.process.exit_code = 1;  // exited 0 without its result line: not a usable compile
      record.compile.process.error = "no result line on stdout: " + compiled.substr(0, 400);
    } else if (!record.compile.process.succeeded()) {
      record.compile.process.error = error_excerpt(compile_err, 6);
    }
    if (record.compile.process.succeeded()) {
      CompileRecord& c = record.compile;
      c.compile_ms = static_cast<std::int64_t>(field_uint(result, "compile_ms").value_or(0));
      c.supersteps = field_uint(result, "supersteps").value_or(0);
      c.estimated_cycles = field_uint(result, "estimated_cycles").value_or(0);
      c.estimated_exchange_cycles = field_uint(result, "estimated_exchange_cycles").value_or(0);
      c.scheduled_exchange_cycles = field_uint(result, "scheduled_exchange_cycles").value_or(0);
      c.exchange_lower_bound = field_uint(result, "exchange_lower_bound").value_or(0);
      c.peak_tile_bytes = field_uint(result, "peak_tile_bytes").value_or(0);
      c.package_hash = hash_file(package.string());
      if (item.repeat == 0) {  // phases are deterministic: the drill-down reads repeat 0 only
        if (!targets.count(item.entry)) targets.emplace(item.entry, load_target(entry.target));
        c.phases = collect_phases(read_text(compile_err), phases.string(), targets.at(item.entry));
      }
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
        record.run.performed = true;
        const MemoryReservation reserved = reserve_run(options.memory, results, manifest, entry, targets.at(item.entry));
        std::vector<std::string> run = {options.tessera, "--log-level", "info", "run", package.string()};
        if (!options.lock_path.empty()) run.insert(run.end(), {"--lock", options.lock_path});  // else the node's default
        record.run.process = run_process(run, run_out, run_err);
        record.run.process.log = results.relative(run_err);
        stats.child_wall_ms += record.run.process.wall_ms;
        ++stats.runs;
        const std::string ran = read_text(run_out);
        const auto cycles = find_key_values(ran, "device_cycles=");
        record.run.device_cycles = field_uint(cycles, "device_cycles").value_or(0);
        record.run.compute_cycles = field_uint(cycles, "compute_cycles").value_or(0);
        record.run.exchange_cycles = field_uint(cycles, "exchange_cycles").value_or(0);
        record.run.sync_cycles = field_uint(cycles, "sync_cycles").value_or(0);
        const auto numerics = find_key_values(ran, "numericalTest=");
        if (auto found = numerics.find("numericalTest"); found != numerics.end()) record.run.numerical_test = found->second;
        record.run.max_abs_error = field_number(numerics, "referenceMaximumAbsoluteError").value_or(0);
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
    if (record.failed()) {
      ++stats.failed;
      log->warn("ab item failed {} compile_exit={} run_exit={} log={}", progress, record.compile.process.exit_code,
                record.run.process.exit_code,
                record.compile.process.succeeded() ? record.run.process.log : record.compile.process.log);
    } else {
      const std::string run = record.run.performed ? fmt::format(" device_cycles={}", record.run.device_cycles)
                              : record.run.unchanged ? std::string(" unchanged=true")
                                                     : std::string();
      log->info("finished ab item {} compile_wall_ms={:.0f} compile_peak_rss_kib={} package_hash={}{}", progress,
                record.compile.process.wall_ms, record.compile.process.peak_rss_kib, record.compile.package_hash, run);
    }
  }
  return stats;
}

}  // namespace tessera::ab
