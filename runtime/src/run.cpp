// run_package: read a package, lock and load the device, stream, run, check numerics, profile.
#include "tessera/runtime/run.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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

/// The memory this host lets a run take: the least of its physical memory and the address-space
/// and data limits (ulimit -v, -d) the process runs under.
std::uint64_t host_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGESIZE);
  std::uint64_t limit = pages > 0 && page_bytes > 0 ? static_cast<std::uint64_t>(pages) * page_bytes : UINT64_MAX;
  for (int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit bound {};
    if (::getrlimit(resource, &bound) == 0 && bound.rlim_cur != RLIM_INFINITY)
      limit = std::min<std::uint64_t>(limit, bound.rlim_cur);
  }
  return limit;
}

/// Refuses, before anything is allocated, a package that would compute nothing (no outputs, or
/// an output without its stream back to the host) or that needs more memory than this host
/// gives: the simulated tiles' buffers plus the host's tensors (float32 values and the float64
/// reference). A package's target is its own claim; the host is the machine it runs on.
void check_runnable(const Package& package, const std::string& package_name, std::uint64_t limit) {
  const Graph& graph = package.graph;
  if (graph.outputs.empty())
    throw Error(
        fmt::format("{}: the model has no outputs, so a run would compute and check nothing; recompile the "
                    "package from a model with outputs",
                    package_name));
  for (std::uint32_t output : graph.outputs) {
    const std::string& name = graph.tensors[output].name;
    const bool streamed = std::any_of(package.streams.begin(), package.streams.end(), [&](const PackageStream& s) {
      return s.kind == StreamKind::output && s.tensor == name;
    });
    if (!streamed)
      throw Error(
          fmt::format("{}: output '{}' has no stream back to the host, so the package does not define it; "
                      "recompile the package",
                      package_name, name));
  }
  // Both sums are bounded: the reader caps tiles, bytes per tile and tensor sizes.
  std::uint64_t device_bytes = 0, host_bytes = 0;
  for (const TileImage& image : package.tiles) {
    std::uint64_t extent = 0;
    for (const TileBufferEntry& entry : image.buffers)
      extent = std::max<std::uint64_t>(extent, std::uint64_t{entry.offset} + entry.bytes);
    device_bytes += extent;
  }
  for (const Tensor& tensor : graph.tensors)
    host_bytes += static_cast<std::uint64_t>(tensor.elements()) * (sizeof(float) + sizeof(double));
  if (device_bytes > limit || host_bytes > limit - device_bytes)
    throw Error(
        fmt::format("{}: running it needs {} bytes of simulated tile memory ({} tiles of target '{}') and {} "
                    "bytes of host tensors, more than the {} bytes this machine gives the run (its physical "
                    "memory, ulimit -v and -d); run it on a larger machine, or recompile for a smaller target",
                    package_name, device_bytes, package.tiles.size(), package.target.name, host_bytes, limit));
}

/// Every weight and input of `graph`: given values (checked against the graph), else the
/// model's generated ones. An imported model's weights must be given: its seed means nothing.
/// Ids a graph input feeds straight into an embedding must name a row (ONNX Gather errs on any
/// other; the device would read zeros): given ones are refused by element, generated ones (small
/// integers around 0) are folded into [0, rows).
void check_embedding_ids(const Graph& graph, HostTensors& inputs, const std::vector<std::string>& generated) {
  for (const Op& op : graph.ops) {
    if (op.kind != OpKind::embedding || op.inputs.size() != 2) continue;
    const Tensor& ids = graph.tensors.at(op.inputs[1]);
    if (ids.kind != TensorKind::input) continue;
    const std::int64_t rows = graph.tensors.at(op.inputs[0]).rows();
    std::vector<float>& words = inputs.at(ids.name);
    const bool was_generated = std::find(generated.begin(), generated.end(), ids.name) != generated.end();
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::int64_t id = word_int(words[i]);
      if (was_generated) {
        words[i] = int_word(static_cast<std::int32_t>(((id % rows) + rows) % rows));
      } else if (id < -rows || id >= rows) {
        throw Error(
            fmt::format("input '{}' element {} is {}, outside [{}, {}): it indexes the {} rows of embedding "
                        "table '{}' (negative ids count from the end, as ONNX Gather's); give ids in range",
                        ids.name, i, id, -rows, rows, rows, graph.tensors[op.inputs[0]].name));
      }
    }
  }
}

