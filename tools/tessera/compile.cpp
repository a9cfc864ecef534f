// The compile driver: pipeline -> plugins -> passes -> package.
#include "compile.hpp"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "json_output.hpp"
#include "model_data.hpp"
#include "replay_command.hpp"

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/pass_manager.hpp"
#include "tessera/pipeline.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/version.hpp"
#include "overlay.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

// The pipeline file a compile loads: the given one, or the base with an overlay merged onto it
// in a temporary folder that goes away with this object (every path in it is absolute).
class MergedPipelineFile {
public:
  MergedPipelineFile(const std::string& pipeline, const std::string& overlay) : pipeline_(pipeline), overlay_(overlay) {
    path_ = pipeline;
    if (overlay.empty()) return;
    std::error_code ec;
    if (!fs::is_regular_file(overlay, ec)) throw Error(overlay + ": overlay file not found (given with --overlay)");
    std::string pattern = (fs::temp_directory_path() / "tessera-overlay-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
    folder_ = pattern;
    path_ = (fs::path(folder_) / "pipeline.yaml").string();
    try {
      overlay::merge_overlay_into_file(pipeline, overlay, path_,
                                       "# " + overlay + " merged onto " + pipeline + " by tessera compile --overlay\n");
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + origin());
    }
  }
  ~MergedPipelineFile() {
    std::error_code ec;
    if (!folder_.empty()) fs::remove_all(folder_, ec);
  }
  MergedPipelineFile(const MergedPipelineFile&) = delete;
  MergedPipelineFile& operator=(const MergedPipelineFile&) = delete;
  const std::string& path() const { return path_; }
  /// Runs `action`; an Error it throws about the merged file also names the overlay and the base.
  template <typename Action>
  auto with_origin(Action&& action) const {
    try {
      return action();
    } catch (const Error& e) {
      if (overlay_.empty()) throw;
      throw Error(std::string(e.what()) + origin());
    }
  }
  std::string origin() const { return " [overlay " + overlay_ + " merged onto " + pipeline_ + "]"; }

private:
  std::string pipeline_, overlay_, folder_, path_;
};

PipelineSpec load_resolved(const MergedPipelineFile& pipeline, const std::string& target, PluginHost& host) {
  return pipeline.with_origin([&] {
    PipelineSpec spec = load_pipeline(pipeline.path());
    if (!target.empty()) {
      std::error_code ec;
      if (!fs::is_regular_file(target, ec)) throw Error(target + ": target file not found (given with --target)");
      spec.target = fs::absolute(target).lexically_normal().string();
      spec.target_place = "--target";
    }
    resolve_pipeline(spec, host);
    return spec;
  });
}

}  // namespace

std::string resolved_pipeline_yaml(const std::string& pipeline, const std::string& overlay, const std::string& target) {
  PluginHost host;
  const MergedPipelineFile merged(pipeline, overlay);
  return print_pipeline(load_resolved(merged, target, host));
}

std::string bundled_plugin_directory() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path candidate : {exe.parent_path().parent_path() / "plugins", exe.parent_path().parent_path() / "lib/tessera/plugins"})
    if (fs::is_directory(candidate, ec)) return candidate.string();
  return "";
}

// Every file a compile reads, so that no output lands on one of them.
static std::vector<InputFile> compile_inputs(const CompileRequest& request, const PipelineSpec& spec, const PluginHost& host) {
  std::vector<InputFile> inputs{{request.model, "the model"}, {request.pipeline, "the pipeline"}, {spec.target, "the target"}};
  for (const PluginInfo* plugin : host.plugins()) inputs.push_back({plugin->file, "the plugin library"});
  return inputs;
}

Package& finish_package(CompilationState& state) {
  Package& package = state.package;
  package.compiler_version = kCoreVersion;
  package.target = state.target;
  package.target_hash = state.target.hash();
  package.codelet_set_version = kCodeletSetVersion;
  package.graph = state.model;
  package.superstep_labels.clear();
  for (const auto& step : state.program.supersteps) package.superstep_labels.push_back(step.label);
  package.estimates = state.estimates;
  return package;
}

