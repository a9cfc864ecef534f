// run_package: read a package, lock and load the device, stream, run, check numerics, profile.
#include "tessera/runtime/run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>

#include "log.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/device_lock.hpp"
#include "tessera/runtime/host_exchange.hpp"
#include "tessera/runtime/profile.hpp"

namespace tessera::runtime {

namespace {

using Clock = std::chrono::steady_clock;

std::int64_t elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

/// Runs `step`, re-throwing a package error with the package's name in front.
template <typename Step>
auto in_package(const std::string& package_name, Step&& step) {
  try {
    return step();
  } catch (const Error& error) {
    throw Error(fmt::format("{}: {}", package_name, error.what()));
  }
}

}  // namespace

RunResult run_package(const RunOptions& options) {
  spdlog::logger& log = detail::logger();
  if (options.package_path.empty())
    throw Error("no package to run: give the path of a .tpkg file");
  const std::vector<InputFile> inputs{{options.package_path, "the package"}, {options.verify_key, "the key (--verify)"}};
  check_output_file(options.profile_path, "the profile (--profile)", inputs);
  check_output_file(options.trace_path, "the trace (--trace)", inputs);
  check_output_file(options.lock_path, "the device lock (--lock)", inputs);
  const std::optional<PackageKey> key =
      options.verify_key.empty() ? std::nullopt : std::optional<PackageKey>(read_package_key(options.verify_key));
  const auto started = Clock::now();
  log.info("reading application package path={} verify={}", options.package_path, key ? "hmac-sha256" : "no");
  const Package package = read_package(options.package_path, key ? &*key : nullptr);
  log.info("application package read tiles={} compiler={} elapsed_ms={}", package.tiles.size(),
           package.compiler_version, elapsed_ms(started));
  return run_package(package, options, options.package_path);
}

RunResult run_package(const Package& package, const RunOptions& options,
                      const std::string& package_name) {
  spdlog::logger& log = detail::logger();
  RunResult result;

  DeviceLock lock(options.lock_path.empty() ? default_lock_path() : options.lock_path);
  lock.acquire(std::chrono::milliseconds{options.lock_timeout_ms});

  log.info("opening device backend={}", options.backend);
  std::unique_ptr<Device> device = open_device(options.backend);
  device->attach();
  log.info("device initialized backend={} tiles={}", device->backend(), package.target.tiles);

  auto step_started = Clock::now();
  log.info("loading application tile_count={}", package.tiles.size());
  in_package(package_name, [&] { device->load(package); });
  log.info("application loaded tile_count={} supersteps={} elapsed_ms={}", package.tiles.size(),
           package.superstep_labels.size(), elapsed_ms(step_started));

  // The host's tensors: every input and weight from the model's deterministic initial
  // values. The reference uses exactly these float32 numbers.
  step_started = Clock::now();
  HostTensors values = initial_host_tensors(package.graph, TensorKind::weight);
  values.merge(initial_host_tensors(package.graph, TensorKind::input));
  const HostCallSummary initialize_call = summarize_host_call(package, {StreamKind::weight});
  const HostCallSummary run_call =
      summarize_host_call(package, {StreamKind::input, StreamKind::output});
  log.info("starting host exchange session streams={} elapsed_ms={}", package.streams.size(),
           elapsed_ms(step_started));

  step_started = Clock::now();
  log.info("invoking streaming host exchange call call=\"initialize\" phases={} bytes={}",
           initialize_call.phases, initialize_call.bytes);
  in_package(package_name, [&] { device->initialize(values); });
  log.info("host exchange call finished call=\"initialize\" elapsed_ms={}", elapsed_ms(step_started));

  step_started = Clock::now();
  log.info("invoking streaming host exchange call call=\"run\" phases={} bytes={}",
           run_call.phases, run_call.bytes);
  result.outputs = in_package(package_name, [&] { return device->run(values); });
  const ExecutionProfile& profile = device->profile();
  result.cycles = profile.cycles;
  result.tiles = profile.tiles;
  result.profile_samples = profile.samples();
  for (const SuperstepProfile& step : profile.supersteps) {
    result.words_exchanged += step.words_received;
    result.words_unreceived += step.words_unreceived;
  }
  result.host_initialize_bytes = initialize_call.bytes;
  result.host_run_bytes = run_call.bytes;
  result.host_run_cycles = run_call.cycles(package.target);
  log.info("host exchange call finished call=\"run\" device_cycles={} end_to_end_cycles={} compute_cycles={} "
           "exchange_cycles={} sync_cycles={} host_cycles={} words_exchanged={} "
           "words_unreceived={} elapsed_ms={}",
           result.cycles.total(), result.end_to_end_cycles(), result.cycles.compute, result.cycles.exchange,
           result.cycles.sync, result.host_run_cycles, result.words_exchanged,
           result.words_unreceived, elapsed_ms(step_started));

  if (options.check_numerics) {
    step_started = Clock::now();
    const ReferenceValues reference = execute_reference(package.graph, values);
    result.numerics = compare_with_reference(package.graph, result.outputs, reference,
                                             options.atol, options.rtol);
    result.numerics_checked = true;
    log.info("compared outputs with the float64 reference elements={} max_abs_error={} "
             "max_abs_reference={} tolerance={} worst_tensor={} worst_index={} passed={} "
             "elapsed_ms={}",
             result.numerics.elements, result.numerics.max_abs_error,
             result.numerics.max_abs_reference, result.numerics.tolerance,
             result.numerics.worst_tensor, result.numerics.worst_index, result.numerics.passed,
             elapsed_ms(step_started));
  }

  if (!options.profile_path.empty()) {
    write_profile(profile, options.profile_path);
    result.profile_path = options.profile_path;
    log.info("profile written path={} tiles={} samples={}", options.profile_path, result.tiles,
             result.profile_samples);
  }
  if (!options.trace_path.empty()) {
    write_chrome_trace(profile, options.trace_path, &package);
    log.info("trace written path={} format=chrome-trace", options.trace_path);
  }
  return result;
}

}  // namespace tessera::runtime