/// `weights` are the given ones (options.weights or what options.read_weights read), moved in:
/// a model's weights can be most of the host's memory.
HostTensors host_values(const Graph& graph, const RunOptions& options, HostTensors weights,
                        std::vector<std::string>& generated_inputs) {
  auto check_given = [&](const HostTensors& given, TensorKind kind, const char* what) {
    for (const auto& [name, data] : given) {
      const std::int64_t index = graph.find_tensor(name);
      if (index < 0 || graph.tensors[static_cast<std::size_t>(index)].kind != kind) {
        std::vector<std::string> names;
        for (const Tensor& tensor : graph.tensors)
          if (tensor.kind == kind) names.push_back(tensor.name);
        throw Error(fmt::format("{} '{}' is not one of the model's: {}", what, name, fmt::join(names, ", ")));
      }
      const Tensor& tensor = graph.tensors[static_cast<std::size_t>(index)];
      if (data.size() != static_cast<std::size_t>(tensor.elements()))
        throw Error(fmt::format("{} '{}' has {} values; the model's is [{}] ({} values)", what, name, data.size(),
                                fmt::join(tensor.shape, ", "), tensor.elements()));
    }
  };
  check_given(weights, TensorKind::weight, "weight");
  check_given(options.inputs, TensorKind::input, "input");
  HostTensors values;
  if (weights.empty()) {
    if (!graph.source_sha256.empty() && std::any_of(graph.tensors.begin(), graph.tensors.end(),
                                                    [](const Tensor& t) { return t.kind == TensorKind::weight; }))
      throw Error(
          fmt::format("the model was imported from {} (sha256 {}): its weights come from that file, which "
                      "`tessera run` reads (or give --weights FILE)",
                      graph.source_file, graph.source_sha256));
    values = initial_host_tensors(graph, TensorKind::weight);
  } else {
    for (const Tensor& tensor : graph.tensors)
      if (tensor.kind == TensorKind::weight && !weights.count(tensor.name))
        throw Error(fmt::format("no value given for weight '{}'", tensor.name));
    values = std::move(weights);
    // A float16 weight holds only halves: the device stores exactly these, and so does the reference.
    for (const Tensor& tensor : graph.tensors)
      if (tensor.kind == TensorKind::weight && tensor.dtype == DType::float16)
        for (float& value : values[tensor.name]) value = round_to_half(value);
  }
  HostTensors inputs = initial_host_tensors(graph, TensorKind::input);
  for (auto& [name, data] : inputs) {
    if (auto given = options.inputs.find(name); given != options.inputs.end()) data = given->second;
    else generated_inputs.push_back(name);
  }
  check_embedding_ids(graph, inputs, generated_inputs);
  values.merge(inputs);
  return values;
}

/// Per tile, the union of its buffer-table entries: the bytes the simulator holds for it.
std::uint64_t held_device_bytes(const Package& package) {
  std::uint64_t total = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const TileImage& tile : package.tiles) {
    ranges.clear();
    for (const TileBufferEntry& buffer : tile.buffers)
      ranges.emplace_back(buffer.offset, std::uint64_t{buffer.offset} + buffer.bytes);
    std::sort(ranges.begin(), ranges.end());
    std::uint64_t covered_to = 0;
    for (const auto& [begin, end] : ranges) {
      if (end > std::max(begin, covered_to)) total += end - std::max(begin, covered_to);
      covered_to = std::max(covered_to, end);
    }
  }
  return total;
}

/// The float32 values the host holds: every weight and input it streams in, every output it reads back.
std::uint64_t host_tensor_bytes(const Graph& graph) {
  std::uint64_t total = 0;
  for (std::uint32_t index = 0; index < graph.tensors.size(); ++index) {
    const Tensor& tensor = graph.tensors[index];
    const bool is_output = std::find(graph.outputs.begin(), graph.outputs.end(), index) != graph.outputs.end();
    if (tensor.kind != TensorKind::intermediate || is_output)
      total += static_cast<std::uint64_t>(tensor.elements()) * sizeof(float);
  }
  return total;
}

}  // namespace

Package read_package_to_run(const RunOptions& options) {
  spdlog::logger& log = detail::logger();
  if (options.package_path.empty()) throw Error("no package to run: give the path of a .tpkg file");
  const std::vector<InputFile> inputs{{options.package_path, "the package"},
                                      {options.verify_key, "the key (--verify)"}};
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
  return package;
}

