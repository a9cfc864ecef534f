// `tessera replay BUNDLE` and the writer of the bundles it reads (one place owns the format).
#include "replay_command.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compile.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/pass_manager.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"
#include "tessera/version.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

constexpr int kBundleFormat = 1;
constexpr const char* kReplaySchedule = "schedule";  // the scheduler alone on phase.txt
constexpr const char* kReplayCompile = "compile";    // the pipeline on model.yaml

// A fresh folder `<parent>/<plugin>-<N>`; create_directory fails on an existing one, so two
// compiles failing at once never share a bundle.
fs::path create_bundle_folder(const fs::path& parent, const std::string& plugin) {
  fs::create_directories(parent);
  for (unsigned n = 1; n < 100000; ++n) {
    fs::path candidate = parent / fmt::format("{}-{}", plugin, n);
    if (fs::create_directory(candidate)) return candidate;
  }
  throw Error(parent.string() + ": too many reproducer bundles; remove old ones");
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw Error(file.string() + ": cannot write the reproducer file");
}

nlohmann::json plugin_entry(const PluginHost& host, const std::string& name) {
  const PluginInfo* info = host.find(name);
  if (!info) return {{"name", name}};  // not loaded: nothing more is known
  return {{"name", info->name},
          {"kind", plugin_kind_name(info->kind)},
          {"version", info->version},
          {"path", info->file},
          {"sha256", file_sha256(info->file)}};
}

nlohmann::json read_manifest(const fs::path& bundle) {
  const fs::path file = bundle / "manifest.json";
  std::ifstream in(file);
  if (!in) throw Error(file.string() + ": not a reproducer bundle (no manifest.json; give the folder `tessera compile` printed)");
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object())
    throw Error(file.string() + ": manifest.json is not a JSON object (the bundle is damaged)");
  for (const char* key : {"format", "replay", "plugin", "schedule_budget_ms", "plugins"})
    if (!manifest.contains(key)) throw Error(file.string() + ": manifest.json lacks '" + key + "' (the bundle is damaged)");
  if (manifest["format"] != kBundleFormat)
    throw Error(file.string() + ": bundle format " + manifest["format"].dump() + ", this tessera reads " +
                std::to_string(kBundleFormat));
  // Every field's JSON type, so a damaged bundle is a named error and not a JSON type_error.
  const auto require = [&](bool well_typed, const char* key, const char* expected) {
    if (!well_typed)
      throw Error(file.string() + ": manifest.json field '" + key + "' must be " + expected + " (the bundle is damaged)");
  };
  require(manifest["replay"].is_string(), "replay", "a string");
  require(manifest["plugin"].is_string(), "plugin", "a string");
  require(manifest["schedule_budget_ms"].is_number_unsigned(), "schedule_budget_ms", "a non-negative integer");
  require(manifest["plugins"].is_array(), "plugins", "a list");
  for (const auto& entry : manifest["plugins"])
    require(entry.is_object() && (!entry.contains("name") || entry["name"].is_string()) &&
                (!entry.contains("sha256") || entry["sha256"].is_string()),
            "plugins", "a list of objects whose 'name' and 'sha256' are strings");
  return manifest;
}

// A library rebuilt since the bundle was written may no longer fail: say so, but run it,
// since checking a fix is what replay is for.
void warn_about_changed_plugins(const nlohmann::json& manifest, const PluginHost& host) {
  auto log = logger("tessera.replay");
  for (const auto& entry : manifest["plugins"]) {
    if (!entry.contains("sha256")) continue;
    const std::string name = entry.value("name", "");
    const PluginInfo* info = host.find(name);
    if (!info) continue;
    const std::string now = file_sha256(info->file);
    if (now != entry["sha256"].get<std::string>())
      log->warn("plugin changed since the bundle was written plugin={} file={} bundle_sha256={} sha256={}", name,
                info->file, entry["sha256"].get<std::string>(), now);
  }
}

// A bundle may come from another user or machine: running a library shipped inside it would run
// their code as us, so only the files the user named on the command line are let through.
PluginQuarantine bundle_quarantine(const fs::path& bundle, const std::vector<std::string>& trusted_plugins) {
  return {bundle.string(), trusted_plugins, "the reproducer bundle",
          "if you have checked it and trust it, run `tessera replay --trust-bundle-plugin FILE` naming"};
}

int replay_schedule(const fs::path& bundle, const nlohmann::json& manifest, const PluginQuarantine& quarantine) {
  PipelineSpec spec = load_pipeline((bundle / "pipeline.yaml").string());
  PluginHost host;
  host.quarantine(quarantine);
  resolve_pipeline(spec, host);
  warn_about_changed_plugins(manifest, host);
  const std::string plugin = manifest["plugin"].get<std::string>();
  if (spec.exchange_scheduler.plugin != plugin)
    throw Error((bundle / "pipeline.yaml").string() + ": the bundle's failing scheduler is '" + plugin +
                "' but its pipeline uses '" + spec.exchange_scheduler.plugin + "' (the bundle is damaged)");
  const Target target = load_target(spec.target);
  const ExchangePhase phase = read_phase_file((bundle / "phase.txt").string());
  // Created by the pass manager exactly as in the compile (so `isolate: process` still contains
  // a crash), minus any fallback: replay must show the plugin's own failure, not a recovery.
  spec.exchange_scheduler.fallback.clear();
  PassManagerOptions options;
  options.schedule_budget_ms = manifest["schedule_budget_ms"].get<std::uint64_t>();
  PassManager manager(spec, host, options);
  ScheduleReport report;
  manager.scheduler().schedule(phase, target, options.schedule_budget_ms, &report);  // throws the fault
  fmt::print("replay={} plugin={} transfers={} horizon={} lower_bound={} valid=true\n", bundle.string(), plugin,
             phase.transfers.size(), report.horizon, report.lower_bound);
  return 0;
}

