// Test support for the pass plugins: the bench, and its packages run on the simulator.
#include "pass_bench.hpp"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <spdlog/sinks/ostream_sink.h>

#include "temp_dir.hpp"
#include "tessera/log.hpp"
#include "tessera/runtime/run.hpp"

namespace tessera::testing {
namespace {

// Points the pass manager's logger at `out` alone while it lives: only the bench's own runs
// are captured, even with two benches alive, and the test's output stays quiet.
class CaptureBuildLog {
public:
  explicit CaptureBuildLog(std::ostringstream& out) : logger_(logger("tessera.build")), level_(logger_->level()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    sink->set_pattern("%l %v");
    sinks_.swap(logger_->sinks());
    logger_->sinks().push_back(sink);
    logger_->set_level(spdlog::level::info);
  }
  ~CaptureBuildLog() {
    logger_->sinks().swap(sinks_);
    logger_->set_level(level_);
  }
  CaptureBuildLog(const CaptureBuildLog&) = delete;
  CaptureBuildLog& operator=(const CaptureBuildLog&) = delete;

private:
  std::shared_ptr<spdlog::logger> logger_;
  std::vector<spdlog::sink_ptr> sinks_;  ///< the logger's own, put back at the end
  spdlog::level::level_enum level_;
};

PluginUse use_of(const PluginHost& host, const std::string& name, PluginKind kind, const Options& options = {}) {
  const PluginInfo* info = host.find(name);
  if (!info || info->kind != kind) throw Error(host.unknown_plugin_message(name, kind));
  PluginUse use;
  use.plugin = name;
  use.place = "the pass bench";
  use.options = host.resolve_options(*info, options, use.place);
  return use;
}

}  // namespace

std::string config_path(const std::string& relative) {
  return std::string(TESSERA_SOURCE_DIR) + "/configs/" + relative;
}

const std::vector<std::string>& default_passes() {
  static const std::vector<std::string> passes = {"lower-mid", "select-finalist", "place-storage", "lower-exchanges",
                                                  "emit-tile-code"};
  return passes;
}

PassBench::PassBench(const std::string& model_path, const std::string& target_path, const std::string& cost_model_name,
                     const std::string& scheduler_name)
    : target_path_(target_path), cost_model_name_(cost_model_name), scheduler_name_(scheduler_name) {
  state.model = load_model(model_path);
  state.target = load_target(target_path);
  state.facts.insert(facts::graph);
}

PassBench::~PassBench() = default;

Session& PassBench::session() {
  if (session_) return *session_;
  auto host = std::make_unique<PluginHost>();
  host->load_directory(TESSERA_PLUGIN_DIR);
  PipelineSpec spec;
  spec.name = "pass-bench";
  spec.file = target_path_;
  spec.target = std::filesystem::absolute(target_path_).string();
  spec.cost_model = use_of(*host, cost_model_name_, PluginKind::cost_model);
  if (isolate_cost_model) spec.cost_model.isolate = "process";
  spec.exchange_scheduler = use_of(*host, scheduler_name_, PluginKind::exchange_scheduler);
  for (const std::string& pass : default_passes()) spec.passes.push_back(use_of(*host, pass, PluginKind::pass));
  PassManagerOptions options;
  options.threads = threads;
  session_ = std::make_unique<Session>(std::move(spec), std::move(host), options);
  return *session_;
}

CostModel& PassBench::cost_model() { return session().cost_model(); }
ExchangeScheduler& PassBench::scheduler() { return session().scheduler(); }

Status PassBench::run(const std::string& name, const Options& options) {
  Session& run_in = session();
  const PluginUse use = use_of(run_in.host(), name, PluginKind::pass, options);
  const CaptureBuildLog capture(log_);
  return run_in.run_passes(state, {use});
}

Status PassBench::run_through(const std::string& last, const std::map<std::string, Options>& options) {
  for (const std::string& name : default_passes()) {
    const auto given = options.find(name);
    Status status = run(name, given == options.end() ? Options{} : given->second);
    if (!status.ok) return status;
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
  const CompilationState saved = state;
  const std::string log_before = log_.str();
  for (const std::string& name : default_passes()) {
    const PluginInfo* info = session().host().find(name);
    const bool done = std::all_of(info->provided_facts.begin(), info->provided_facts.end(),
                                  [&](const std::string& fact) { return state.facts.count(fact) > 0; });
    if (done) continue;
    if (const Status status = run(name); !status.ok) throw std::runtime_error(status.message);
  }
  const Package package = session().finish(state);
  state = saved;
  log_.str(log_before);
  log_.seekp(0, std::ios::end);
  TempDir dir;
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "device.lock").string();  // tests in parallel do not queue for one device
  return runtime::run_package(package, options, "the pass bench's package").numerics;
}

}  // namespace tessera::testing
