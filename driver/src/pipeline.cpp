// Loading, resolving and printing pipeline YAML files.
#include "tessera/pipeline.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "tessera/diagnostic.hpp"
#include "tessera/isolation.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/session.hpp"
#include "tessera/shipped_configs.hpp"
#include "tessera/strict_yaml.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

std::string resolve_path(const std::string& pipeline_file, const std::string& relative) {
  fs::path path(relative);
  if (path.is_relative()) path = fs::path(pipeline_file).parent_path() / path;
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  // A symlink loop (ELOOP) makes weakly_canonical fail with an empty path: keep the path as
  // written so the error that follows can name it.
  fs::path canonical = fs::weakly_canonical(absolute, ec);
  if (ec || canonical.empty()) canonical = absolute;
  return canonical.lexically_normal().string();
}

PluginUse parse_plugin_use(const std::string& file, const YAML::Node& node, const std::string& what) {
  PluginUse use;
  use.place = yaml::place(file, node);
  if (node.IsScalar()) {  // shorthand: `cost_model: analytic`
    use.plugin = node.Scalar();
    return use;
  }
  if (!node.IsMap()) yaml::fail(file, node, what + " must be {plugin: NAME, options: {...}}");
  yaml::check_keys(file, node,
                   {"plugin", "options", "isolate", "fallback", "time_limit_ms", "memory_limit_mb", "sha256"});
  use.plugin = yaml::get_string(file, node, "plugin");
  if (node["sha256"].IsDefined()) {
    use.sha256 = yaml::get_string(file, node, "sha256");
    use.sha256_place = yaml::place(file, node["sha256"]);
    std::transform(use.sha256.begin(), use.sha256.end(), use.sha256.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (use.sha256.size() != 64 || use.sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      yaml::fail(file, node["sha256"], "'sha256' must be 64 hex digits (get them with `sha256sum PLUGIN.so`)");
  }
  if (node["isolate"].IsDefined()) {
    use.isolate = yaml::get_string(file, node, "isolate");
    if (use.isolate != "process")
      yaml::fail(file, node["isolate"], "'isolate' must be 'process' (run the plugin in a child tessera-plugin-host)");
  }
  if (node["fallback"].IsDefined()) {
    use.fallback = yaml::get_string(file, node, "fallback");
    use.fallback_place = yaml::place(file, node["fallback"]);
  }
  use.time_limit_ms = yaml::get_uint_or(file, node, "time_limit_ms", 0, kMaxTimeLimitMs);
  use.memory_limit_mb = yaml::get_uint_or(file, node, "memory_limit_mb", 0, kMaxMemoryLimitMb);
  // The limits and the fallback only mean something for a contained plugin.
  for (const char* key : {"fallback", "time_limit_ms", "memory_limit_mb"})
    if (node[key].IsDefined() && use.isolate.empty())
      yaml::fail(file, node[key], std::string("'") + key + "' needs 'isolate: process' on the same entry");
  if (YAML::Node options = node["options"]; options.IsDefined() && !options.IsNull()) {
    if (!options.IsMap()) yaml::fail(file, options, "'options' must be a mapping of option names to values");
    for (const auto& entry : options) {
      const std::string name = entry.first.Scalar();
      if (entry.second.IsMap()) {  // for a `map` option; resolve_options checks the type
        use.options.values[name] = MapOption{yaml::flow_layout(entry.second), file, entry.second.Mark().line};
      } else if (!entry.second.IsScalar()) {
        yaml::fail(file, entry.second, "option '" + name + "' must be a single value or a mapping");
      } else {
        use.options.values[name] = entry.second.Scalar();
      }
      use.options.places[name] = yaml::place(file, entry.first);
    }
  }
  return use;
}

}  // namespace

PipelineSpec load_pipeline(const std::string& path) {
  YAML::Node root = yaml::load_file(path);
  yaml::require_map(path, root, "a pipeline");
  yaml::check_keys(path, root, {"pipeline", "target", "plugin_paths", "cost_model", "exchange_scheduler", "passes"});
  PipelineSpec spec;
  spec.file = path;
  spec.name = root["pipeline"].IsDefined() ? yaml::get_name(path, root, "pipeline") : fs::path(path).stem().string();
  const std::string target = yaml::get_string(path, root, "target");
  spec.target = resolve_path(path, target);
  spec.target_place = yaml::place(path, root["target"]);
  std::error_code ec;
  // A bare name (`target: t16`) is a shipped target, so a copied pipeline still finds it.
  if (!fs::exists(spec.target, ec)) {
    const std::string shipped = find_config(target, "targets", spec.target_place + ": target");
    if (shipped != target) spec.target = resolve_path(path, shipped);
  }
  if (!fs::is_regular_file(spec.target, ec))
    throw Error(
        spec.target_place +
        (fs::is_directory(spec.target, ec) ? ": target is a directory, not a file: " : ": target file not found: ") +
        spec.target + " (paths are relative to the pipeline file)");
  if (YAML::Node paths = root["plugin_paths"]; paths.IsDefined()) {
    if (!paths.IsSequence()) yaml::fail(path, paths, "'plugin_paths' must be a list of directories");
    for (const auto& entry : paths) {
      if (entry.IsNull() || (entry.IsScalar() && entry.Scalar().empty()))
        yaml::fail(path, entry,
                   "empty plugin_paths entry, which would mean a folder nobody named; remove it or name "
                   "the folder (relative to the pipeline file)");
      const std::string directory = resolve_path(path, entry.Scalar());
      if (!fs::is_directory(directory, ec))
        yaml::fail(path, entry,
                   "plugin path is not a directory: " + directory +
                       " (paths are relative to the pipeline file; build first with `make`)");
      spec.plugin_paths.push_back(directory);
    }
  }
  for (const char* key : {"cost_model", "exchange_scheduler", "passes"})
    if (!root[key].IsDefined()) yaml::fail(path, root, std::string("missing required key '") + key + "'");
  spec.cost_model = parse_plugin_use(path, root["cost_model"], "'cost_model'");
  spec.exchange_scheduler = parse_plugin_use(path, root["exchange_scheduler"], "'exchange_scheduler'");
  YAML::Node passes = root["passes"];
  if (!passes.IsSequence() || passes.size() == 0)
    yaml::fail(path, passes, "'passes' must be a non-empty list of {plugin: NAME, options: {...}}");
  for (const auto& node : passes) spec.passes.push_back(parse_plugin_use(path, node, "a pass"));
  return spec;
}

static const PluginInfo& find_plugin(const PluginHost& host, const PluginUse& use, PluginKind kind) {
  // A library named after the plugin that a folder scan skipped (not loadable on this machine)
  // is an error even if another folder has a good one: the pipeline may mean either.
  if (const std::string* reason = host.skipped_library(use.plugin))
    throw Error(use.place + ": cannot load " + plugin_kind_name(kind) + " '" + use.plugin + "': " + *reason);
  const PluginInfo* info = host.find(use.plugin);
  if (!info || info->kind != kind) throw Error(use.place + ": " + host.unknown_plugin_message(use.plugin, kind));
  return *info;
}

static void resolve_use(const PluginHost& host, const std::string& pipeline_file, PluginUse& use, PluginKind kind) {
  const PluginInfo& info = find_plugin(host, use, kind);
  if (!use.sha256.empty()) {  // checked before any object of the plugin is created
    const std::string actual = file_sha256(info.file);
    if (actual != use.sha256)
      throw Error(use.sha256_place + ": plugin '" + use.plugin + "' library " + info.file +
                  " does not match its sha256 pin: expected " + use.sha256 + ", actual " + actual +
                  " (rebuild or reinstall the pinned library, or update the pin after checking the new file)");
  }
  if (!use.isolate.empty() && kind == PluginKind::pass)
    throw Error(use.place + ": 'isolate: process' is not supported for " + plugin_kind_name(kind) + " '" + use.plugin +
                "'; only exchange schedulers and cost models can run in a child process "
                "(a pass changes the compilation state in place; remove 'isolate' here)");
  if (!use.fallback.empty()) {
    if (const std::string* reason = host.skipped_library(use.fallback))
      throw Error(use.fallback_place + ": fallback: cannot load " + plugin_kind_name(kind) + " '" + use.fallback +
                  "': " + *reason);
    const PluginInfo* fallback = host.find(use.fallback);
    if (!fallback || fallback->kind != kind)
      throw Error(use.fallback_place + ": fallback: " + host.unknown_plugin_message(use.fallback, kind));
    if (use.fallback == use.plugin)
      throw Error(use.fallback_place + ": the fallback must be another plugin than '" + use.plugin + "'");
  }
  use.options = host.resolve_options(info, use.options, use.place);
  // A `path` option means the same file wherever the compiler runs from.
  for (const OptionSpec& option : info.options)
    if (option.type == OptionType::path)
      if (auto& text = std::get<std::string>(use.options.values.at(option.name)); !text.empty())
        text = resolve_path(pipeline_file, text);
}

void resolve_pipeline(PipelineSpec& spec, PluginHost& host) {
  // Pins first, so a pinned library named after its plugin is checked before it is loaded.
  auto pin = [&](const PluginUse& use) {
    if (!use.sha256.empty()) host.pin(use.plugin, use.sha256, use.sha256_place);
  };
  pin(spec.cost_model);
  pin(spec.exchange_scheduler);
  for (const PluginUse& pass : spec.passes) pin(pass);
  // The shipped plugins are always there; plugin_paths and TESSERA_PLUGIN_PATH add more.
  if (const std::string bundled = bundled_plugin_directory(); !bundled.empty()) host.load_directory(bundled);
  for (const auto& directory : spec.plugin_paths) host.load_directory(directory);
  host.load_environment_paths();
  resolve_use(host, spec.file, spec.cost_model, PluginKind::cost_model);
  resolve_use(host, spec.file, spec.exchange_scheduler, PluginKind::exchange_scheduler);
  std::set<std::string> available = {"graph"};
  for (auto& pass : spec.passes) {
    resolve_use(host, spec.file, pass, PluginKind::pass);
    const PluginInfo& info = *host.find(pass.plugin);
    for (const auto& fact : info.required_facts) {
      if (available.count(fact)) continue;
      std::string providers;
      for (const PluginInfo* other : host.plugins())
        for (const auto& provided : other->provided_facts)
          if (provided == fact) providers += (providers.empty() ? "" : ", ") + other->name;
      throw Error(pass.place + ": pass '" + pass.plugin + "' requires '" + fact + "', which no earlier pass provides" +
                  (providers.empty() ? "" : "; put one of these before it: " + providers));
    }
    available.insert(info.provided_facts.begin(), info.provided_facts.end());
  }
}

static void emit_use(YAML::Emitter& out, const PluginUse& use) {
  out << YAML::Flow << YAML::BeginMap << YAML::Key << "plugin" << YAML::Value << use.plugin;
  if (!use.options.values.empty()) {
    out << YAML::Key << "options" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, value] : use.options.values) {
      out << YAML::Key << name << YAML::Value;
      if (auto map = std::get_if<MapOption>(&value)) out << YAML::Load(map->yaml);
      else out << option_value_text(value);
    }
    out << YAML::EndMap;
  }
  if (!use.sha256.empty()) out << YAML::Key << "sha256" << YAML::Value << use.sha256;
  if (!use.isolate.empty()) out << YAML::Key << "isolate" << YAML::Value << use.isolate;
  if (!use.fallback.empty()) out << YAML::Key << "fallback" << YAML::Value << use.fallback;
  if (use.time_limit_ms) out << YAML::Key << "time_limit_ms" << YAML::Value << use.time_limit_ms;
  if (use.memory_limit_mb) out << YAML::Key << "memory_limit_mb" << YAML::Value << use.memory_limit_mb;
  out << YAML::EndMap;
}

std::string print_pipeline(const PipelineSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "pipeline" << YAML::Value << spec.name;
  out << YAML::Key << "target" << YAML::Value << spec.target;
  out << YAML::Key << "plugin_paths" << YAML::Value << YAML::Flow << spec.plugin_paths;
  out << YAML::Key << "cost_model" << YAML::Value;
  emit_use(out, spec.cost_model);
  out << YAML::Key << "exchange_scheduler" << YAML::Value;
  emit_use(out, spec.exchange_scheduler);
  out << YAML::Key << "passes" << YAML::Value << YAML::BeginSeq;
  for (const auto& pass : spec.passes) emit_use(out, pass);
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace tessera
