// Merges, validates and fingerprints the arms of an A/B test.
#include "arms.hpp"

#include <cctype>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "fingerprint.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/overlay.hpp"
#include "tessera/session.hpp"

namespace fs = std::filesystem;

namespace tessera::ab {

using namespace tessera::overlay;

namespace {

// A file's hash, or "absent": a file created later changes the fingerprint too.
ArmInput input_file(const std::string& path) {
  std::error_code ec;
  return {path, fs::is_regular_file(path, ec) ? hash_file(path) : "absent"};
}

// The plugin's name, version, library bytes and options, and the bytes of every file a `path`
// option names (`{target}` expanded for each suite target), so results never outlive an input.
std::string use_fingerprint_text(const PluginUse& use, const PluginHost& host, const char* role,
                                 const std::vector<std::string>& target_names, std::vector<ArmInput>& inputs) {
  const PluginInfo* plugin = host.find(use.plugin);
  std::string text = std::string(role) + " " + use.plugin;
  if (plugin) {
    inputs.push_back(input_file(plugin->file));
    text += " " + plugin->version + " " + inputs.back().hash;
  }
  for (const auto& [name, value] : use.options.values) text += " " + name + "=" + option_value_text(value);
  if (plugin)
    for (const OptionSpec& option : plugin->options) {
      if (option.type != OptionType::path || !use.options.values.count(option.name)) continue;
      const std::string& path = std::get<std::string>(use.options.values.at(option.name));
      if (path.empty()) continue;
      const std::size_t placeholder = path.find("{target}");
      std::vector<std::string> paths{path};
      if (placeholder != std::string::npos) {
        paths.clear();
        for (const std::string& target : target_names)
          paths.push_back(std::string(path).replace(placeholder, 8, target));
      }
      for (const std::string& file : paths) {
        inputs.push_back(input_file(file));
        text += " " + file + "#" + inputs.back().hash;
      }
    }
  return text + "\n";
}

}  // namespace

ArmRequest parse_arm_argument(const std::string& text) {
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos)
    throw Error("--arm " + text + ": write NAME=OVERLAY.yaml, or NAME= for the base pipeline itself");
  ArmRequest arm{text.substr(0, equals), text.substr(equals + 1)};
  bool valid = !arm.name.empty();
  for (char c : arm.name) valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_');
  if (!valid)
    throw Error("--arm " + text + ": an arm name uses letters, digits, '-' and '_' (it names folders of results)");
  if (!arm.overlay.empty()) {
    std::error_code ec;
    if (!fs::is_regular_file(arm.overlay, ec))
      throw Error("--arm " + text + ": overlay file not found: " + arm.overlay);
    arm.overlay = fs::absolute(arm.overlay).lexically_normal().string();
  }
  return arm;
}

std::string twin_name(const std::string& baseline) { return baseline + ".twin"; }

std::vector<PreparedArm> prepare_arms(const std::string& base_pipeline, const std::vector<ArmRequest>& requests,
                                      const std::string& staging_directory, const std::vector<Target>& targets) {
  std::vector<std::string> target_names;
  for (const Target& target : targets) target_names.push_back(target.name);
  if (requests.empty())
    throw Error("tessera ab: no arms given; the first --arm is the baseline, e.g. --arm A= --arm B=b.yaml");
  std::set<std::string> names;
  std::vector<PreparedArm> arms;
  for (const ArmRequest& request : requests) {
    if (!names.insert(request.name).second) throw Error("--arm " + request.name + ": two arms have this name");
    PreparedArm arm;
    arm.info.name = request.name;
    arm.info.overlay = request.overlay;
    const std::string origin = "arm '" + request.name + "' (" +
                               (request.overlay.empty() ? "the base pipeline" : "overlay " + request.overlay) + ")";
    const std::string staged = (fs::path(staging_directory) / (request.name + ".yaml")).string();
    std::unique_ptr<Session> session;  // one per arm: arms may load same-named plugins from other folders
    const std::string header = "# tessera ab " + origin + " merged onto " +
                               fs::absolute(base_pipeline).lexically_normal().string() +
                               "\n# Reproduce this arm: tessera compile MODEL -p THIS_FILE -t TARGET -o PACKAGE\n";
    MergedPipeline merged;
    try {
      merged = merge_overlay_into_file(base_pipeline, request.overlay, staged, header);
      arm.info.changes = merged.changes;
      arm.yaml = header + merged.yaml;
      SessionOptions options;
      options.pipeline = staged;
      session = std::make_unique<Session>(options);
      // Creating the plugins runs their configure(), which checks option ranges, and a cost
      // model may read a table per target (calibrated): each is loaded now, once, rather than
      // failing every work item of that target and writing a reproducer for each.
      session->create_plugins();
      for (const Target& target : targets) session->cost_model().estimate_exchange(ExchangePhase{}, target);
    } catch (const std::exception& e) {
      // The staged file is temporary: name the base's or the overlay's place instead.
      const int header_lines = static_cast<int>(std::count(header.begin(), header.end(), '\n'));
      throw Error(place_in_sources(e.what(), staged, header_lines, merged) + " [" + origin + " merged onto " +
                  base_pipeline + "]");
    }
    const PipelineSpec& spec = session->spec();
    const PluginHost& host = session->host();
    std::string fingerprint_text = "tessera-ab-arm/1\n";
    std::vector<ArmInput>& inputs = arm.info.inputs;
    fingerprint_text += use_fingerprint_text(spec.cost_model, host, "cost_model", target_names, inputs);
    fingerprint_text += use_fingerprint_text(spec.exchange_scheduler, host, "exchange_scheduler", target_names, inputs);
    for (const PluginUse& pass : spec.passes)
      fingerprint_text += use_fingerprint_text(pass, host, "pass", target_names, inputs);
    arm.info.fingerprint = hash_text(fingerprint_text);
    arms.push_back(std::move(arm));
  }
  PreparedArm twin = arms.front();
  twin.info.name = twin_name(arms.front().info.name);
  twin.info.twin_of = arms.front().info.name;
  arms.push_back(std::move(twin));
  return arms;
}

}  // namespace tessera::ab
