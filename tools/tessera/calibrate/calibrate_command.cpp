// `tessera calibrate`: runs the microbenchmarks through the real passes and the simulator, then
// fits each formula of the calibrated cost model by least squares on relative error.
#include "calibrate_command.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "calibration.hpp"
#include "microbenchmarks.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"
#include "tessera/session.hpp"
#include "tessera/runtime/device_lock.hpp"
#include "tessera/runtime/profile.hpp"
#include "tessera/runtime/sim_device.hpp"
#include "tessera/target.hpp"

namespace fs = std::filesystem;

namespace tessera::cli {

namespace {

using calibration::Features;

struct Sample {
  Features features;
  double measured = 0;
  std::string what;  ///< the microbenchmark, for the worst-sample note
};

/// Solves the normal equations of min sum ((a_i . x - y_i) / y_i)^2: relative errors, so small
/// calls and phases count as much as large ones. Columns are scaled to 1 first.
std::vector<double> fit_relative(const std::vector<Sample>& samples, const std::string& what) {
  const std::size_t p = samples.front().features.size();
  if (samples.size() < p)
    throw Error(fmt::format("tessera calibrate: {} has {} features but only {} measurements; add shapes", what, p,
                            samples.size()));
  std::vector<double> scale(p, 0.0);
  for (const Sample& s : samples)
    for (std::size_t j = 0; j < p; ++j) scale[j] = std::max(scale[j], std::abs(s.features[j]));
  std::vector<std::vector<double>> m(p, std::vector<double>(p + 1, 0.0));  // [M | b]
  for (const Sample& s : samples) {
    if (!(s.measured > 0))
      throw Error(
          fmt::format("tessera calibrate: {} measured {} cycles for {}; the simulator must charge every "
                      "call and phase",
                      what, s.measured, s.what));
    const double weight = 1.0 / (s.measured * s.measured);
    for (std::size_t i = 0; i < p; ++i) {
      const double ai = scale[i] > 0 ? s.features[i] / scale[i] : 0;
      for (std::size_t j = 0; j < p; ++j) m[i][j] += weight * ai * (scale[j] > 0 ? s.features[j] / scale[j] : 0);
      m[i][p] += weight * ai * s.measured;
    }
  }
  // Gaussian elimination with partial pivoting; a vanishing pivot means the shapes cannot
  // tell two features apart.
  double largest = 0;
  for (std::size_t i = 0; i < p; ++i) largest = std::max(largest, std::abs(m[i][i]));
  for (std::size_t col = 0; col < p; ++col) {
    std::size_t pivot = col;
    for (std::size_t row = col + 1; row < p; ++row)
      if (std::abs(m[row][col]) > std::abs(m[pivot][col])) pivot = row;
    if (std::abs(m[pivot][col]) <= 1e-12 * largest)
      throw Error(
          fmt::format("tessera calibrate: the features of {} are linearly dependent over its "
                      "microbenchmark shapes (feature {}); add shapes that vary it",
                      what, col));
    std::swap(m[col], m[pivot]);
    for (std::size_t row = 0; row < p; ++row) {
      if (row == col) continue;
      const double factor = m[row][col] / m[col][col];
      for (std::size_t k = col; k <= p; ++k) m[row][k] -= factor * m[col][k];
    }
  }
  std::vector<double> coefficients(p);
  for (std::size_t j = 0; j < p; ++j) coefficients[j] = scale[j] > 0 ? m[j][p] / m[j][j] / scale[j] : 0;
  return coefficients;
}

calibration::Formula fit(const std::vector<Sample>& samples, const char* feature_names, const std::string& what,
                         std::string& worst) {
  calibration::Formula formula;
  formula.features = calibration::split_names(feature_names);
  for (const Sample& s : samples)
    if (s.features.size() != formula.features.size())
      throw Error(fmt::format("tessera calibrate: {} computes {} features but names {}", what, s.features.size(),
                              formula.features.size()));
  formula.coefficients = fit_relative(samples, what);
  formula.samples = samples.size();
  auto log = logger("tessera.calibrate");
  for (const Sample& s : samples) {
    const double error = std::abs(formula.cycles(s.features) - s.measured) / s.measured;
    log->debug("calibration sample what=\"{}\" features=[{}] measured_cycles={} fitted_cycles={:.1f}", s.what,
               fmt::join(s.features, ","), s.measured, formula.cycles(s.features));
    if (error >= formula.max_relative_error) {
      formula.max_relative_error = error;
      worst = s.what;
    }
  }
  return formula;
}

const PluginInfo& find_plugin(const PluginHost& host, const std::string& name, PluginKind kind) {
  const PluginInfo* info = host.find(name);
  if (!info || info->kind != kind) throw Error("tessera calibrate: " + host.unknown_plugin_message(name, kind));
  return *info;
}

PluginUse plugin_use(const PluginHost& host, const std::string& name, PluginKind kind) {
  PluginUse use;
  use.plugin = name;
  use.place = "tessera calibrate";
  use.options = host.resolve_options(find_plugin(host, name, kind), {}, use.place);
  return use;
}

}  // namespace

int calibrate_command(const CalibrateRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  if (request.output.empty()) throw Error("tessera calibrate: no output table given (use -o TABLE.yaml)");
  check_output_file(request.output, "the table (-o)", {{request.target, "the target"}});
  check_output_file(request.lock_path, "the device lock (--lock)", {{request.target, "the target"}});
  const Target target = load_target(request.target);
  Microbenchmarks benchmarks = build_microbenchmarks(target);

  // The passes after planning, from the same plugins a compile uses, turn the microbenchmarks
  // into a package: real placement, the scheduler's real schedules, real tile images.
  auto host = std::make_unique<PluginHost>();
  find_plugins(*host, request.plugin_paths);
  PipelineSpec spec;
  spec.name = "calibrate";
  spec.file = request.target;
  spec.target = fs::absolute(request.target).string();
  spec.cost_model = plugin_use(*host, "analytic", PluginKind::cost_model);
  spec.exchange_scheduler = plugin_use(*host, request.scheduler, PluginKind::exchange_scheduler);
  for (const char* pass : {"place-storage", "lower-exchanges", "emit-tile-code"})
    spec.passes.push_back(plugin_use(*host, pass, PluginKind::pass));

  Session session(std::move(spec), std::move(host), PassManagerOptions{});
  CompilationState state;
  state.target = target;
  state.model.name = "calibration";
  state.program = std::move(benchmarks.program);
  state.facts = {facts::graph, facts::canonical, facts::plan};
  if (Status status = session.run(state); !status.ok)
    throw Error("tessera calibrate: building the microbenchmark package failed: " + status.message);
  const Package& package = session.finish(state);

  runtime::DeviceLock lock(request.lock_path.empty() ? runtime::default_lock_path() : request.lock_path);
  lock.acquire();
  runtime::SimDevice device;
  device.attach();
  device.load(package);
  device.initialize({});
  device.run({});
  const runtime::ExecutionProfile& profile = device.profile();
  lock.release();

  calibration::Table table;
  table.target = target.name;
  table.target_hash = target.hash();
  table.codelet_set_version = kCodeletSetVersion;
  table.scheduler = request.scheduler;
  std::vector<std::string> lines;
  auto report = [&](const std::string& name, const calibration::Formula& formula, const std::string& worst) {
    std::vector<std::string> terms;
    for (std::size_t i = 0; i < formula.features.size(); ++i)
      terms.push_back(fmt::format("{}*{:.6g}", formula.features[i], formula.coefficients[i]));
    lines.push_back(fmt::format("calibrated formula={} samples={} max_relative_error={:.4f} worst=\"{}\" cycles=\"{}\"",
                                name, formula.samples, formula.max_relative_error, worst, fmt::join(terms, " + ")));
  };

  for (std::uint32_t id = 0; id < kCodeletCount; ++id) {
    const auto codelet = static_cast<Codelet>(id);
    const calibration::CodeletLine& line = *calibration::codelet_line(codelet);  // checked when built
    std::vector<Sample> samples;
    for (const CodeletProbe& probe : benchmarks.codelets)
      if (probe.codelet == codelet)
        samples.push_back({line.features(probe.params, target),
                           double(profile.supersteps.at(probe.superstep).tile_compute_cycles.at(probe.tile)),
                           fmt::format("{} params [{}]", codelet_name(codelet), fmt::join(probe.params, ","))});
    std::string worst;
    const auto formula = fit(samples, line.feature_names, fmt::format("codelet '{}'", codelet_name(codelet)), worst);
    report(codelet_name(codelet), formula, worst);
    table.codelets[codelet_name(codelet)] = formula;
  }

  std::vector<Sample> phases;
  for (const ExchangeProbe& probe : benchmarks.exchanges)
    phases.push_back({calibration::exchange_features(state.program.supersteps.at(probe.superstep).exchange, target),
                      double(profile.supersteps.at(probe.superstep).exchange_cycles), probe.shape});
  std::string worst;
  table.exchange = fit(phases, calibration::exchange_feature_names(), "the exchange formula", worst);
  report("exchange", table.exchange, worst);

  const runtime::SuperstepProfile& barrier = profile.supersteps.at(benchmarks.barrier_superstep);
  table.barrier_cycles = double(barrier.compute_cycles + barrier.exchange_cycles + barrier.sync_cycles);

  write_file_atomically(request.output, calibration::table_yaml(table), "calibration table");
  for (const std::string& line : lines) fmt::print("{}\n", line);
  fmt::print(
      "calibration table={} target={} scheduler={} codelets={} exchange_phases={} barrier_cycles={:.0f} "
      "elapsed_ms={}\n",
      request.output, target.name, request.scheduler, table.codelets.size(), phases.size(), table.barrier_cycles,
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace tessera::cli
