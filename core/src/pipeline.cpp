// Loading, resolving and printing pipeline YAML files.
#include "tessera/pipeline.hpp"

#include <filesystem>
#include <set>

#include "tessera/diagnostic.hpp"
#include "tessera/plugin_host.hpp"
#include "yaml_util.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

std::string resolve_path(const std::string& pipeline_file, const std::string& relative) {
  fs::path path(relative);
  if (path.is_relative()) path = fs::path(pipeline_file).parent_path() / path;
  std::error_code ec;
  fs::path absolute = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return absolute.lexically_normal().string();
}

PluginUse parse_plugin_use(const std::string& file, const YAML::Node& node, const std::string& what) {
  PluginUse use;
  use.place = yaml::place(file, node);
  if (node.IsScalar()) {  // shorthand: `cost_model: analytic`
    use.plugin = node.Scalar();
    return use;
  }
  if (!node.IsMap()) yaml::fail(file, node, what + " must be {plugin: NAME, options: {...}}");
  yaml::check_keys(file, node, {"plugin", "options"});
  use.plugin = yaml::get_string(file, node, "plugin");
  if (YAML::Node options = node["options"]; options.IsDefined() && !options.IsNull()) {
    if (!options.IsMap()) yaml::fail(file, options, "'options' must be a mapping of option names to values");
    for (const auto& entry : options) {
      const std::string name = entry.first.Scalar();
      if (!entry.second.IsScalar())
        yaml::fail(file, entry.second, "option '" + name + "' must be a single value");
      use.options.values[name] = entry.second.Scalar();
      use.option_places[name] = yaml::place(file, entry.first);
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
  spec.name = root["pipeline"].IsDefined() ? yaml::get_string(path, root, "pipeline")
                                           : fs::path(path).stem().string();
  spec.target = resolve_path(path, yaml::get_string(path, root, "target"));
  spec.target_place = yaml::place(path, root["target"]);
  std::error_code ec;
  if (!fs::is_regular_file(spec.target, ec))
    throw Error(spec.target_place + ": target file not found: " + spec.target +
                " (paths are relative to the pipeline file)");
  if (YAML::Node paths = root["plugin_paths"]; paths.IsDefined()) {
    if (!paths.IsSequence()) yaml::fail(path, paths, "'plugin_paths' must be a list of directories");
    for (const auto& entry : paths) {
      const std::string directory = resolve_path(path, entry.Scalar());
      if (!fs::is_directory(directory, ec))
        yaml::fail(path, entry, "plugin path is not a directory: " + directory +
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
  const PluginInfo* info = host.find(use.plugin);
  if (!info || info->kind != kind) throw Error(use.place + ": " + host.unknown_plugin_message(use.plugin, kind));
  return *info;
}

static void resolve_use(const PluginHost& host, PluginUse& use, PluginKind kind) {
  const PluginInfo& info = find_plugin(host, use, kind);
  // Check option by option so an error points at the option's own line.
  for (const auto& [name, value] : use.options.values) {
    Options single;
    single.values[name] = value;
    auto place = use.option_places.count(name) ? use.option_places.at(name) : use.place;
    host.resolve_options(info, single, place);
  }
  use.options = host.resolve_options(info, use.options, use.place);
}

void resolve_pipeline(PipelineSpec& spec, PluginHost& host) {
  for (const auto& directory : spec.plugin_paths) host.load_directory(directory);
  host.load_environment_paths();
  resolve_use(host, spec.cost_model, PluginKind::cost_model);
  resolve_use(host, spec.exchange_scheduler, PluginKind::exchange_scheduler);
  std::set<std::string> available = {"graph"};
  for (auto& pass : spec.passes) {
    resolve_use(host, pass, PluginKind::pass);
    const PluginInfo& info = *host.find(pass.plugin);
    for (const auto& fact : info.required_facts) {
      if (available.count(fact)) continue;
      std::string providers;
      for (const PluginInfo* other : host.plugins())
        for (const auto& provided : other->provided_facts)
          if (provided == fact) providers += (providers.empty() ? "" : ", ") + other->name;
      throw Error(pass.place + ": pass '" + pass.plugin + "' requires '" + fact +
                  "', which no earlier pass provides" +
                  (providers.empty() ? "" : "; put one of these before it: " + providers));
    }
    available.insert(info.provided_facts.begin(), info.provided_facts.end());
  }
}

static void emit_use(YAML::Emitter& out, const PluginUse& use) {
  out << YAML::Flow << YAML::BeginMap << YAML::Key << "plugin" << YAML::Value << use.plugin;
  if (!use.options.values.empty()) {
    out << YAML::Key << "options" << YAML::Value << YAML::BeginMap;
    for (const auto& [name, value] : use.options.values)
      out << YAML::Key << name << YAML::Value << option_value_text(value);
    out << YAML::EndMap;
  }
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
