// `tessera`: compile models, run packages on the simulator, list plugins.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <malloc.h>

#include <filesystem>

#include "ab_command.hpp"
#include "tune_command.hpp"
#include "calibrate_command.hpp"
#include "check_plugin_command.hpp"
#include "command_line.hpp"
#include "compile.hpp"
#include "compile_progress.hpp"
#include "cycles_command.hpp"
#include "fingerprint.hpp"
#include "opt_command.hpp"
#include "json_output.hpp"
#include "differential.hpp"
#include "model_data.hpp"
#include "plugins_command.hpp"
#include "replay_command.hpp"
#include "report_command.hpp"
#include "schedule_command.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"
#include "tessera/pass_manager.hpp"
#include "tessera/target.hpp"
#include "tessera/runtime/run.hpp"
#include "tessera/shipped_configs.hpp"
#include "tessera/version.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

void print_compile_result(const cli::CompileResult& r) {
  fmt::print(
      "package={} tiles={} supersteps={} estimated_cycles={} estimated_exchange_cycles={} "
      "scheduled_exchange_cycles={} exchange_lower_bound={} peak_tile_bytes={} compile_ms={}\n",
      r.package_path, r.tiles, r.supersteps, r.estimates.estimated_cycles, r.estimates.estimated_exchange_cycles,
      r.estimates.scheduled_exchange_cycles, r.estimates.exchange_lower_bound, r.estimates.peak_tile_bytes,
      r.compile_ms);
}

// Prints the run's result lines; returns the exit code (1 when the numbers are wrong).
void print_differential(const cli::DifferentialReport& report) {
  for (const cli::DifferentialOutput& output : report.outputs)
    fmt::print(
        "differential output={} elements={} maxAbsoluteError={:.9g} maxRelativeError={:.9g} mismatches={} "
        "atol={:.9g}\n",
        output.name, output.report.elements, output.report.max_abs_error, output.report.max_rel_error,
        output.report.mismatches, output.atol);
  fmt::print("differentialReference=onnxruntime-{} differentialTest={}\n", report.onnxruntime_version,
             report.passed ? "PASS" : "FAIL");
}

int print_run_result(const runtime::RunResult& r, const std::string& package_path) {
  if (!r.profile_path.empty())
    fmt::print("profile={} tiles={} samples={}\n", r.profile_path, r.tiles, r.profile_samples);
  fmt::print(
      "package={} tiles={} device_cycles={} end_to_end_cycles={} compute_cycles={} exchange_cycles={} "
      "sync_cycles={} host_cycles={}\n",
      package_path, r.tiles, r.cycles.total(), r.end_to_end_cycles(), r.cycles.compute, r.cycles.exchange,
      r.cycles.sync, r.host_run_cycles);
  fmt::print("device_bytes={} device_support_bytes={} host_tensor_bytes={}\n", r.device_bytes, r.device_support_bytes,
             r.host_tensor_bytes);
  if (r.expectation_checked)
    fmt::print(
        "expectedMaximumAbsoluteError={:.9g} expectedMaximumRelativeError={:.9g} mismatches={} elements={} "
        "expectTest={}\n",
        r.expectation.max_abs_error, r.expectation.max_rel_error, r.expectation.mismatches, r.expectation.elements,
        r.expectation.passed ? "PASS" : "FAIL");
  if (r.numerics_checked)
    fmt::print("referenceMaximumAbsoluteError={:.9g} tolerance={:.3g} numericalTest={}\n", r.numerics.max_abs_error,
               r.numerics.tolerance, r.numerics.passed ? "PASS" : "FAIL");
  return r.passed() ? 0 : 1;
}

