// Compiling a model with a pipeline into a package: `tessera compile` over a Session.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/package.hpp"
#include "tessera/pass.hpp"
#include "tessera/session.hpp"

namespace tessera::cli {

struct CompileRequest {
  std::string model;
  std::string pipeline;
  std::string overlay;   ///< when set, merged onto `pipeline` first (an A/B arm: docs/ab-testing.md)
  std::string target;    ///< overrides the pipeline's target when set
  std::string output;    ///< package path
  std::string sign_key;  ///< key file: sign the package with HMAC-SHA256 (read_package_key)
  std::vector<std::string> dump_after;
  std::string dump_directory;
  std::string dump_filter;      ///< `tile=0-3,op=dense1`: what the text dumps show (parse_dump_filter)
  bool print_changed = false;   ///< print the text dump after each pass that changed the state
  std::string phase_directory;  ///< when set, phase-K.txt per non-empty exchange phase
  std::uint64_t schedule_budget_ms = 2000;
  unsigned threads = 0;  ///< 0: the machine's cores
  /// On a plugin fault, the bundle goes to <this>/<plugin>-<N>/ (default: <output dir>/reproducers).
  std::string reproducer_directory;
  bool write_reproducer = true;           ///< `tessera replay` turns it off: it reports, never re-bundles
  PluginQuarantine quarantine;            ///< `tessera replay`: no library from inside the bundle
  std::string json_path;                  ///< when set, the result and the compile record as JSON (--json)
  std::vector<std::string> input_shapes;  ///< --input-shape NAME=DIMS (ONNX models)
  std::vector<std::string> input_values;  ///< --input-value NAME=VALUES (ONNX models)
  bool float16_weights = false;           ///< --float16-weights
  /// Called before each pass and after the last (PassManagerOptions::on_pass): the progress line.
  std::function<void(std::size_t index, std::size_t count, const std::string& pass)> on_pass;
  /// How far the running pass is (PassManagerOptions::on_pass_progress): the progress line.
  std::function<void(std::uint64_t done, std::uint64_t total, std::string_view unit)> on_pass_progress;
};

struct CompileResult {
  std::string package_path;
  std::uint32_t tiles = 0;
  std::size_t supersteps = 0;
  PackageEstimates estimates;
  std::int64_t compile_ms = 0;
  CompileRecord record;  ///< statistics, remarks and pass timings
};

/// Loads, resolves and runs the pipeline, then writes the package atomically. Throws
/// Error on any user-facing problem; no package is written then. When a plugin faults
/// (throws, returns an invalid schedule or leaves an invalid program) a reproducer bundle
/// is written first and its folder named in the error (docs/reliability.md).
CompileResult compile(const CompileRequest& request);

/// Loads and resolves a pipeline (with an optional overlay merged onto it and an optional target
/// override) and returns it as YAML.
std::string resolved_pipeline_yaml(const std::string& pipeline, const std::string& overlay, const std::string& target);

}  // namespace tessera::cli