int replay_compile(const fs::path& bundle, const nlohmann::json& manifest, const PluginQuarantine& quarantine) {
  {
    PipelineSpec spec = load_pipeline((bundle / "pipeline.yaml").string());
    PluginHost host;
    host.quarantine(quarantine);
    resolve_pipeline(spec, host);
    warn_about_changed_plugins(manifest, host);
  }
  // The package is thrown away: replay answers "does it still fail", nothing more.
  std::string scratch_pattern = (fs::temp_directory_path() / "tessera-replay-XXXXXX").string();
  if (!mkdtemp(scratch_pattern.data())) throw Error("cannot create a scratch folder in " + fs::temp_directory_path().string());
  const fs::path scratch = scratch_pattern;
  struct RemoveScratch {
    fs::path path;
    ~RemoveScratch() { std::error_code ec; fs::remove_all(path, ec); }
  } remove_scratch{scratch};
  CompileRequest request;
  request.model = (bundle / "model.yaml").string();
  request.pipeline = (bundle / "pipeline.yaml").string();
  request.output = (scratch / "replay.tpkg").string();
  request.schedule_budget_ms = manifest["schedule_budget_ms"].get<std::uint64_t>();
  request.write_reproducer = false;
  request.quarantine = quarantine;
  const CompileResult result = compile(request);  // throws the fault
  fmt::print("replay={} plugin={} tiles={} supersteps={} compiled=true\n", bundle.string(),
             manifest["plugin"].get<std::string>(), result.tiles, result.supersteps);
  return 0;
}

}  // namespace

std::string write_reproducer(const std::string& parent, const PipelineSpec& spec, const PluginHost& host,
                             const PluginFault& fault, const std::string& model_path, std::uint64_t schedule_budget_ms) {
  const fs::path bundle = create_bundle_folder(parent, fault.plugin);
  const bool scheduler_fault = fault.phase && fault.plugin == spec.exchange_scheduler.plugin;

  // The bundle's pipeline reads its own copy of the target (a relative path resolves against
  // the pipeline file), so the target cannot change under it.
  fs::copy_file(spec.target, bundle / "target.yaml");
  PipelineSpec bundled = spec;
  bundled.target = "target.yaml";
  // Plugins found through TESSERA_PLUGIN_PATH are not in the spec: name their folders too, so
  // the replay finds the same libraries without the environment of the failed compile.
  auto add_folder_of = [&](const std::string& name) {
    const PluginInfo* info = host.find(name);
    if (!info) return;
    const std::string folder = fs::path(info->file).parent_path().string();
    if (std::find(bundled.plugin_paths.begin(), bundled.plugin_paths.end(), folder) == bundled.plugin_paths.end())
      bundled.plugin_paths.push_back(folder);
  };
  add_folder_of(spec.cost_model.plugin);
  add_folder_of(spec.exchange_scheduler.plugin);
  for (const auto& pass : spec.passes) add_folder_of(pass.plugin);
  write_text(bundle / "pipeline.yaml", "# resolved pipeline of the failed compile; written by tessera\n" +
                                           print_pipeline(bundled));
  if (scheduler_fault)
    write_phase_file(*fault.phase, (bundle / "phase.txt").string());
  else
    fs::copy_file(model_path, bundle / "model.yaml");

  nlohmann::json plugins = nlohmann::json::array();
  plugins.push_back(plugin_entry(host, spec.cost_model.plugin));
  plugins.push_back(plugin_entry(host, spec.exchange_scheduler.plugin));
  for (const auto& pass : spec.passes) plugins.push_back(plugin_entry(host, pass.plugin));
  nlohmann::json manifest = {
      {"format", kBundleFormat},
      {"tessera_version", kCoreVersion},
      {"replay", scheduler_fault ? kReplaySchedule : kReplayCompile},
      {"plugin", fault.plugin},
      {"pass", fault.pass},
      {"error", fault.message},
      {"model", fs::absolute(model_path).lexically_normal().string()},
      {"pipeline", fs::absolute(spec.file).lexically_normal().string()},
      {"schedule_budget_ms", schedule_budget_ms},
      {"plugins", plugins},
  };
  write_text(bundle / "manifest.json", manifest.dump(2) + "\n");
  logger("tessera.build")->warn("wrote reproducer bundle plugin={} folder={}", fault.plugin, bundle.string());
  return bundle.string();
}

int replay_command(const std::string& bundle_path, const std::vector<std::string>& trusted_plugins) {
  const fs::path bundle = fs::absolute(bundle_path).lexically_normal();
  const nlohmann::json manifest = read_manifest(bundle);
  const std::string mode = manifest["replay"].get<std::string>();
  logger("tessera.replay")->info("replaying bundle={} plugin={} mode={}", bundle.string(),
                                 manifest["plugin"].get<std::string>(), mode);
  const PluginQuarantine quarantine = bundle_quarantine(bundle, trusted_plugins);
  if (mode == kReplaySchedule) return replay_schedule(bundle, manifest, quarantine);
  if (mode == kReplayCompile) return replay_compile(bundle, manifest, quarantine);
  throw Error((bundle / "manifest.json").string() + ": unknown replay mode '" + mode + "' (expected schedule or compile)");
}

}  // namespace tessera::cli