CompileResult compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto log = logger("tessera.build");
  if (request.output.empty()) throw Error("no output package given (use -o PACKAGE)");

  // A bad key file fails before the compile's work is done.
  const std::optional<PackageKey> key =
      request.sign_key.empty() ? std::nullopt : std::optional<PackageKey>(read_package_key(request.sign_key));
  PluginHost host;
  host.quarantine(request.quarantine);
  const MergedPipelineFile pipeline(request.pipeline, request.overlay);
  PipelineSpec spec = load_resolved(pipeline, request.target, host);
  std::vector<InputFile> inputs = compile_inputs(request, spec, host);
  inputs.push_back({request.overlay, "the overlay (--overlay)"});
  inputs.push_back({request.sign_key, "the signing key (--sign)"});
  check_output_file(request.output, "the package (-o)", inputs);
  check_output_file(request.json_path, "the JSON record (--json)", inputs);
  CompilationState state;
  state.target = load_target(spec.target);
  state.model = load_any_model(request.model);
  state.facts.insert(facts::graph);
  const unsigned threads = request.threads != 0 ? request.threads : std::max(1u, std::thread::hardware_concurrency());
  log->info("compiling model={} pipeline={} target={} tiles={} cost_model={} exchange_scheduler={} passes={} threads={}",
            state.model.name, spec.name, state.target.name, state.target.tiles, spec.cost_model.plugin,
            spec.exchange_scheduler.plugin, spec.passes.size(), threads);

  PassManagerOptions options;
  options.dump_after = request.dump_after;
  options.dump_directory = request.dump_directory.empty()
                               ? (fs::path(request.output).parent_path() / "dumps").string()
                               : request.dump_directory;
  options.schedule_budget_ms = request.schedule_budget_ms;
  options.threads = threads;
  PassManager manager(spec, host, options);
  if (Status status = manager.run(state); !status.ok) {
    std::string bundle_note;
    if (const PluginFault* fault = manager.fault(); fault && request.write_reproducer) {
      const std::string parent = request.reproducer_directory.empty()
                                     ? (fs::path(request.output).parent_path() / "reproducers").string()
                                     : request.reproducer_directory;
      // The bundle is a help, never a second failure: the plugin's error is what the user must see.
      try {
        const std::string bundle = write_reproducer(parent, spec, host, *fault, request.model, request.schedule_budget_ms);
        bundle_note = " (reproducer: " + bundle + "; run `tessera replay " + bundle + "`)";
      } catch (const std::exception& e) {
        log->warn("could not write a reproducer bundle into {}: {}", parent, e.what());
      }
    }
    throw Error(request.model + ": compile failed: " + status.message + bundle_note);
  }
  if (!state.facts.count(facts::tile_images))
    throw Error(spec.file + ": the pipeline never provides 'tile-images', so there is no package to write; "
                "end it with emit-tile-code");

  if (!request.phase_directory.empty()) {
    fs::create_directories(request.phase_directory);
    for (std::size_t k = 0; k < state.program.supersteps.size(); ++k) {
      if (state.program.supersteps[k].exchange.transfers.empty()) continue;
      const std::string file = (fs::path(request.phase_directory) / ("phase-" + std::to_string(k) + ".txt")).string();
      check_output_file(file, "a phase file (--emit-phases)", inputs);
      write_phase_file(state.program.supersteps[k].exchange, file);
    }
  }

  Package& package = finish_package(state);
  log->info("writing application package tiles={}", package.tiles.size());
  write_package(package, request.output, key ? &*key : nullptr);
  std::error_code ec;
  log->info("application package written path={} bytes={}", request.output, fs::file_size(request.output, ec));

  CompileResult result;
  result.package_path = request.output;
  result.tiles = state.target.tiles;
  result.supersteps = state.program.supersteps.size();
  result.estimates = state.estimates;
  result.compile_ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  result.record = std::move(state.record);
  if (!request.json_path.empty()) write_json(request.json_path, compile_json(result));
  return result;
}

}  // namespace tessera::cli
