// The compile session: pipeline -> plugins -> passes -> package header.
#include "tessera/session.hpp"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/overlay.hpp"
#include "tessera/reproducer.hpp"
#include "tessera/strict_yaml.hpp"
#include "tessera/yaml_text.hpp"
#include "tessera/version.hpp"

namespace fs = std::filesystem;

namespace tessera {

namespace {

// The pipeline file a session loads: the given one, or the base with an overlay merged onto it
// in a temporary folder that goes away with this object (every path in it is absolute).
class MergedPipelineFile {
public:
  MergedPipelineFile(const std::string& pipeline, const std::string& overlay) : pipeline_(pipeline), overlay_(overlay) {
    path_ = pipeline;
    if (overlay.empty()) return;
    std::error_code ec;
    if (!fs::is_regular_file(overlay, ec)) throw Error(overlay + ": overlay file not found (given with --overlay)");
    std::string pattern = (fs::temp_directory_path() / "tessera-overlay-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
      throw Error("cannot create a temporary folder in " + fs::temp_directory_path().string());
    folder_ = pattern;
    path_ = (fs::path(folder_) / "pipeline.yaml").string();
    try {
      merged_ = overlay::merge_overlay_into_file(
          pipeline, overlay, path_, "# " + overlay + " merged onto " + pipeline + " by tessera compile --overlay\n");
    } catch (const Error& e) {
      remove();
      throw Error(std::string(e.what()) + origin());
    }
  }
  ~MergedPipelineFile() { remove(); }
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
      // The merged file goes away with this object: name the base's or the overlay's place.
      throw Error(overlay::place_in_sources(e.what(), path_, 1, merged_) + origin());
    }
  }

private:
  std::string origin() const { return " [overlay " + overlay_ + " merged onto " + pipeline_ + "]"; }
  void remove() {
    std::error_code ec;
    if (!folder_.empty()) fs::remove_all(folder_, ec);
  }
  std::string pipeline_, overlay_, folder_, path_;
  overlay::MergedPipeline merged_;
};

}  // namespace

std::string bundled_plugin_directory() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path candidate :
       {exe.parent_path().parent_path() / "plugins", exe.parent_path().parent_path() / "lib/tessera/plugins"})
    if (fs::is_directory(candidate, ec)) return candidate.string();
  return "";
}

void find_plugins(PluginHost& host, const std::vector<std::string>& extra_paths) {
  if (auto bundled = bundled_plugin_directory(); !bundled.empty()) host.load_directory(bundled);
  host.load_environment_paths();
  for (const auto& path : extra_paths) host.load_directory(path, "--plugin-path");
}

struct Session::Impl {
  std::unique_ptr<PluginHost> host;
  std::unique_ptr<MergedPipelineFile> merged;  // kept while the spec names its file
  PipelineSpec spec;
  PassManagerOptions options;
  std::unique_ptr<PassManager> manager;  // created on first use
  std::unique_ptr<PassManager> single;   // run_passes's own passes
};

Session::Session(const SessionOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->host = std::make_unique<PluginHost>();
  impl_->host->quarantine(options.quarantine);
  impl_->options = options.passes;
  impl_->merged = std::make_unique<MergedPipelineFile>(options.pipeline, options.overlay);
  impl_->spec = impl_->merged->with_origin([&] {
    PipelineSpec spec = load_pipeline(impl_->merged->path());
    if (!options.target.empty()) {
      std::error_code ec;
      if (!fs::is_regular_file(options.target, ec))
        throw Error(options.target + ": target file not found (given with --target)");
      spec.target = fs::absolute(options.target).lexically_normal().string();
      spec.target_place = "--target";
    }
    resolve_pipeline(spec, *impl_->host);
    return spec;
  });
  if (!options.scheduler_fallback) impl_->spec.exchange_scheduler.fallback.clear();
}

Session::Session(PipelineSpec spec, std::unique_ptr<PluginHost> host, const PassManagerOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->spec = std::move(spec);
  impl_->options = options;
}

Session::~Session() = default;

const PipelineSpec& Session::spec() const { return impl_->spec; }
const PluginHost& Session::host() const { return *impl_->host; }
std::string Session::resolved_yaml() const { return print_pipeline(impl_->spec); }

void Session::create_plugins() {
  if (!impl_->manager) impl_->manager = std::make_unique<PassManager>(impl_->spec, *impl_->host, impl_->options);
}

CostModel& Session::cost_model() {
  create_plugins();
  return impl_->manager->cost_model();
}

ExchangeScheduler& Session::scheduler() {
  create_plugins();
  return impl_->manager->scheduler();
}

CompilationState Session::initial_state(Graph model) const {
  CompilationState state;
  state.target = load_target(impl_->spec.target);
  state.model = std::move(model);
  state.facts.insert(facts::graph);
  return state;
}

// Writes a reproducer bundle for the manager's fault, if any, and names it in the message. The
// bundle is a help, never a second failure: the plugin's error is what the user must see.
void Session::capture_fault(Status& status, const PassManager& manager, const FaultCapture& capture,
                            const CompilationState* failed) const {
  const PluginFault* fault = manager.fault();
  if (!fault || capture.folder.empty()) return;
  try {
    std::optional<CompilationState> input;
    if (failed && !(fault->phase && fault->plugin == impl_->spec.exchange_scheduler.plugin))
      input = pass_input(*failed, fault->pass_index);
    const std::string bundle = write_reproducer(capture.folder, impl_->spec, *impl_->host, *fault, capture.model_path,
                                                impl_->options.schedule_budget_ms, input ? &*input : nullptr);
    status.message += " (reproducer: " + bundle + "; run `tessera replay " + bundle + "`)";
  } catch (const std::exception& e) {
    logger("tessera.build")->warn("could not write a reproducer bundle into {}: {}", capture.folder, e.what());
  }
}