// `tessera run --target T`: refuse a package compiled for another machine, naming both.
void check_package_target(const std::string& package_path, const std::string& target_path) {
  const Target expected = load_target(target_path);
  const Package package = read_package(package_path);
  if (package.target_hash != expected.hash())
    throw Error(
        fmt::format("{}: package was compiled for target '{}' (hash {:016x}), not for '{}' from {} (hash {:016x}); "
                    "recompile it with `tessera compile ... -t {}`",
                    package_path, package.target.name, package.target_hash, expected.name, target_path, expected.hash(),
                    target_path));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessera: a plugin-based compiler for tile-based BSP accelerators", "tessera"};
  // The build hash is the one `tessera ab` records: this binary and the core it loaded.
  app.set_version_flag("--version", std::function<std::string()>([] {
                         return fmt::format("tessera {} (build {}, plugin API {}.{}, ABI {})", kCoreVersion,
                                            ab::current_build().build_hash, kPluginApiMajor, kPluginApiMinor,
                                            abi_tag());
                       }));
  app.require_subcommand(1);
  // Global flags are accepted after the subcommand too (`tessera compile ... -v`).
  app.fallthrough();
  cli::LogFlags log_flags;
  cli::add_log_flags(app, log_flags);

  cli::CompileRequest compile_request;
  bool print_pipeline = false;
  auto* compile = app.add_subcommand("compile", "compile a model (YAML or ONNX) into a package");
  compile
      ->add_option("model", compile_request.model,
                   "model YAML or ONNX model (.onnx), or a shipped model's name (mlp-small)")
      ->transform(cli::shipped_config("models"))
      ->check(CLI::ExistingFile);
  compile
      ->add_option("--pipeline,-p", compile_request.pipeline,
                   "pipeline YAML, or a shipped pipeline's name (default, small, optimized, calibrated)")
      ->required()
      ->transform(cli::shipped_config("pipelines"))
      ->check(CLI::ExistingFile);
  compile
      ->add_option("--overlay", compile_request.overlay,
                   "pipeline overlay merged onto -p first, as `tessera ab` does for "
                   "an arm (docs/ab-testing.md)")
      ->check(CLI::ExistingFile);
  compile
      ->add_option("--target,-t", compile_request.target,
                   "target YAML or a shipped target's name (t1472, t1472-ideal, t16); overrides the pipeline's")
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  compile->add_option("--output,-o", compile_request.output, "package file to write (.tpkg)");
  compile->add_option("--input-shape", compile_request.input_shapes,
                      "NAME=DIMS: fix an ONNX graph input's dims, e.g. x=1x3x640x640 (repeatable; docs/onnx.md)");
  compile->add_option("--input-value", compile_request.input_values,
                      "NAME=VALUES: freeze an ONNX graph input to a constant: numbers joined by ',' (16000, 1,0,2) "
                      "or a .pb/.npy file; folding then runs through it (repeatable; docs/onnx.md)");
  compile->add_flag("--float16-weights", compile_request.float16_weights,
                    "store float32 matmul weights and biases as float16 (products accumulate in float32; a run "
                    "widens its tolerances for it; docs/models.md)");
  bool compile_mkdir = false;
  compile->add_flag("--mkdir", compile_mkdir, "create the folders of -o and --json when missing");
  compile->add_option("--sign", compile_request.sign_key,
                      "sign the package: HMAC-SHA256 with this key file (docs/reliability.md)");
  compile->add_flag("--print-pipeline", print_pipeline, "print the resolved pipeline as YAML and stop");
  compile->add_option("--dump-after", compile_request.dump_after,
                      "write the state after this pass (name, or 'all'): PHASE.tstate, loadable by `tessera opt`, and "
                      "PHASE.dump, text");
  compile->add_option("--dump-dir", compile_request.dump_directory,
                      "folder for --dump-after files (default: beside the package)");
  compile->add_option("--dump-filter", compile_request.dump_filter,
                      "what the text dumps and --print-changed show: tile=0-3,op=dense1 (docs/state-files.md)");
  compile->add_flag("--print-changed", compile_request.print_changed,
                    "print the state (as --dump-filter shows it) after each pass that changed it");
  compile->add_option("--schedule-budget-ms", compile_request.schedule_budget_ms,
                      "time budget per exchange phase for the scheduler");
  compile->add_option("--emit-phases", compile_request.phase_directory,
                      "write each exchange phase as a phase file into this folder");
  compile
      ->add_option(
          "--threads", compile_request.threads,
          "compile threads the passes may use (default: the machine's cores; the package is the same for any count)")
      ->check(CLI::Range(1u, 1024u));
  compile->add_option("--json", compile_request.json_path,
                      "write the result, statistics, remarks and pass times as JSON (docs/json-output.md)");
  bool time_report = false;
  compile->add_flag("--time-report", time_report,
                    "print wall time per pass, cost-model and scheduler time split out, at the end");
  compile->add_option("--reproducer-dir", compile_request.reproducer_directory,
                      "where a plugin fault's reproducer bundle goes (default: <package dir>/reproducers)");

  std::string replay_bundle;
  auto* replay = app.add_subcommand("replay", "run the failing plugin of a reproducer bundle alone on its input");
  replay->add_option("bundle", replay_bundle, "bundle folder printed by a failed `tessera compile`")
      ->required()
      ->check(CLI::ExistingDirectory);
  std::vector<std::string> replay_trusted_plugins;
  replay
      ->add_option(
          "--trust-bundle-plugin", replay_trusted_plugins,
          "a library inside the bundle that may be loaded (never done otherwise: bundles can come from anyone)")
      ->check(CLI::ExistingFile);

  std::string run_package_path;
  runtime::RunOptions run_options;
  auto* run = app.add_subcommand("run", "run a package on the simulator and check its numbers");
  run->add_option("package", run_package_path, "package file (.tpkg)")->required()->check(CLI::ExistingFile);
  run->add_option("--profile", run_options.profile_path, "write the execution profile (JSON) here");
  run->add_option("--trace", run_options.trace_path, "write a Chrome trace (opens in Perfetto) here");
  run->add_option("--lock", run_options.lock_path,
                  "device lock file (default: $XDG_RUNTIME_DIR/tessera/sim0.lock, else $TMPDIR/tessera-UID/sim0.lock)");
  std::string run_json_path;
  run->add_option("--json", run_json_path, "write the run's cycles and numerics as JSON (docs/json-output.md)");
  run->add_option("--verify", run_options.verify_key,
                  "refuse the package unless signed with this key file (compile --sign)");
  std::string run_target_path;
  run->add_option("--target,-t", run_target_path,
                  "refuse the package unless it was compiled for this target (YAML, or a shipped target's name)")
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  cli::RunData run_data;
  run->add_option("--weights", run_data.weights,
                  "ONNX model whose weights to use (default: the model the package was compiled from)")
      ->check(CLI::ExistingFile);
  run->add_option("--input", run_data.inputs,
                  "NAME=FILE: an input's values from an ONNX TensorProto (.pb) or NumPy (.npy) file (repeatable)");
  run->add_option("--expect", run_data.expected,
                  "NAME=FILE: expected values of an output (.pb or .npy), compared element by element (repeatable)");
  run->add_option("--rtol", run_options.expect_rtol, "relative tolerance of --expect (default 1e-3, ONNX's)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--atol", run_options.expect_atol, "absolute tolerance of --expect (default 1e-7, ONNX's)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--output-dir", run_data.output_directory, "write each output here as NAME.pb (or .npy), atomically");
  run->add_option("--output-format", run_data.output_format, "pb (ONNX TensorProto, default) or npy")
      ->check(CLI::IsMember({"pb", "npy"}));
  run->add_flag("--differential", run_data.differential,
                "also run the same inputs through ONNX Runtime (tools/onnxruntime) and print the largest absolute and "
                "relative error of each output; fails beyond --rtol/--atol");

  cli::CompileRequest demo_request;
  demo_request.model = "mlp-b2-n3";
  demo_request.pipeline = "default";
  runtime::RunOptions demo_run;
  auto* demo = app.add_subcommand("demo", "compile mlp-b2-n3, run it on the simulator, check the numbers");
  demo->add_option("--model", demo_request.model, "model YAML or a shipped model's name")
      ->capture_default_str()
      ->transform(cli::shipped_config("models"))
      ->check(CLI::ExistingFile);
  demo->add_option("--pipeline", demo_request.pipeline, "pipeline YAML or a shipped pipeline's name")
      ->capture_default_str()
      ->transform(cli::shipped_config("pipelines"))
      ->check(CLI::ExistingFile);
  demo->add_option("--target", demo_request.target, "target YAML or a shipped target's name; overrides the pipeline's")
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  demo->add_option("--output", demo_request.output,
                   "package file to write, its folder created (default: tessera-demo/MODEL.tpkg here)");
  demo->add_option("--lock", demo_run.lock_path, "device lock file");

  cli::ScheduleRequest schedule_request;
  auto* schedule = app.add_subcommand("schedule", "schedule one exchange phase file with one scheduler plugin");
  schedule->add_option("phase", schedule_request.phase, "phase file: `tiles N` then `SRC DST[,DST...] WORDS` lines")
      ->required()
      ->check(CLI::ExistingFile);
  schedule->add_option("--target,-t", schedule_request.target, "target YAML or a shipped target's name")
      ->required()
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  schedule->add_option("--scheduler,-s", schedule_request.scheduler, "exchange-scheduler plugin name")->required();
  schedule->add_option("--option", schedule_request.options, "plugin option KEY=VALUE (repeatable)");
  schedule->add_option("--emit", schedule_request.emit, "write the schedule file (TRANSFER START WORDS lines)");
  schedule->add_option("--budget-ms", schedule_request.budget_ms, "time budget given to the scheduler");
  schedule->add_option("--json", schedule_request.json_path, "write the result as JSON (docs/json-output.md)");
  schedule->add_option("--plugin-path", schedule_request.plugin_paths, "another folder of plugins")
      ->check(CLI::ExistingDirectory);

  std::vector<std::string> plugin_paths;
  std::string plugin_name;
  auto* plugins = app.add_subcommand("plugins", "list the available plugins, or show one");
  plugins->require_subcommand(1);
  auto* list = plugins->add_subcommand("list", "every plugin found: bundled, TESSERA_PLUGIN_PATH, --plugin-path");
  auto* info = plugins->add_subcommand("info", "one plugin's kind, version, ABI, file and options");
  info->add_option("name", plugin_name, "plugin name")->required();
  for (auto* sub : {list, info})
    sub->add_option("--plugin-path", plugin_paths, "another folder of plugins")->check(CLI::ExistingDirectory);

  cli::CheckPluginRequest check_request;
  auto* check_plugin =
      app.add_subcommand("check-plugin", "run a conformance battery on one plugin library: PASS/FAIL per check");
  check_plugin->add_option("file", check_request.file, "plugin library (.so)")->required()->check(CLI::ExistingFile);
  check_plugin->add_option("--target,-t", check_request.target, "also check against this target (YAML or shipped name)")
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  check_plugin->add_option("--budget-ms", check_request.budget_ms,
                           "time budget given to a scheduler per phase (default 500)");
  check_plugin
      ->add_option("--timeout", check_request.timeout_s, "seconds before a check is killed and fails (default 120)")
      ->check(CLI::PositiveNumber);

  cli::ReportRequest report_request;
  auto* report = app.add_subcommand("report", "draw a package's memory, cycles and one exchange phase as an HTML page");
  report->add_option("package", report_request.package, "package file (.tpkg)")->required()->check(CLI::ExistingFile);
  report
      ->add_option("--profile", report_request.profile,
                   "profile from `tessera run --profile` (default: cycles from the codelet formulas)")
      ->check(CLI::ExistingFile);
  report->add_option("--html,-o", report_request.html, "the page to write")->required();
  report->add_option("--phase", report_request.phase,
                     "exchange phase (superstep) to draw (default: the largest horizon)");
  report->add_option("--tiles", report_request.timeline_tiles, "busiest tiles on the exchange timeline (default 16)")
      ->check(CLI::Range(1u, 4096u));

  cli::CalibrateRequest calibrate_request;
  auto* calibrate =
      app.add_subcommand("calibrate", "fit the calibrated cost model's formulas on simulator microbenchmarks");
  calibrate->add_option("--target,-t", calibrate_request.target, "target to calibrate for (YAML or shipped name)")
      ->required()
      ->transform(cli::shipped_config("targets"))
      ->check(CLI::ExistingFile);
  calibrate->add_option("--output,-o", calibrate_request.output, "table file to write (YAML)")->required();
  calibrate->add_option("--scheduler,-s", calibrate_request.scheduler,
                        "exchange scheduler the exchange formula measures (default greedy)");
  calibrate->add_option("--plugin-path", calibrate_request.plugin_paths, "another folder of plugins")
      ->check(CLI::ExistingDirectory);
  calibrate->add_option(
      "--lock", calibrate_request.lock_path,
      "device lock file (default: $XDG_RUNTIME_DIR/tessera/sim0.lock, else $TMPDIR/tessera-UID/sim0.lock)");

  cli::CyclesRequest cycles_request;
  auto* cycles = cli::add_cycles_command(app, cycles_request);

  cli::OptRequest opt_request;
  auto* opt = cli::add_opt_command(app, opt_request);

  auto ab_command = cli::add_ab_command(app);
  auto tune_command = cli::add_tune_command(app);

  std::vector<std::string> help_words;
  auto* help = cli::add_help_command(app, help_words);
  cli::refuse_negative_unsigned(app);
  if (const std::optional<int> status = cli::parse_command_line(app, argc, argv)) return *status;
  if (*help) return cli::run_help_command(app, help_words);
  remove_temporary_files_on_signals();
  try {
    cli::configure_command_logging(log_flags);
    if (*compile) {
      if (print_pipeline) {
        fmt::print("{}", cli::resolved_pipeline_yaml(compile_request.pipeline, compile_request.overlay,
                                                     compile_request.target));
        return 0;
      }
      if (compile_request.model.empty())
        throw Error("tessera compile: no model given (tessera compile MODEL -p PIPELINE -o PACKAGE)");
      cli::check_output_folder(compile_request.output, "-o", compile_mkdir);
      cli::check_output_folder(compile_request.json_path, "--json", compile_mkdir);
      std::optional<cli::CompileResult> result;
      {
        cli::CompileProgress progress("compile " + fs::path(compile_request.model).stem().string());
        compile_request.on_pass = progress.on_pass();
        compile_request.on_pass_progress = progress.on_pass_progress();
        // The planner makes and drops large vectors per candidate: kept in the heap rather than
        // mapped and unmapped each time (page faults were a tenth of BERT-base's compile). Only
        // here: `demo` runs after compiling, and a run returns what it frees to keep its peak low.
        mallopt(M_MMAP_THRESHOLD, 1 << 30);
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
        result = cli::compile(compile_request);
      }
      print_compile_result(*result);
      if (time_report) fmt::print(stderr, "{}", tessera::time_report(result->record.timings));
      return 0;
    }
    if (*run) {
      // Large blocks (tensors, the package's bytes) mapped and unmapped, always: glibc's sliding
      // threshold would otherwise keep them in the heap after the first large free, holding the peak.
      mallopt(M_MMAP_THRESHOLD, 256 << 10);
      if (!run_target_path.empty()) check_package_target(run_package_path, run_target_path);
      check_output_file(run_json_path, "the JSON record (--json)", {{run_package_path, "the package"}});
      run_options.package_path = run_package_path;
      Package package = runtime::read_package_to_run(run_options);
      cli::PreparedRun prepared = cli::prepare_run(package, run_data, run_options);
      // An imported model's weights are read once the device holds the program, not beside the package's copy.
      if (!prepared.model.empty())
        run_options.read_weights = [&] { return cli::read_model_weights(package, run_data, prepared); };
      // The device keeps the program once loaded; the graph stays for the differential check.
      const runtime::RunResult result = runtime::run_package_releasing_tiles(package, run_options, run_package_path);
      if (!run_json_path.empty()) cli::write_json(run_json_path, cli::run_json(result, run_package_path));
      if (!run_options.trace_path.empty()) fmt::print("trace={}\n", run_options.trace_path);
      if (!run_data.output_directory.empty())
        for (const std::string& file : cli::write_outputs(package.graph, result.outputs, prepared, run_data))
          fmt::print("output={}\n", file);
      const int status = print_run_result(result, run_package_path);
      if (!run_data.differential) return status;
      const cli::DifferentialReport differential =
          cli::differential_check(package, prepared, run_options, result.outputs);
      print_differential(differential);
      return differential.passed ? status : 1;
    }
    if (*demo) {
      // CLI11 transforms given values only: the defaults are names to find here.
      demo_request.model = find_config(demo_request.model, "models", "--model");
      demo_request.pipeline = find_config(demo_request.pipeline, "pipelines", "--pipeline");
      if (demo_request.output.empty())
        demo_request.output = "tessera-demo/" + fs::path(demo_request.model).stem().string() + ".tpkg";
      std::optional<cli::CompileResult> demo_compile;
      {
        cli::CompileProgress progress("compile " + fs::path(demo_request.model).stem().string());
        demo_request.on_pass = progress.on_pass();
        demo_request.on_pass_progress = progress.on_pass_progress();
        demo_compile = cli::compile(demo_request);
      }
      const cli::CompileResult& compiled = *demo_compile;
      print_compile_result(compiled);
      demo_run.package_path = compiled.package_path;
      demo_run.profile_path = (fs::path(compiled.package_path).parent_path() / "profile.json").string();
      return print_run_result(runtime::run_package(demo_run), compiled.package_path);
    }
    if (*schedule) return cli::schedule_command(schedule_request);
    if (*replay) return cli::replay_command(replay_bundle, replay_trusted_plugins);
    if (*calibrate) return cli::calibrate_command(calibrate_request);
    if (*report) return cli::report_command(report_request);
    if (*cycles) return cli::cycles_command(cycles_request);
    if (*opt) return cli::opt_command(opt_request);
    if (cli::ab_command_chosen(*ab_command)) return cli::run_ab_command(*ab_command);
    if (cli::tune_command_chosen(*tune_command)) return cli::run_tune_command(*tune_command);
    if (*check_plugin) return cli::check_plugin_command(check_request);
    if (*plugins) return cli::plugins_command(*info ? plugin_name : "", plugin_paths);
  } catch (const PluginError& e) {
    fmt::print(stderr, "error: {}\n", printable_error(e.what()));
    return 1;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", printable_error(e.what()));
    return cli::kExitUserError;
  } catch (const std::exception& e) {
    fmt::print(stderr, "internal error: {}\n", printable_error(e.what()));
    return cli::kExitInternal;
  }
  return cli::kExitSuccess;
}
