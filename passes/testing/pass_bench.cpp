// Test support for the pass plugins: the bench, and its packages run on the simulator.
#include "pass_bench.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>

#include "temp_dir.hpp"
#include "tessera/runtime/run.hpp"
#include "tessera/session.hpp"

namespace tessera::testing {

std::string config_path(const std::string& relative) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/" + relative;
}

const std::vector<std::string>& default_passes() {
  static const std::vector<std::string> passes = {"lower-mid", "select-finalist", "place-storage", "lower-exchanges",
                                                  "emit-tile-code"};
  return passes;
}

PassBench::PassBench(const std::string& model_path, const std::string& target_path, const std::string& cost_model_name,
                     const std::string& scheduler_name) {
  host.load_directory(TESSERA_PLUGIN_DIR);
  state.model = load_model(model_path);
  state.target = load_target(target_path);
  state.facts.insert(facts::graph);
  auto find = [&](const std::string& name, PluginKind kind) -> const PluginInfo& {
    const PluginInfo* info = host.find(name);
    if (!info) throw std::runtime_error(host.unknown_plugin_message(name, kind));
    return *info;
  };
  const PluginInfo& cost = find(cost_model_name, PluginKind::cost_model);
  cost_model = host.create_cost_model(cost, host.resolve_options(cost, {}, "test"));
  cost_info_ = &cost;
  const PluginInfo& sched = find(scheduler_name, PluginKind::exchange_scheduler);
  scheduler = host.create_scheduler(sched, host.resolve_options(sched, {}, "test"));
  logger_ = std::make_shared<spdlog::logger>("tessera.test", std::make_shared<spdlog::sinks::ostream_sink_st>(log_));
  logger_->set_pattern("%l %v");
  logger_->set_level(spdlog::level::info);
}

Status PassBench::run(const std::string& name, const Options& options) {
  const PluginInfo* info = host.find(name);
  if (!info) return Status::failure(host.unknown_plugin_message(name, PluginKind::pass));
  std::unique_ptr<Pass> pass = host.create_pass(*info, host.resolve_options(*info, options, "test"));
  PassContext context{state.target, *cost_model, *scheduler, *logger_, fmt::format("phase{{phase=\"{}\"}}", name),
                      2000,         threads,     nullptr,    {},       &state.record,
                      name};
  if (duplicate_cost_model)
    context.new_cost_model = [this] {
      return host.create_cost_model(*cost_info_, host.resolve_options(*cost_info_, {}, "test"));
    };
  Status status = pass->run(state, context);
  if (!status.ok) return status;
  state.facts.insert(info->provided_facts.begin(), info->provided_facts.end());
  // As the pass manager does: a pass that leaves an invalid program has failed.
  if (state.facts.count(facts::plan))
    if (const std::string problem = verify_program(state.program, state.target); !problem.empty())
      return Status::failure("left an invalid program: " + problem);
  return status;
}

Status PassBench::run_through(const std::string& last, const std::map<std::string, Options>& options) {
  for (const std::string& name : default_passes()) {
    const auto given = options.find(name);
    Status status = run(name, given == options.end() ? Options{} : given->second);
    if (!status.ok) return Status::failure(name + ": " + status.message);
    if (name == last) return Status::success();
  }
  return Status::failure("no default pass named " + last);
}

std::vector<std::string> PassBench::log_lines(const std::string& text) const {
  std::vector<std::string> lines;
  std::istringstream in(log_.str());
  for (std::string line; std::getline(in, line);)
    if (line.find(text) != std::string::npos) lines.push_back(line);
  return lines;
}

std::uint64_t log_field(const std::string& line, const std::string& key) {
  const std::string needle = " " + key + "=";
  const std::size_t at = line.find(needle);
  if (at == std::string::npos) throw std::runtime_error("no field " + key + " in: " + line);
  return std::stoull(line.substr(at + needle.size()));
}

runtime::NumericalReport PassBench::simulate() {
  PassBench& bench = *this;
  const CompilationState saved = state;
  const std::string log_before = log_.str();
  for (const std::string& name : default_passes()) {
    const PluginInfo* info = bench.host.find(name);
    if (!info) throw std::runtime_error(bench.host.unknown_plugin_message(name, PluginKind::pass));
    const bool done = std::all_of(info->provided_facts.begin(), info->provided_facts.end(),
                                  [&](const std::string& fact) { return bench.state.facts.count(fact) > 0; });
    if (done) continue;
    if (const Status status = bench.run(name); !status.ok) throw std::runtime_error(name + ": " + status.message);
  }
  const Package package = fill_package_header(state);
  state = saved;
  log_.str(log_before);
  log_.seekp(0, std::ios::end);
  TempDir dir;
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "device.lock").string();  // tests in parallel do not queue for one device
  return runtime::run_package(package, options, "the pass bench's package").numerics;
}

}  // namespace tessera::testing