namespace {

/// Runs `package`; with `releasing` (the same package) the device consumes its tile images as it
/// decodes them and the rest of them is freed after the load.
RunResult run_loaded(const Package& package, const RunOptions& options, const std::string& package_name,
                     Package* releasing, HostTensors* taken_weights) {
  spdlog::logger& log = detail::logger();
  RunResult result;

  check_runnable(package, package_name, options.host_memory_limit ? options.host_memory_limit : host_memory_limit());
  DeviceLock lock(options.lock_path.empty() ? default_lock_path() : options.lock_path);
  lock.acquire(std::chrono::milliseconds{options.lock_timeout_ms});

  log.info("opening device backend={}", options.backend);
  std::unique_ptr<Device> device = open_device(options.backend);
  device->attach();
  log.info("device initialized backend={} tiles={}", device->backend(), package.target.tiles);

  auto step_started = Clock::now();
  log.info("loading application tile_count={}", package.tiles.size());
  // Measured before a releasing load consumes the images.
  const std::size_t tile_count = package.tiles.size();
  result.device_bytes = held_device_bytes(package);
  result.host_tensor_bytes = host_tensor_bytes(package.graph);
  for (const TileImage& image : package.tiles) result.device_support_bytes += tile_support_bytes(image).total();
  in_package(package_name, [&] { releasing ? device->load_releasing(*releasing) : device->load(package); });
  if (releasing) {
    std::vector<TileImage>().swap(releasing->tiles);
    ::malloc_trim(0);  // millions of small entries freed: give their pages back, or the peak keeps them
  }
  log.info(
      "application loaded tile_count={} supersteps={} device_bytes={} device_support_bytes={} host_tensor_bytes={} "
      "elapsed_ms={}",
      tile_count, package.superstep_labels.size(), result.device_bytes, result.device_support_bytes,
      result.host_tensor_bytes, elapsed_ms(step_started));

  // The host's tensors: the given weights and inputs, the rest from the model's deterministic
  // initial values. The reference uses exactly these float32 numbers.
  log.info("starting host exchange session streams={}", package.streams.size());
  step_started = Clock::now();
  HostTensors given = options.read_weights ? options.read_weights()
                      : taken_weights      ? std::move(*taken_weights)
                                           : options.weights;
  if (options.read_weights) ::malloc_trim(0);  // the model's parse is freed: its pages go back before the tensors grow
  const std::size_t given_weights = given.size();
  HostTensors values = host_values(package.graph, options, std::move(given), result.generated_inputs);
  const HostCallSummary initialize_call = summarize_host_call(package, {StreamKind::weight});
  const HostCallSummary run_call = summarize_host_call(package, {StreamKind::input, StreamKind::output});
  log.info("prepared host tensors tensors={} given_weights={} given_inputs={} generated_inputs={} elapsed_ms={}",
           values.size(), given_weights, options.inputs.size(), result.generated_inputs.size(),
           elapsed_ms(step_started));

  step_started = Clock::now();
  log.info("invoking streaming host exchange call call=\"initialize\" phases={} bytes={}", initialize_call.phases,
           initialize_call.bytes);
  in_package(package_name, [&] { device->initialize(values); });
  log.info("host exchange call finished call=\"initialize\" elapsed_ms={}", elapsed_ms(step_started));

  step_started = Clock::now();
  log.info("invoking streaming host exchange call call=\"run\" phases={} bytes={}", run_call.phases, run_call.bytes);
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
  log.info(
      "host exchange call finished call=\"run\" device_cycles={} end_to_end_cycles={} compute_cycles={} "
      "exchange_cycles={} sync_cycles={} host_cycles={} words_exchanged={} "
      "words_unreceived={} elapsed_ms={}",
      result.cycles.total(), result.end_to_end_cycles(), result.cycles.compute, result.cycles.exchange,
      result.cycles.sync, result.host_run_cycles, result.words_exchanged, result.words_unreceived,
      elapsed_ms(step_started));

  if (options.check_numerics) {
    step_started = Clock::now();
    const ReferenceValues reference = execute_reference(package.graph, values, /*outputs_only=*/true);
    result.numerics = compare_with_reference(package.graph, result.outputs, reference, options.atol, options.rtol);
    result.numerics_checked = true;
    log.info(
        "compared outputs with the float64 reference elements={} max_abs_error={} "
        "max_abs_reference={} tolerance={} inexact_integers={} worst_tensor={} worst_index={} passed={} "
        "elapsed_ms={}",
        result.numerics.elements, result.numerics.max_abs_error, result.numerics.max_abs_reference,
        result.numerics.tolerance, result.numerics.inexact_integers, result.numerics.worst_tensor,
        result.numerics.worst_index, result.numerics.passed, elapsed_ms(step_started));
  }

  if (!options.expected.empty()) {
    result.expectation = compare_with_expected(package.graph, result.outputs, options.expected, options.expect_atol,
                                               options.expect_rtol);
    result.expectation_checked = true;
    log.info(
        "compared outputs with the expected values outputs={} elements={} max_abs_error={} max_rel_error={} "
        "mismatches={} worst_tensor={} worst_index={} atol={} rtol={} passed={}",
        options.expected.size(), result.expectation.elements, result.expectation.max_abs_error,
        result.expectation.max_rel_error, result.expectation.mismatches, result.expectation.worst_tensor,
        result.expectation.worst_index, options.expect_atol, options.expect_rtol, result.expectation.passed);
  }

  if (!options.profile_path.empty()) {
    write_profile(profile, options.profile_path);
    result.profile_path = options.profile_path;
    log.info("profile written path={} tiles={} samples={}", options.profile_path, result.tiles, result.profile_samples);
  }
  if (!options.trace_path.empty()) {
    write_chrome_trace(profile, options.trace_path, &package);
    log.info("trace written path={} format=chrome-trace", options.trace_path);
  }
  return result;
}

}  // namespace

RunResult run_package(const Package& package, const RunOptions& options, const std::string& package_name) {
  return run_loaded(package, options, package_name, nullptr, nullptr);
}

RunResult run_package(const RunOptions& options) {
  Package package = read_package_to_run(options);
  return run_loaded(package, options, options.package_path, options.trace_path.empty() ? &package : nullptr, nullptr);
}

RunResult run_package_releasing_tiles(Package& package, RunOptions& options, const std::string& package_name) {
  return run_loaded(package, options, package_name, options.trace_path.empty() ? &package : nullptr, &options.weights);
}

}  // namespace tessera::runtime
