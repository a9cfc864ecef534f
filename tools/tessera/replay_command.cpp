// `tessera replay BUNDLE`: runs a reproducer bundle's failing plugin again (the format: reproducer.hpp).
#include "replay_command.hpp"

#include <stdlib.h>

#include <filesystem>

#include <fmt/format.h>

#include "compile.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/reproducer.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/session.hpp"
#include "tessera/state_file.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

int replay_schedule(const fs::path& bundle, const ReproducerManifest& manifest, const PluginQuarantine& quarantine) {
  // The scheduler is created exactly as in the compile (so `isolate: process` still contains a
  // crash), minus any fallback: replay must show the plugin's own failure, not a recovery.
  SessionOptions options;
  options.pipeline = (bundle / "pipeline.yaml").string();
  options.quarantine = quarantine;
  options.passes.schedule_budget_ms = manifest.schedule_budget_ms;
  options.scheduler_fallback = false;
  Session session(options);
  warn_about_changed_plugins(manifest, session.host());
  const std::string& plugin = manifest.plugin;
  if (session.spec().exchange_scheduler.plugin != plugin)
    throw Error((bundle / "pipeline.yaml").string() + ": the bundle's failing scheduler is '" + plugin +
                "' but its pipeline uses '" + session.spec().exchange_scheduler.plugin + "' (the bundle is damaged)");
  const Target target = load_target(session.spec().target);
  const ExchangePhase phase = read_phase_file((bundle / "phase.txt").string());
  ScheduleReport report;
  session.scheduler().schedule(phase, target, manifest.schedule_budget_ms, &report);  // throws the fault
  fmt::print("replay={} plugin={} transfers={} horizon={} lower_bound={} valid=true\n", bundle.string(), plugin,
             phase.transfers.size(), report.horizon, report.lower_bound);
  return 0;
}

// The failing pass alone on the state it was given: milliseconds, not a whole compile.
int replay_pass(const fs::path& bundle, const ReproducerManifest& manifest, const PluginQuarantine& quarantine) {
  SessionOptions options;
  options.pipeline = (bundle / "pipeline.yaml").string();
  options.quarantine = quarantine;
  options.passes.schedule_budget_ms = manifest.schedule_budget_ms;
  Session session(options);
  warn_about_changed_plugins(manifest, session.host());
  CompilationState state = read_state((bundle / "state.tstate").string());
  const Status status = session.run_passes(state, {session.pass_use(manifest.pass)});
  if (!status.ok) throw Error(status.message);
  fmt::print("replay={} plugin={} pass={} passed=true\n", bundle.string(), manifest.plugin, manifest.pass);
  return 0;
}

int replay_compile(const fs::path& bundle, const ReproducerManifest& manifest, const PluginQuarantine& quarantine) {
  SessionOptions options;
  options.pipeline = (bundle / "pipeline.yaml").string();
  options.quarantine = quarantine;
  warn_about_changed_plugins(manifest, Session(options).host());
  // The package is thrown away: replay answers "does it still fail", nothing more.
  std::string scratch_pattern = (fs::temp_directory_path() / "tessera-replay-XXXXXX").string();
  if (!mkdtemp(scratch_pattern.data()))
    throw Error("cannot create a scratch folder in " + fs::temp_directory_path().string());
  const fs::path scratch = scratch_pattern;
  struct RemoveScratch {
    fs::path path;
    ~RemoveScratch() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } remove_scratch{scratch};
  CompileRequest request;
  request.model = (bundle / "model.yaml").string();
  request.pipeline = (bundle / "pipeline.yaml").string();
  request.output = (scratch / "replay.tpkg").string();
  request.schedule_budget_ms = manifest.schedule_budget_ms;
  request.write_reproducer = false;
  request.quarantine = quarantine;
  const CompileResult result = compile(request);  // throws the fault
  fmt::print("replay={} plugin={} tiles={} supersteps={} compiled=true\n", bundle.string(), manifest.plugin,
             result.tiles, result.supersteps);
  return 0;
}

}  // namespace

int replay_command(const std::string& bundle_path, const std::vector<std::string>& trusted_plugins) {
  const fs::path bundle = fs::absolute(bundle_path).lexically_normal();
  const ReproducerManifest manifest = read_reproducer_manifest(bundle.string());
  const std::string mode = manifest.replay;
  logger("tessera.replay")->info("replaying bundle={} plugin={} mode={}", bundle.string(), manifest.plugin, mode);
  const PluginQuarantine quarantine = bundle_quarantine(bundle.string(), trusted_plugins);
  if (mode == kReplaySchedule) return replay_schedule(bundle, manifest, quarantine);
  if (mode == kReplayPass) return replay_pass(bundle, manifest, quarantine);
  if (mode == kReplayCompile) return replay_compile(bundle, manifest, quarantine);
  throw Error((bundle / "manifest.json").string() + ": unknown replay mode '" + mode +
              "' (expected schedule, pass or compile)");
}

}  // namespace tessera::cli
