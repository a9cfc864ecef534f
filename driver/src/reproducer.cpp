// Reproducer bundles: the writer (a Session on a plugin fault) and the manifest reader of
// `tessera replay`, so one place owns the format.
#include "tessera/reproducer.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/pass_manager.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/state_file.hpp"
#include "tessera/version.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

constexpr int kBundleFormat = 1;

// A fresh folder `<parent>/<plugin>-<N>` in a reproducer folder that is ours (another user may
// create `reproducers/` beside a package first); mkdirat fails on an existing one, so two
// compiles failing at once never share a bundle, and every file is made relative to it.
OwnedFolder create_bundle_folder(const fs::path& parent, const std::string& plugin) {
  const OwnedFolder folder(parent.string(), "the reproducer folder");
  for (unsigned n = 1; n < 100000; ++n) {
    const std::string name = fmt::format("{}-{}", plugin, n);
    if (::mkdirat(folder.descriptor(), name.c_str(), 0755) == 0) return folder.folder(name);
    if (errno != EEXIST)
      throw Error(
          fmt::format("{}: cannot create a reproducer bundle: {}", (parent / name).string(), std::strerror(errno)));
  }
  throw Error(parent.string() + ": too many reproducer bundles; remove old ones");
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

}  // namespace

std::string write_reproducer(const std::string& parent, const PipelineSpec& spec, const PluginHost& host,
                             const PluginFault& fault, const std::string& model_path, std::uint64_t schedule_budget_ms,
                             const CompilationState* pass_input) {
  const OwnedFolder folder = create_bundle_folder(parent, fault.plugin);
  const fs::path bundle = folder.path();
  const bool scheduler_fault = fault.phase && fault.plugin == spec.exchange_scheduler.plugin;

  // The bundle's pipeline reads its own copy of the target (a relative path resolves against
  // the pipeline file), so the target cannot change under it.
  folder.copy_file(spec.target, "target.yaml", "the target of the reproducer");
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
  folder.write_file("pipeline.yaml",
                    "# resolved pipeline of the failed compile; written by tessera\n" + print_pipeline(bundled),
                    "the pipeline of the reproducer");
  const bool pass_fault = !scheduler_fault && pass_input;
  if (scheduler_fault) folder.write_file("phase.txt", phase_file_text(*fault.phase), "the phase of the reproducer");
  else if (pass_fault) folder.write_file("state.tstate", state_text(*pass_input), "the state of the reproducer");
  else folder.copy_file(model_path, "model.yaml", "the model of the reproducer");

  nlohmann::json plugins = nlohmann::json::array();
  plugins.push_back(plugin_entry(host, spec.cost_model.plugin));
  plugins.push_back(plugin_entry(host, spec.exchange_scheduler.plugin));
  for (const auto& pass : spec.passes) plugins.push_back(plugin_entry(host, pass.plugin));
  nlohmann::json manifest = {
      {"format", kBundleFormat},
      {"tessera_version", kCoreVersion},
      {"replay", scheduler_fault ? kReplaySchedule
                 : pass_fault    ? kReplayPass
                                 : kReplayCompile},
      {"plugin", fault.plugin},
      {"pass", fault.pass},
      {"error", fault.message},
      {"model", fs::absolute(model_path).lexically_normal().string()},
      {"pipeline", fs::absolute(spec.file).lexically_normal().string()},
      {"schedule_budget_ms", schedule_budget_ms},
      {"plugins", plugins},
  };
  folder.write_file("manifest.json", manifest.dump(2) + "\n", "the reproducer's manifest");
  logger("tessera.build")->warn("wrote reproducer bundle plugin={} folder={}", fault.plugin, bundle.string());
  return bundle.string();
}

ReproducerManifest read_reproducer_manifest(const std::string& bundle_path) {
  const fs::path bundle = bundle_path;
  const fs::path file = bundle / "manifest.json";
  std::ifstream in(file);
  if (!in)
    throw Error(file.string() +
                ": not a reproducer bundle (no manifest.json; give the folder `tessera compile` printed)");
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object())
    throw Error(file.string() + ": manifest.json is not a JSON object (the bundle is damaged)");
  for (const char* key : {"format", "replay", "plugin", "schedule_budget_ms", "plugins"})
    if (!manifest.contains(key))
      throw Error(file.string() + ": manifest.json lacks '" + key + "' (the bundle is damaged)");
  if (manifest["format"] != kBundleFormat)
    throw Error(file.string() + ": bundle format " + manifest["format"].dump() + ", this tessera reads " +
                std::to_string(kBundleFormat));
  // Every field's JSON type, so a damaged bundle is a named error and not a JSON type_error.
  const auto require = [&](bool well_typed, const char* key, const char* expected) {
    if (!well_typed)
      throw Error(file.string() + ": manifest.json field '" + key + "' must be " + expected +
                  " (the bundle is damaged)");
  };
  require(manifest["replay"].is_string(), "replay", "a string");
  require(manifest["plugin"].is_string(), "plugin", "a string");
  require(!manifest.contains("pass") || manifest["pass"].is_string(), "pass", "a string");
  require(manifest["schedule_budget_ms"].is_number_unsigned(), "schedule_budget_ms", "a non-negative integer");
  require(manifest["plugins"].is_array(), "plugins", "a list");
  for (const auto& entry : manifest["plugins"])
    require(entry.is_object() && (!entry.contains("name") || entry["name"].is_string()) &&
                (!entry.contains("sha256") || entry["sha256"].is_string()),
            "plugins", "a list of objects whose 'name' and 'sha256' are strings");
  ReproducerManifest result;
  result.replay = manifest["replay"].get<std::string>();
  result.plugin = manifest["plugin"].get<std::string>();
  result.pass = manifest.value("pass", "");
  if (result.replay == kReplayPass && result.pass.empty())
    throw Error(file.string() + ": manifest.json replays a pass but names none in 'pass' (the bundle is damaged)");
  result.schedule_budget_ms = manifest["schedule_budget_ms"].get<std::uint64_t>();
  for (const auto& entry : manifest["plugins"])
    result.plugins.push_back({entry.value("name", ""), entry.value("sha256", "")});
  return result;
}

// A library rebuilt since the bundle was written may no longer fail: say so, but run it,
// since checking a fix is what replay is for.
void warn_about_changed_plugins(const ReproducerManifest& manifest, const PluginHost& host) {
  auto log = logger("tessera.replay");
  for (const auto& entry : manifest.plugins) {
    if (entry.sha256.empty()) continue;
    const std::string& name = entry.name;
    const PluginInfo* info = host.find(name);
    if (!info) continue;
    const std::string now = file_sha256(info->file);
    if (now != entry.sha256)
      log->warn("plugin changed since the bundle was written plugin={} file={} bundle_sha256={} sha256={}", name,
                info->file, entry.sha256, now);
  }
}

// A bundle may come from another user or machine: running a library shipped inside it would run
// their code as us, so only the files the user named on the command line are let through.
PluginQuarantine bundle_quarantine(const std::string& bundle, const std::vector<std::string>& trusted_plugins) {
  return {bundle, trusted_plugins, "the reproducer bundle",
          "if you have checked it and trust it, run `tessera replay --trust-bundle-plugin FILE` naming"};
}

}  // namespace tessera
