// Deep-merges an overlay YAML onto a base pipeline, keeping places for errors.
#include "tessera/overlay.hpp"

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <cstdio>
#include <iterator>
#include <list>

#include <yaml-cpp/yaml.h>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/shipped_configs.hpp"
#include "tessera/strict_yaml.hpp"

namespace fs = std::filesystem;

namespace tessera::overlay {

namespace {

std::string absolute_from(const std::string& file, const std::string& path) {
  const fs::path given(path);
  if (given.is_absolute()) return given.lexically_normal().string();
  return (fs::absolute(file).parent_path() / given).lexically_normal().string();
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// Makes the relative values of a plugin use's path options absolute against `file`.
void rebase_options(YAML::Node use, const std::string& plugin, const std::string& file, const PathOptionTest& is_path) {
  if (!is_path || plugin.empty() || !yaml::is_map(use) || !yaml::is_map(use["options"])) return;
  YAML::Node options = use["options"];
  for (auto option : options) {
    const std::string name = option.first.as<std::string>();
    if (option.second.IsScalar() && !option.second.Scalar().empty() && is_path(plugin, name))
      options[name] = absolute_from(file, option.second.Scalar());
  }
}

std::string plugin_of(const YAML::Node& use) {
  return yaml::is_map(use) && yaml::is_scalar(use["plugin"]) ? use["plugin"].Scalar() : "";
}

// Rebases the path options of every plugin use in `pipeline` (a base or an overlay) against
// `file`; an overlay's cost_model or exchange_scheduler without `plugin` keeps `base`'s.
void rebase_uses(YAML::Node& pipeline, const YAML::Node& base, const std::string& file, const PathOptionTest& is_path) {
  if (!pipeline.IsMap()) return;
  for (const char* key : {"cost_model", "exchange_scheduler"}) {
    std::string plugin = plugin_of(pipeline[key]);
    if (plugin.empty() && base.IsMap()) plugin = plugin_of(base[key]);
    if (pipeline[key].IsDefined()) rebase_options(pipeline[key], plugin, file, is_path);
  }
  if (YAML::Node passes = pipeline["passes"]; yaml::is_sequence(passes))
    for (std::size_t i = 0; i < passes.size(); ++i) rebase_options(passes[i], plugin_of(passes[i]), file, is_path);
}

// Makes the base pipeline's own relative paths absolute, so the merged file can live anywhere.
void rebase_paths(YAML::Node& pipeline, const std::string& file, const PathOptionTest& is_path) {
  if (yaml::is_scalar(pipeline["target"])) {
    const std::string target = pipeline["target"].Scalar();
    std::error_code ec;
    // A bare name (`target: t16`) with no such file beside the pipeline is a shipped target.
    if (!is_config_name(target) || fs::exists(absolute_from(file, target), ec))
      pipeline["target"] = absolute_from(file, target);
  }
  if (YAML::Node paths = pipeline["plugin_paths"]; yaml::is_sequence(paths))
    for (std::size_t i = 0; i < paths.size(); ++i)
      if (paths[i].IsScalar()) paths[i] = absolute_from(file, paths[i].Scalar());
  rebase_uses(pipeline, YAML::Node(), file, is_path);
}

class OverlayMerger {
public:
  OverlayMerger(std::string overlay_file, std::vector<std::string>& changes)
      : file_(std::move(overlay_file)), changes_(changes) {}

  void merge(YAML::Node& pipeline, const YAML::Node& overlay) {
    if (!overlay.IsMap())
      throw Error(yaml::place(file_, overlay) +
                  ": an overlay must be a mapping of pipeline keys, e.g. "
                  "`exchange_scheduler: {plugin: in-order}`");
    if (overlay["target"].IsDefined())
      throw Error(yaml::place(file_, overlay["target"]) +
                  ": an overlay cannot set 'target': every arm compiles each "
                  "suite model for the target the suite names beside it; remove 'target' from the overlay");
    yaml::check_keys(file_, overlay, {"pipeline", "plugin_paths", "cost_model", "exchange_scheduler", "passes"},
                     "an overlay");
    for (const auto& entry : overlay) {
      const std::string key = entry.first.as<std::string>();
      const YAML::Node& value = entry.second;
      if (key == "pipeline") {
        pipeline["pipeline"] = value;
        changes_.push_back("pipeline: " + scalar_text(value));
      } else if (key == "plugin_paths") {
        merge_plugin_paths(pipeline, value);
      } else if (key == "passes") {
        merge_passes(pipeline, value);
      } else {
        YAML::Node use = pipeline[key];
        merge_plugin_use(use, value, key);
      }
    }
  }

private:
  void merge_plugin_paths(YAML::Node& pipeline, const YAML::Node& paths) {
    if (!paths.IsSequence()) throw Error(yaml::place(file_, paths) + ": 'plugin_paths' must be a list of directories");
    if (!yaml::is_sequence(pipeline["plugin_paths"])) pipeline["plugin_paths"] = YAML::Node(YAML::NodeType::Sequence);
    YAML::Node merged = pipeline["plugin_paths"];
    for (const auto& path : paths) {
      if (!path.IsScalar()) throw Error(yaml::place(file_, path) + ": a plugin path must be a directory name");
      const std::string absolute = absolute_from(file_, path.Scalar());
      bool present = false;
      for (const auto& existing : merged) present = present || (existing.IsScalar() && existing.Scalar() == absolute);
      if (present) continue;
      merged.push_back(absolute);
      changes_.push_back("plugin_paths: + " + absolute);
    }
  }

  // Options of `over` replace those of `use` one by one; another plugin replaces the entry.
  void merge_plugin_use(YAML::Node& use, const YAML::Node& over, const std::string& what) {
    if (!over.IsMap())
      throw Error(yaml::place(file_, over) + ": '" + what + "' must be {plugin: NAME, options: {...}}");
    yaml::check_keys(file_, over, {"plugin", "options"}, "'" + what + "'");
    const std::string base_plugin = yaml::is_scalar(use["plugin"]) ? use["plugin"].Scalar() : "";
    if (over["plugin"].IsDefined() && scalar_text(over["plugin"]) != base_plugin) {
      const std::string plugin = scalar_text(over["plugin"]);
      YAML::Node replaced(YAML::NodeType::Map);
      replaced["plugin"] = over["plugin"];
      if (over["options"].IsDefined()) replaced["options"] = over["options"];
      use = replaced;
      changes_.push_back(what + ": " + (base_plugin.empty() ? "(none)" : base_plugin) + " -> " + plugin +
                         describe_options(over["options"]));
      return;
    }
    merge_options(use, over["options"], what + " " + base_plugin);
  }

  void merge_options(YAML::Node& use, const YAML::Node& options, const std::string& what) {
    if (!options.IsDefined() || options.IsNull()) return;
    if (!options.IsMap())
      throw Error(yaml::place(file_, options) + ": 'options' must be a mapping of option names to values");
    if (!yaml::is_map(use["options"])) use["options"] = YAML::Node(YAML::NodeType::Map);
    YAML::Node merged = use["options"];
    for (const auto& option : options) {
      const std::string name = option.first.as<std::string>();
      merged[name] = option.second;
      changes_.push_back(what + ": " + name + "=" + scalar_text(option.second));
    }
  }

  static std::string describe_options(const YAML::Node& options) {
    if (!options.IsDefined() || options.IsNull()) return "";
    return " " + scalar_text(options);
  }

  void merge_passes(YAML::Node& pipeline, const YAML::Node& overlay_passes) {
    if (!overlay_passes.IsSequence())
      throw Error(yaml::place(file_, overlay_passes) +
                  ": 'passes' in an overlay must be a list of "
                  "{plugin: NAME, options: {...}} matched by plugin name against the base pipeline");
    YAML::Node base_passes = pipeline["passes"];
    if (!base_passes.IsSequence())
      throw Error(yaml::place(file_, overlay_passes) + ": the base pipeline has no 'passes' list to merge into");
    // A list, not a vector: assigning a YAML::Node rewrites the node it refers to, so the
    // element shuffling of vector::insert/erase would corrupt the base's passes.
    std::list<YAML::Node> passes(base_passes.begin(), base_passes.end());
    for (const auto& entry : overlay_passes) {
      if (!entry.IsMap() || !yaml::is_scalar(entry["plugin"]))
        throw Error(yaml::place(file_, entry) + ": a pass in an overlay must be {plugin: NAME, ...}");
      yaml::check_keys(file_, entry, {"plugin", "options", "remove", "after", "before"}, "a pass of an overlay");
      const std::string name = entry["plugin"].Scalar();
      const auto found = find_pass(passes, name, entry);
      const bool remove = flag(entry["remove"], "remove");
      const bool inserting = entry["after"].IsDefined() || entry["before"].IsDefined();
      if (remove) {
        if (found == passes.end())
          throw Error(yaml::place(file_, entry) + ": cannot remove pass '" + name + "': " + not_found(passes));
        passes.erase(found);
        changes_.push_back("passes: - " + name);
      } else if (found != passes.end()) {
        if (inserting)
          throw Error(yaml::place(file_, entry) + ": pass '" + name +
                      "' is already in the base pipeline; "
                      "to move it, remove it (`remove: true`) and add it under another name's `after:`");
        merge_options(*found, entry["options"], "pass " + name);
      } else {
        if (!inserting)
          throw Error(yaml::place(file_, entry) + ": pass '" + name + "' is not in the base pipeline (" +
                      not_found(passes) + "); to add it, give `after: NAME` or `before: NAME`");
        const bool after = entry["after"].IsDefined();
        const YAML::Node anchor_node = after ? entry["after"] : entry["before"];
        const std::string anchor = scalar_text(anchor_node);
        const auto anchor_at = find_pass(passes, anchor, anchor_node);
        if (anchor_at == passes.end())
          throw Error(yaml::place(file_, anchor_node) + ": no pass '" + anchor + "' to insert '" + name + "' " +
                      (after ? "after" : "before") + " (" + not_found(passes) + ")");
        YAML::Node added(YAML::NodeType::Map);
        added["plugin"] = entry["plugin"];
        if (entry["options"].IsDefined()) added["options"] = entry["options"];
        passes.insert(after ? std::next(anchor_at) : anchor_at, added);
        changes_.push_back("passes: + " + name + (after ? " after " : " before ") + anchor +
                           describe_options(entry["options"]));
      }
    }
    YAML::Node rebuilt(YAML::NodeType::Sequence);
    for (const YAML::Node& pass : passes) rebuilt.push_back(pass);
    pipeline["passes"] = rebuilt;
  }

  std::list<YAML::Node>::iterator find_pass(std::list<YAML::Node>& passes, const std::string& name,
                                            const YAML::Node& where) const {
    auto found = passes.end();
    for (auto pass = passes.begin(); pass != passes.end(); ++pass) {
      if (!yaml::is_scalar((*pass)["plugin"]) || (*pass)["plugin"].Scalar() != name) continue;
      if (found != passes.end())
        throw Error(yaml::place(file_, where) + ": pass '" + name +
                    "' appears more than once in the base pipeline, "
                    "so an overlay cannot tell which one it means; give each arm its own base pipeline");
      found = pass;
    }
    return found;
  }

  bool flag(const YAML::Node& node, const std::string& name) const {
    if (!node.IsDefined()) return false;
    try {
      return node.as<bool>();
    } catch (const YAML::Exception&) {
      throw Error(yaml::place(file_, node) + ": '" + name + "' must be true or false");
    }
  }

  static std::string not_found(const std::list<YAML::Node>& passes) {
    std::string list;
    for (const YAML::Node& pass : passes)
      list +=
          (list.empty() ? "" : ", ") + (yaml::is_scalar(pass["plugin"]) ? pass["plugin"].Scalar() : std::string("?"));
    return "the base passes are: " + list;
  }

  std::string file_;
  std::vector<std::string>& changes_;
};

void collect_nodes(const YAML::Node& node, std::vector<YAML::Node>& nodes) {
  nodes.push_back(node);
  if (node.IsMap()) {
    for (const auto& entry : node) {
      collect_nodes(entry.first, nodes);
      collect_nodes(entry.second, nodes);
    }
  } else if (node.IsSequence()) {
    for (const auto& entry : node) collect_nodes(entry, nodes);
  }
}

struct PlaceMap {
  const std::string& base_file;
  const std::string& overlay_file;
  const std::vector<YAML::Node>& overlay_nodes;
  std::map<std::pair<int, int>, std::string>& places;

  // The overlay's nodes (the merge shares them, not copies) are the overlay file's, the others
  // the base's; a node the merge made (a replaced plugin entry) is where its first written
  // child is, else `inherited`.
  bool from_overlay(const YAML::Node& merged) const {
    return std::any_of(overlay_nodes.begin(), overlay_nodes.end(),
                       [&](const YAML::Node& node) { return node.is(merged); });
  }

  std::string place_of(const YAML::Node& merged, const std::string& inherited) const {
    if (merged.Mark().is_null()) {
      if (merged.IsMap())
        for (const auto& entry : merged)
          if (std::string place = place_of(entry.second, ""); !place.empty()) return place;
      if (merged.IsSequence())
        for (const auto& entry : merged)
          if (std::string place = place_of(entry, ""); !place.empty()) return place;
      return inherited;
    }
    return yaml::place(from_overlay(merged) ? overlay_file : base_file, merged);
  }

  void record(const YAML::Node& written, const std::string& place) const {
    if (!written.Mark().is_null()) places[{written.Mark().line, written.Mark().column}] = place;
  }

  // Walks the merged tree beside the same tree read back from its text.
  void walk(const YAML::Node& merged, const YAML::Node& written, const std::string& place) const {
    record(written, place);
    if (merged.IsMap() && written.IsMap() && merged.size() == written.size()) {
      auto m = merged.begin();
      for (auto w = written.begin(); w != written.end(); ++w, ++m) {
        const std::string value_place = place_of(m->second, place);
        // A key whose value the overlay set (an option, a plugin) is where that value came from.
        const bool value_is_overlays = !m->second.Mark().is_null() && from_overlay(m->second);
        record(w->first, m->first.Mark().is_null() || value_is_overlays ? value_place : place_of(m->first, place));
        walk(m->second, w->second, value_place);
      }
    } else if (merged.IsSequence() && written.IsSequence() && merged.size() == written.size()) {
      for (std::size_t i = 0; i < merged.size(); ++i) walk(merged[i], written[i], place_of(merged[i], place));
    }
  }
};

}  // namespace

std::string place_in_sources(const std::string& message, const std::string& merged_file, int header_lines,
                             const MergedPipeline& merged) {
  const std::size_t at = message.find(merged_file + ":");
  if (at == std::string::npos || merged.places.empty()) return message;
  int line = 0, column = 0, consumed = 0;
  const std::string rest = message.substr(at + merged_file.size() + 1);
  if (std::sscanf(rest.c_str(), "%d:%d%n", &line, &column, &consumed) != 2) return message;
  // The node there, or the last one before it (a message may point inside a node).
  auto found = merged.places.upper_bound({line - 1 - header_lines, column - 1});
  if (found == merged.places.begin()) return message;
  --found;
  return message.substr(0, at) + found->second + rest.substr(consumed);
}

MergedPipeline merge_pipeline_overlay(const std::string& base_path, const std::string& overlay_path,
                                      const PathOptionTest& is_path) {
  YAML::Node pipeline = yaml::load_file(base_path, "base pipeline");
  if (!pipeline.IsMap()) throw Error(base_path + ": a pipeline must be a mapping (see configs/pipelines/)");
  rebase_paths(pipeline, base_path, is_path);
  MergedPipeline merged;
  std::vector<YAML::Node> overlay_nodes;
  if (!overlay_path.empty()) {
    YAML::Node overlay = yaml::load_file(overlay_path, "arm overlay", /*empty_allowed=*/true);
    rebase_uses(overlay, pipeline, overlay_path, is_path);  // an overlay's paths are relative to the overlay
    if (overlay.IsDefined() && !overlay.IsNull()) OverlayMerger(overlay_path, merged.changes).merge(pipeline, overlay);
    collect_nodes(overlay, overlay_nodes);
  }
  YAML::Emitter out;
  out << pipeline;
  merged.yaml = std::string(out.c_str()) + "\n";
  const PlaceMap map{base_path, overlay_path, overlay_nodes, merged.places};
  map.walk(pipeline, YAML::Load(merged.yaml), map.place_of(pipeline, base_path));
  return merged;
}

MergedPipeline merge_overlay_into_file(const std::string& base_path, const std::string& overlay_path,
                                       const std::string& merged_file, const std::string& header) {
  auto stage = [&](const PathOptionTest& is_path) {
    MergedPipeline merged = merge_pipeline_overlay(base_path, overlay_path, is_path);
    write_file_atomically(merged_file, header + merged.yaml, "the merged pipeline");
    return merged;
  };
  const MergedPipeline first = stage({});
  PluginHost probe;
  try {
    PipelineSpec spec = load_pipeline(merged_file);
    resolve_pipeline(spec, probe);
  } catch (const Error& e) {
    const int header_lines = static_cast<int>(std::count(header.begin(), header.end(), '\n'));
    throw Error(place_in_sources(e.what(), merged_file, header_lines, first));
  }
  return stage([&](const std::string& plugin, const std::string& option) {
    const PluginInfo* info = probe.find(plugin);
    if (!info) return false;
    for (const OptionSpec& known : info->options)
      if (known.name == option) return known.type == OptionType::path;
    return false;
  });
}

}  // namespace tessera::overlay