// The input of the pipeline's pass `index`, made again from the model by the passes before it
// (they are deterministic): the price of a pass reproducer is paid on a fault, not on every compile.
std::optional<CompilationState> Session::pass_input(const CompilationState& failed, std::size_t index) const {
  const auto start = std::chrono::steady_clock::now();
  CompilationState input;
  input.target = failed.target;
  input.model = failed.model;  // never changed by passes
  input.facts.insert(facts::graph);
  PipelineSpec before = impl_->spec;
  before.passes.resize(std::min(index, before.passes.size()));
  PassManagerOptions options = impl_->options;
  options.dump_after.clear();
  options.print_changed = false;
  if (!PassManager(before, *impl_->host, options).run(input).ok) return std::nullopt;
  logger("tessera.build")
      ->info("made the failing pass's input again for its reproducer passes={} elapsed_ms={}", index,
             std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
  return input;
}

Status Session::run(CompilationState& state, const FaultCapture& capture) {
  create_plugins();
  Status status = impl_->manager->run(state);
  if (!status.ok) capture_fault(status, *impl_->manager, capture, &state);
  return status;
}

const PluginFault* Session::fault() const {
  if (impl_->single) return impl_->single->fault();
  return impl_->manager ? impl_->manager->fault() : nullptr;
}

PluginUse Session::pass_use(const std::string& name, const std::vector<std::string>& overrides) const {
  const PluginHost& host = *impl_->host;
  const PluginInfo* info = host.find(name);
  if (!info || info->kind != PluginKind::pass)
    throw Error("--pass: " + host.unknown_plugin_message(name, PluginKind::pass));
  PluginUse use;
  use.plugin = name;
  use.place = "--pass " + name;
  for (const PluginUse& in_pipeline : impl_->spec.passes)
    if (in_pipeline.plugin == name) {
      use = in_pipeline;
      break;
    }
  for (const std::string& text : overrides) {
    const auto equals = text.find('=');
    const std::string key = text.substr(0, equals), value = equals == std::string::npos ? "" : text.substr(equals + 1);
    if (equals == std::string::npos || key.empty())
      throw Error("--option " + echoed_token(text) + ": write KEY=VALUE, e.g. --option tie_break=longest_first");
    const auto spec =
        std::find_if(info->options.begin(), info->options.end(), [&](const OptionSpec& o) { return o.name == key; });
    if (spec == info->options.end()) {
      std::vector<std::string> names;
      for (const OptionSpec& o : info->options) names.push_back(o.name);
      std::string message =
          "--option " + echoed_token(text) + ": pass '" + name + "' has no option " + echoed_token(key);
      if (const std::string near = nearest_name(key, names); !near.empty()) message += "; did you mean '" + near + "'?";
      throw Error(message + " (`tessera plugins info " + name + "` lists them)");
    }
    OptionValue parsed;
    bool ok = true;
    switch (spec->type) {
      case OptionType::boolean: {
        bool b = false;
        ok = yaml::parse_bool(value, b);
        parsed = b;
        break;
      }
      case OptionType::integer: {
        std::int64_t i = 0;
        ok = yaml::parse_int(value, i);
        parsed = i;
        break;
      }
      case OptionType::number: {
        double d = 0;
        ok = yaml::parse_number(value, d);
        parsed = d;
        break;
      }
      case OptionType::map:
        throw Error("--option " + echoed_token(text) + ": '" + key + "' is a mapping; set it in a pipeline file");
      default:
        parsed = value;
    }
    if (!ok)
      throw Error("--option " + echoed_token(text) + ": '" + key + "' is of type " + option_type_name(spec->type));
    use.options.values[key] = parsed;
    use.options.places[key] = "--option " + key;
  }
  use.options = host.resolve_options(*info, use.options, use.place);
  return use;
}

Status Session::run_passes(CompilationState& state, const std::vector<PluginUse>& passes, const FaultCapture& capture) {
  std::set<std::string> available = state.facts;
  for (const PluginUse& use : passes) {
    const PluginInfo* info = impl_->host->find(use.plugin);
    if (!info) throw Error(use.place + ": plugin '" + use.plugin + "' is not loaded");
    for (const std::string& fact : info->required_facts) {
      if (available.count(fact)) continue;
      std::string providers;
      for (const PluginInfo* other : impl_->host->plugins())
        if (std::find(other->provided_facts.begin(), other->provided_facts.end(), fact) != other->provided_facts.end())
          providers += (providers.empty() ? "" : ", ") + other->name;
      throw Error(fmt::format(
          "pass '{}' requires '{}', which the state does not have (its facts: {}); run {} on it first", use.plugin,
          fact, fmt::join(available, ", "), providers.empty() ? "a pass providing it" : providers));
    }
    available.insert(info->provided_facts.begin(), info->provided_facts.end());
  }
  PipelineSpec spec = impl_->spec;
  spec.passes = passes;
  impl_->single = std::make_unique<PassManager>(spec, *impl_->host, impl_->options);
  Status status = impl_->single->run(state);
  if (!status.ok) capture_fault(status, *impl_->single, capture);
  return status;
}

Package& Session::finish(CompilationState& state) const {
  if (!state.facts.count(facts::tile_images))
    throw Error(impl_->spec.file +
                ": the pipeline never provides 'tile-images', so there is no package to write; "
                "end it with emit-tile-code");
  return fill_package_header(state);
}

Package& fill_package_header(CompilationState& state) {
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

}  // namespace tessera
