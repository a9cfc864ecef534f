// `tessera compile`: a Session from the request, the model loaded, the package written atomically.
#include "compile.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <thread>

#include "json_output.hpp"
#include "model_data.hpp"

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/onnx/import.hpp"
#include "tessera/output_file.hpp"
#include "tessera/session.hpp"
#include "tessera/state_file.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

std::string resolved_pipeline_yaml(const std::string& pipeline, const std::string& overlay, const std::string& target) {
  SessionOptions options;
  options.pipeline = pipeline;
  options.overlay = overlay;
  options.target = target;
  return Session(options).resolved_yaml();
}

// Every file a compile reads, so that no output lands on one of them.
static std::vector<InputFile> compile_inputs(const CompileRequest& request, const PipelineSpec& spec,
                                             const PluginHost& host) {
  std::vector<InputFile> inputs{
      {request.model, "the model"}, {request.pipeline, "the pipeline"}, {spec.target, "the target"}};
  for (const PluginInfo* plugin : host.plugins()) inputs.push_back({plugin->file, "the plugin library"});
  return inputs;
}

CompileResult compile(const CompileRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  auto log = logger("tessera.build");
  if (request.output.empty()) throw Error("no output package given (use -o PACKAGE)");

  // A bad key file fails before the compile's work is done.
  const std::optional<PackageKey> key =
      request.sign_key.empty() ? std::nullopt : std::optional<PackageKey>(read_package_key(request.sign_key));
  const unsigned threads = request.threads != 0 ? request.threads : std::max(1u, std::thread::hardware_concurrency());
  SessionOptions options;
  options.pipeline = request.pipeline;
  options.overlay = request.overlay;
  options.target = request.target;
  options.quarantine = request.quarantine;
  options.passes.dump_after = request.dump_after;
  options.passes.dump_directory = request.dump_directory.empty()
                                      ? (fs::path(request.output).parent_path() / "dumps").string()
                                      : request.dump_directory;
  options.passes.dump_filter = parse_dump_filter(request.dump_filter);
  options.passes.print_changed = request.print_changed;
  options.passes.schedule_budget_ms = request.schedule_budget_ms;
  options.passes.threads = threads;
  options.passes.on_pass = request.on_pass;
  options.passes.on_pass_progress = request.on_pass_progress;
  Session session(options);
  const PipelineSpec& spec = session.spec();
  std::vector<InputFile> inputs = compile_inputs(request, spec, session.host());
  inputs.push_back({request.overlay, "the overlay (--overlay)"});
  inputs.push_back({request.sign_key, "the signing key (--sign)"});
  check_output_file(request.output, "the package (-o)", inputs);
  check_output_file(request.json_path, "the JSON record (--json)", inputs);
  onnx_import::ImportOptions import_options;
  for (const std::string& text : request.input_shapes) onnx_import::add_input_shape(import_options, text);
  for (const std::string& text : request.input_values) onnx_import::add_input_value(import_options, text);
  Graph model = onnx_import::load_any_model(request.model, import_options);
  if (request.float16_weights) {
    const Float16Storage storage = store_weights_in_float16(model);
    log->info("stored weights as float16 weights={} bytes_saved={}", storage.weights, storage.bytes_saved);
    if (storage.weights == 0)
      log->warn("--float16-weights: {} has no float32 matmul weight or bias to store as float16", request.model);
  }
  CompilationState state = session.initial_state(std::move(model));
  // An in-process cost model's table for this target (calibrated) is read now: a missing one is
  // the pipeline's mistake, not a plugin fault mid-compile. An isolated one keeps its containment
  // (a crash there is the plugin's fault, with a reproducer).
  if (spec.cost_model.isolate != "process") {
    try {
      session.create_plugins();
      session.cost_model().estimate_exchange(ExchangePhase{}, state.target);
    } catch (const std::exception& e) {
      throw Error(request.pipeline + ": " + e.what());
    }
  }
  log->info(
      "compiling model={} pipeline={} target={} tiles={} cost_model={} exchange_scheduler={} passes={} threads={}",
      state.model.name, spec.name, state.target.name, state.target.tiles, spec.cost_model.plugin,
      spec.exchange_scheduler.plugin, spec.passes.size(), threads);

  FaultCapture capture;
  if (request.write_reproducer) {
    capture.folder = request.reproducer_directory.empty()
                         ? (fs::path(request.output).parent_path() / "reproducers").string()
                         : request.reproducer_directory;
    capture.model_path = request.model;
  }
  if (Status status = session.run(state, capture); !status.ok)
    throw Error(request.model + ": compile failed: " + status.message);
  Package& package = session.finish(state);

  if (!request.phase_directory.empty()) {
    const OwnedFolder folder(request.phase_directory, "the phase folder (--emit-phases)");
    for (std::size_t k = 0; k < state.program.supersteps.size(); ++k) {
      if (state.program.supersteps[k].exchange.transfers.empty()) continue;
      const std::string name = phase_file_name(k);
      check_output_file((fs::path(request.phase_directory) / name).string(), "a phase file (--emit-phases)", inputs);
      folder.write_file(name, phase_file_text(state.program.supersteps[k].exchange), "phase file");
    }
  }

  log->info("writing application package tiles={}", package.tiles.size());
  write_package(package, request.output, key ? &*key : nullptr);
  std::error_code ec;
  log->info("application package written path={} bytes={}", request.output, fs::file_size(request.output, ec));

  CompileResult result;
  result.package_path = request.output;
  result.tiles = state.target.tiles;
  result.supersteps = state.program.supersteps.size();
  result.estimates = state.estimates;
  result.compile_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  result.record = std::move(state.record);
  if (!request.json_path.empty()) write_json(request.json_path, compile_json(result));
  return result;
}

}  // namespace tessera::cli
