// The pipeline YAML: which target, which plugins, in which order, with which options.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "tessera/options.hpp"

namespace tessera {

class PluginHost;

/// One named plugin with its options, and where the YAML named it.
struct PluginUse {
  std::string plugin;
  Options options;       ///< as written; resolve_pipeline fills in defaults
  std::string place;     ///< "file:line:column"
  std::map<std::string, std::string> option_places;  ///< option name -> "file:line:column"
};

struct PipelineSpec {
  std::string name;
  std::string file;
  std::string target;                     ///< absolute path
  std::string target_place;
  std::vector<std::string> plugin_paths;  ///< absolute directories
  PluginUse cost_model;
  PluginUse exchange_scheduler;
  std::vector<PluginUse> passes;
};

/// Parses a pipeline YAML strictly (unknown keys, wrong shapes: Error with file:line:col).
PipelineSpec load_pipeline(const std::string& path);

/// Loads the spec's plugin paths and TESSERA_PLUGIN_PATH into `host`, then checks every
/// plugin name and kind, option names and types (filling defaults), and that each pass's
/// requirements are provided by earlier passes. Throws Error with file:line:column.
void resolve_pipeline(PipelineSpec& spec, PluginHost& host);

/// The spec as YAML that load_pipeline reads back to the same spec (paths absolute).
std::string print_pipeline(const PipelineSpec& spec);

}  // namespace tessera
