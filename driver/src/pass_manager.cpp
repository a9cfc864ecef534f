// The pass manager: creates a pipeline's plugins and runs its passes in order.
#include "tessera/pass_manager.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <sstream>

#include <fmt/ranges.h>

#include "tessera/diagnostic.hpp"
#include "tessera/isolation.hpp"
#include "tessera/log.hpp"
#include "tessera/output_file.hpp"
#include "tessera/plugin_host.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera {

std::string phase_name(const std::string& plugin_name) {
  std::string name = plugin_name;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

static double milliseconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

std::string time_report(const std::vector<PassTiming>& timings) {
  PassTiming total{"total"};
  for (const PassTiming& t : timings) {
    total.wall_ms += t.wall_ms;
    total.verify_ms += t.verify_ms;
    total.cost_model_ms += t.cost_model_ms;
    total.cost_model_calls += t.cost_model_calls;
    total.scheduler_ms += t.scheduler_ms;
    total.scheduler_calls += t.scheduler_calls;
  }
  std::string table = fmt::format(
      "===--- tessera time report: wall per pass; cost model and scheduler: time inside their calls, summed over "
      "the pass's threads ---===\n{:<30} {:>10} {:>7} {:>10} {:>14} {:>9} {:>13} {:>9}\n",
      "pass", "wall_ms", "share", "verify_ms", "cost_model_ms", "calls", "scheduler_ms", "calls");
  auto row = [&](const PassTiming& t) {
    const double share = total.wall_ms > 0 ? 100.0 * t.wall_ms / total.wall_ms : 0.0;
    fmt::format_to(std::back_inserter(table), "{:<30} {:>10.1f} {:>6.1f}% {:>10.1f} {:>14.1f} {:>9} {:>13.1f} {:>9}\n",
                   t.pass, t.wall_ms, share, t.verify_ms, t.cost_model_ms, t.cost_model_calls, t.scheduler_ms,
                   t.scheduler_calls);
  };
  for (const PassTiming& t : timings) row(t);
  row(total);
  return table;
}

struct PassManager::Impl {
  PassManagerOptions options;
  std::unique_ptr<CostModel> cost_model;
  std::function<std::unique_ptr<CostModel>()> new_cost_model;  ///< empty when isolated
  std::unique_ptr<ExchangeScheduler> scheduler;
  std::vector<std::unique_ptr<Pass>> passes;
  std::vector<const PluginInfo*> pass_infos;
  std::unique_ptr<PluginFault> fault;
};

PassManager::PassManager(const PipelineSpec& spec, const PluginHost& host, PassManagerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  auto info = [&](const PluginUse& use) -> const PluginInfo& {
    const PluginInfo* found = host.find(use.plugin);
    if (!found) throw Error(use.place + ": plugin '" + use.plugin + "' is not loaded (resolve the pipeline first)");
    return *found;
  };
  // An isolated plugin runs in a child process; only its fallback (if any) is created here.
  auto fallback_info = [&](const PluginUse& use) -> const PluginInfo* {
    if (use.fallback.empty()) return nullptr;
    const PluginInfo* found = host.find(use.fallback);
    if (!found)
      throw Error(use.fallback_place + ": plugin '" + use.fallback + "' is not loaded (resolve the pipeline first)");
    return found;
  };
  const PluginUse& cost_use = spec.cost_model;
  if (cost_use.isolate == "process") {
    std::unique_ptr<CostModel> fallback;
    if (const PluginInfo* other = fallback_info(cost_use))
      fallback = host.create_cost_model(*other, host.resolve_options(*other, {}, cost_use.fallback_place));
    impl_->cost_model = create_isolated_cost_model(info(cost_use), cost_use, std::move(fallback));
  } else {
    impl_->cost_model = host.create_cost_model(info(cost_use), cost_use.options);
    // The host outlives the manager (it holds the plugin libraries the objects run from).
    impl_->new_cost_model = [&host, &plugin = info(cost_use), options = cost_use.options] {
      return host.create_cost_model(plugin, options);
    };
  }
  const PluginUse& scheduler_use = spec.exchange_scheduler;
  if (scheduler_use.isolate == "process") {
    std::unique_ptr<ExchangeScheduler> fallback;
    if (const PluginInfo* other = fallback_info(scheduler_use))
      fallback = host.create_scheduler(*other, host.resolve_options(*other, {}, scheduler_use.fallback_place));
    impl_->scheduler = create_isolated_scheduler(info(scheduler_use), scheduler_use, std::move(fallback));
  } else {
    impl_->scheduler = host.create_scheduler(info(scheduler_use), scheduler_use.options);
  }
  for (const auto& use : spec.passes) {
    impl_->pass_infos.push_back(&info(use));
    impl_->passes.push_back(host.create_pass(info(use), use.options));
  }
  // A misspelt --dump-after would otherwise dump nothing, silently.
  for (const std::string& requested : impl_->options.dump_after) {
    std::vector<std::string> names{"all"};
    for (const auto& use : spec.passes) names.push_back(use.plugin);
    const bool known = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
      return requested == name || requested == phase_name(name);
    });
    if (known) continue;
    std::string message = "--dump-after " + echoed_token(requested) + ": the pipeline has no such pass";
    if (const std::string near = nearest_name(requested, names); !near.empty())
      message += "; did you mean '" + near + "'?";
    throw Error(message + " (passes: " + fmt::format("{}", fmt::join(names.begin() + 1, names.end(), ", ")) +
                ", or all)");
  }
}

