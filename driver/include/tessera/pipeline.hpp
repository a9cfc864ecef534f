// The pipeline YAML: which target, which plugins, in which order, with which options.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/options.hpp"

namespace tessera {

class PluginHost;

/// One named plugin with its options, and where the YAML named it.
struct PluginUse {
  std::string plugin;
  Options options;    ///< as written, with their places; resolve_pipeline fills in defaults
  std::string place;  ///< "file:line:column"
  /// `sha256:` pin (64 lower-case hex digits): resolve_pipeline refuses the plugin unless
  /// its library file has exactly this SHA-256. Empty = not pinned.
  std::string sha256;
  std::string sha256_place;  ///< "file:line:column" of `sha256:`
  /// Containment (docs/reliability.md): `isolate: process` runs the plugin in a child
  /// `tessera-plugin-host`; exchange schedulers only. Empty = in process.
  std::string isolate;
  std::string fallback;               ///< same-kind plugin taking over if the child fails
  std::string fallback_place;         ///< "file:line:column" of `fallback:`
  std::uint64_t time_limit_ms = 0;    ///< per call; 0 = budget * 2 + 10 s
  std::uint64_t memory_limit_mb = 0;  ///< child address space; 0 = 4096
};

struct PipelineSpec {
  std::string name;
  std::string file;
  std::string target;  ///< absolute path
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