PassManager::~PassManager() = default;

const PluginFault* PassManager::fault() const { return impl_->fault.get(); }

CostModel& PassManager::cost_model() { return *impl_->cost_model; }
ExchangeScheduler& PassManager::scheduler() { return *impl_->scheduler; }

// `--print-changed`: the text dump after a pass that changed the state, a line after one that did not.
static void print_change(const std::string& pass, const std::vector<std::pair<std::string, std::string>>& before,
                         const CompilationState& state, const DumpFilter& filter) {
  const auto after = state_sections(state);
  std::vector<std::string> changed;
  for (std::size_t i = 0; i < after.size(); ++i)
    if (i >= before.size() || before[i] != after[i]) changed.push_back(after[i].first);
  if (changed.empty()) {
    fmt::print("// ----- pass '{}' left the state unchanged\n", pass);
  } else {
    fmt::print("// ----- state after pass '{}' (changed: {})\n{}", pass, fmt::join(changed, ", "),
               dump_state(state, filter));
  }
  std::fflush(stdout);
}

static bool wants_dump(const std::vector<std::string>& requested, const std::string& plugin) {
  for (const auto& name : requested)
    if (name == plugin || name == phase_name(plugin) || name == "all") return true;
  return false;
}

Status PassManager::run(CompilationState& state) {
  auto log = logger("tessera.build");
  impl_->fault.reset();
  for (std::size_t i = 0; i < impl_->passes.size(); ++i) {
    Pass& pass = *impl_->passes[i];
    const PluginInfo& info = *impl_->pass_infos[i];
    const std::string phase = phase_name(info.name);
    PassContext context{state.target,
                        *impl_->cost_model,
                        *impl_->scheduler,
                        *log,
                        fmt::format("tessera.build{{tile_count={} operations={}}}:tessera.phase{{phase=\"{}\"}}",
                                    state.target.tiles, state.model.ops.size(), phase),
                        impl_->options.schedule_budget_ms,
                        impl_->options.threads,
                        nullptr,
                        impl_->new_cost_model,
                        &state.record,
                        info.name,
                        impl_->options.on_pass_progress};
    if (impl_->options.on_pass) impl_->options.on_pass(i, impl_->passes.size(), info.name);
    std::vector<std::pair<std::string, std::string>> sections_before;
    if (impl_->options.print_changed) sections_before = state_sections(state);
    const PluginCallTotals before = plugin_call_totals();
    const auto start = std::chrono::steady_clock::now();
    Status status = pass.run(state, context);
    const auto ran = std::chrono::steady_clock::now();
    const PluginCallTotals after = plugin_call_totals();
    if (status.ok) {
      state.facts.insert(info.provided_facts.begin(), info.provided_facts.end());
      if (state.facts.count(facts::plan)) {
        if (std::string problem = verify_program(state.program, state.target); !problem.empty()) {
          status = Status::failure("left an invalid program: " + problem);
          impl_->fault = std::make_unique<PluginFault>(PluginFault{info.name, info.name, status.message, nullptr, i});
        }
      }
    } else if (context.fault) {
      impl_->fault = std::make_unique<PluginFault>(
          PluginFault{context.fault->plugin_name, info.name, status.message, context.fault->failing_phase, i});
    }
    const auto verified = std::chrono::steady_clock::now();
    state.record.timings.push_back(
        {info.name, milliseconds(ran - start), milliseconds(verified - ran),
         (after.cost_model_ns - before.cost_model_ns) / 1e6, after.cost_model_calls - before.cost_model_calls,
         (after.scheduler_ns - before.scheduler_ns) / 1e6, after.scheduler_calls - before.scheduler_calls});
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(verified - start).count();
    context.info("package build phase finished phase=\"{}\" elapsed_ms={} success={}", phase, elapsed, status.ok);
    if (impl_->options.print_changed) print_change(info.name, sections_before, state, impl_->options.dump_filter);
    if (wants_dump(impl_->options.dump_after, info.name)) {
      const std::string stem = impl_->options.dump_directory + "/" + phase;
      try {
        const OwnedFolder folder(impl_->options.dump_directory, "the dump folder (--dump-dir)");
        check_output_file(stem + ".tstate", "the state (--dump-after)", {});
        check_output_file(stem + ".dump", "the dump (--dump-after)", {});
        folder.write_file(phase + ".tstate", state_text(state), "the state requested by --dump-after");
        folder.write_file(phase + ".dump", dump_state(state, impl_->options.dump_filter),
                          "the dump requested by --dump-after");
      } catch (const Error& e) {
        return Status::failure(e.what());
      }
      log->info("wrote state after phase=\"{}\" file={}.tstate dump={}.dump", phase, stem, stem);
    }
    if (!status.ok) return Status::failure("pass '" + info.name + "' failed: " + status.message);
  }
  if (impl_->options.on_pass) impl_->options.on_pass(impl_->passes.size(), impl_->passes.size(), "");
  return Status::success();
}

}  // namespace tessera
