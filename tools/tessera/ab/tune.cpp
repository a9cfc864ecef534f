// The option space of `tessera tune`, configurations drawn from it, and successive halving.
#include "tune.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/diagnostic.hpp"
#include "tessera/strict_yaml.hpp"

namespace tessera::ab {

namespace {

constexpr std::size_t kMaxChoices = 1000;
constexpr std::size_t kMaxEnumerated = 100000;  // a finite space larger than this is sampled, never listed

bool is_plugin_name(const std::string& text) {
  if (text.empty() || text.size() > 64) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; });
}

std::string scalar_of(const std::string& file, const YAML::Node& node, const std::string& what) {
  if (!yaml::is_scalar(node)) throw Error(yaml::place(file, node) + ": " + what + " must be a single value");
  return node.Scalar();
}

std::optional<long long> as_integer(const std::string& text) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {}
  return std::nullopt;
}

std::optional<double> as_number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && std::isfinite(value)) return value;
  } catch (const std::exception&) {}
  return std::nullopt;
}

Dimension read_dimension(const std::string& file, const YAML::Node& node) {
  Dimension d;
  d.place = yaml::place(file, node);
  if (!yaml::is_map(node))
    throw Error(d.place +
                ": a space entry is a map: {slot: exchange_scheduler, plugins: [greedy, optimal]} or "
                "{pass: select-finalist, option: finalists, choices: [1, 2, 4]}");
  yaml::check_keys(file, node, {"slot", "pass", "plugin", "plugins", "option", "choices", "range", "scale"},
                   "a space entry");
  if (node["slot"].IsDefined() == node["pass"].IsDefined())
    throw Error(d.place +
                ": give exactly one of slot (cost_model or exchange_scheduler) and pass (a pass plugin of the "
                "base pipeline)");
  if (node["slot"].IsDefined()) {
    d.slot = scalar_of(file, node["slot"], "slot");
    if (d.slot != "cost_model" && d.slot != "exchange_scheduler")
      throw Error(yaml::place(file, node["slot"]) + ": slot " + d.slot +
                  ": the slots are cost_model and exchange_scheduler");
  } else {
    d.pass = scalar_of(file, node["pass"], "pass");
    if (!is_plugin_name(d.pass))
      throw Error(yaml::place(file, node["pass"]) + ": pass '" + d.pass + "' is not a plugin name");
  }
  if (node["plugin"].IsDefined()) {
    if (d.slot.empty())
      throw Error(yaml::place(file, node["plugin"]) +
                  ": plugin: belongs to slot options (a pass names its plugin with pass:)");
    d.plugin = scalar_of(file, node["plugin"], "plugin");
  }
  const bool chooses_plugin = node["plugins"].IsDefined();
  if (chooses_plugin == node["option"].IsDefined())
    throw Error(d.place + ": give exactly one of plugins: [..] (which plugin fills the slot) and option: NAME");

  auto read_choices = [&](const YAML::Node& list, const char* key) {
    if (!yaml::is_sequence(list) || list.size() == 0)
      throw Error(yaml::place(file, list) + ": " + key + " is a non-empty list, e.g. [1, 2, 4]");
    if (list.size() > kMaxChoices)
      throw Error(yaml::place(file, list) + fmt::format(": more than {} choices", kMaxChoices));
    std::set<std::string> seen;
    for (const YAML::Node& item : list) {
      const std::string value = scalar_of(file, item, std::string("each of ") + key);
      if (!seen.insert(value).second) throw Error(yaml::place(file, item) + ": " + value + " is listed twice");
      d.choices.push_back(value);
    }
  };
  if (chooses_plugin) {
    if (d.slot.empty())
      throw Error(d.place + ": plugins: chooses a slot's plugin; a pass is not chosen, only its options");
    if (!d.plugin.empty())
      throw Error(d.place + ": plugin: and plugins: together; plugin: restricts an option to one plugin");
    read_choices(node["plugins"], "plugins");
    for (const std::string& name : d.choices)
      if (!is_plugin_name(name)) throw Error(d.place + ": '" + name + "' is not a plugin name");
    d.name = d.slot;
    return d;
  }
  d.option = scalar_of(file, node["option"], "option");
  if (!is_plugin_name(d.option))
    throw Error(yaml::place(file, node["option"]) + ": '" + d.option + "' is not an option name");
  d.name = (d.slot.empty() ? d.pass : d.plugin.empty() ? d.slot : d.slot + "[" + d.plugin + "]") + "." + d.option;
  if (node["choices"].IsDefined() == node["range"].IsDefined())
    throw Error(d.place + ": give exactly one of choices: [..] and range: [LOW, HIGH] for option " + d.option);
  if (node["choices"].IsDefined()) {
    if (node["scale"].IsDefined()) throw Error(yaml::place(file, node["scale"]) + ": scale: applies to a range only");
    read_choices(node["choices"], "choices");
    return d;
  }
  const YAML::Node range = node["range"];
  if (!yaml::is_sequence(range) || range.size() != 2)
    throw Error(yaml::place(file, range) + ": range is [LOW, HIGH], e.g. [1, 8] or [0.3, 0.9]");
  const std::string low = scalar_of(file, range[0], "range's low end"),
                    high = scalar_of(file, range[1], "range's high end");
  d.is_range = true;
  d.integer = as_integer(low) && as_integer(high);
  const std::optional<double> lo = as_number(low), hi = as_number(high);
  if (!lo || !hi) throw Error(yaml::place(file, range) + ": range ends must be numbers: [" + low + ", " + high + "]");
  d.low = *lo;
  d.high = *hi;
  if (d.low > d.high)
    throw Error(yaml::place(file, range) + ": range [" + low + ", " + high + "] is empty: write [LOW, HIGH]");
  if (node["scale"].IsDefined()) {
    const std::string scale = scalar_of(file, node["scale"], "scale");
    if (scale != "log" && scale != "linear") throw Error(yaml::place(file, node["scale"]) + ": scale is linear or log");
    d.log_scale = scale == "log";
    if (d.log_scale && d.low <= 0) throw Error(yaml::place(file, range) + ": a log-scale range must be above 0");
  }
  return d;
}

// A range's values when it is small enough to list (integers only).
std::optional<std::vector<std::string>> listed_values(const Dimension& d) {
  if (!d.is_range) return d.choices;
  if (!d.integer || d.high - d.low >= 64) return std::nullopt;
  std::vector<std::string> values;
  for (long long v = static_cast<long long>(d.low); v <= static_cast<long long>(d.high); ++v)
    values.push_back(std::to_string(v));
  return values;
}

std::string draw_value(const Dimension& d, std::mt19937_64& random) {
  if (!d.is_range) return d.choices[random() % d.choices.size()];
  const double u = static_cast<double>(random() >> 11) * 0x1.0p-53;  // in [0, 1), portable across standard libraries
  double x =
      d.log_scale ? std::exp(std::log(d.low) + u * (std::log(d.high) - std::log(d.low))) : d.low + u * (d.high - d.low);
  if (d.integer) {
    if (!d.log_scale)
      return std::to_string(static_cast<long long>(d.low) +
                            static_cast<long long>(random() % static_cast<std::uint64_t>(d.high - d.low + 1)));
    return std::to_string(std::clamp(std::llround(x), static_cast<long long>(d.low), static_cast<long long>(d.high)));
  }
  return fmt::format("{:.6g}", std::clamp(x, d.low, d.high));
}

}  // namespace

Space load_space(const std::string& path) {
  Space space;
  space.file = path;
  const YAML::Node root = yaml::load_file(path, "tuning space");
  if (!yaml::is_map(root))
    throw Error(path + ": a tuning space file is a map with `space:`, a list of options to search");
  yaml::check_keys(path, root, {"space"}, "a tuning space file");
  const YAML::Node list = root["space"];
  if (!yaml::is_sequence(list) || list.size() == 0)
    throw Error(yaml::place(path, list.IsDefined() ? list : root) +
                ": space: is a non-empty list of options to search");
  std::set<std::string> names;
  for (const YAML::Node& node : list) {
    Dimension d = read_dimension(path, node);
    if (!names.insert(d.name).second) throw Error(d.place + ": " + d.name + " is searched twice");
    space.dimensions.push_back(std::move(d));
  }
  // A slot option restricted to a plugin needs that plugin among the slot's choices.
  for (const Dimension& d : space.dimensions) {
    if (d.plugin.empty()) continue;
    const auto chooser = std::find_if(space.dimensions.begin(), space.dimensions.end(),
                                      [&](const Dimension& c) { return c.option.empty() && c.slot == d.slot; });
    if (chooser != space.dimensions.end() &&
        std::find(chooser->choices.begin(), chooser->choices.end(), d.plugin) == chooser->choices.end())
      throw Error(d.place + ": " + d.name + " applies when " + d.plugin + " fills " + d.slot + ", but the space's " +
                  d.slot + " choices (" + chooser->place + ") do not include it");
  }
  return space;
}

bool applies(const Space& space, std::size_t d, const std::vector<std::optional<std::string>>& values) {
  const Dimension& dim = space.dimensions[d];
  if (dim.plugin.empty()) return true;
  for (std::size_t c = 0; c < space.dimensions.size() && c < values.size(); ++c)
    if (space.dimensions[c].option.empty() && space.dimensions[c].slot == dim.slot) return values[c] == dim.plugin;
  return true;  // no dimension chooses the slot's plugin: the base's plugin is assumed (the arm check confirms it)
}

std::vector<Configuration> draw_configurations(const Space& space, std::size_t count, std::uint64_t seed) {
  const std::size_t n = space.dimensions.size();
  // Plugin choices come first so that whether an option applies is known when it is drawn.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return space.dimensions[i].option.empty(); });

  std::vector<std::vector<std::optional<std::string>>> points;
  bool finite = true;
  for (const Dimension& d : space.dimensions) finite &= listed_values(d).has_value();
  if (finite) {  // list the whole space when it is small enough
    std::vector<std::optional<std::string>> values(n);
    bool too_many = false;
    std::function<void(std::size_t)> visit = [&](std::size_t k) {
      if (too_many) return;
      if (k == n) {
        points.push_back(values);
        too_many = points.size() > std::max(count, kMaxEnumerated / 100);
        return;
      }
      const std::size_t d = order[k];
      if (!applies(space, d, values)) {
        values[d] = std::nullopt;
        visit(k + 1);
        return;
      }
      const std::vector<std::string> listed = *listed_values(space.dimensions[d]);  // held: a temporary would dangle
      for (const std::string& value : listed) {
        values[d] = value;
        visit(k + 1);
      }
      values[d] = std::nullopt;
    };
    visit(0);
    if (points.size() > count) points.clear();
  }
  if (points.empty()) {
    std::mt19937_64 random(seed);
    std::set<std::vector<std::optional<std::string>>> seen;
    for (std::size_t attempt = 0; points.size() < count && attempt < 50 * count; ++attempt) {
      std::vector<std::optional<std::string>> values(n);
      for (std::size_t d : order)
        if (applies(space, d, values)) values[d] = draw_value(space.dimensions[d], random);
      if (seen.insert(values).second) points.push_back(std::move(values));
    }
  }
  std::vector<Configuration> configurations;
  const int width = points.size() >= 100 ? 3 : 2;
  for (std::size_t i = 0; i < points.size(); ++i)
    configurations.push_back({fmt::format("c{:0{}}", i + 1, width), std::move(points[i])});
  return configurations;
}

std::string overlay_yaml(const Space& space, const Configuration& configuration, const std::string& header) {
  YAML::Node root(YAML::NodeType::Map);
  YAML::Node passes(YAML::NodeType::Sequence);
  for (std::size_t d = 0; d < space.dimensions.size(); ++d) {
    const Dimension& dim = space.dimensions[d];
    if (!configuration.values[d]) continue;
    const std::string& value = *configuration.values[d];
    if (!dim.slot.empty()) {
      if (dim.option.empty()) root[dim.slot]["plugin"] = value;
      else root[dim.slot]["options"][dim.option] = value;
      continue;
    }
    bool found = false;
    for (YAML::Node entry : passes)
      if (entry["plugin"].Scalar() == dim.pass) {
        entry["options"][dim.option] = value;
        found = true;
      }
    if (!found) {
      YAML::Node entry(YAML::NodeType::Map);
      entry["plugin"] = dim.pass;
      entry["options"][dim.option] = value;
      passes.push_back(entry);
    }
  }
  if (passes.size() > 0) root["passes"] = passes;
  YAML::Emitter out;
  out << root;
  return header + out.c_str() + "\n";
}

std::string describe(const Space& space, const Configuration& configuration) {
  std::string text;
  for (std::size_t d = 0; d < space.dimensions.size(); ++d)
    if (configuration.values[d])
      text += (text.empty() ? "" : " ") + space.dimensions[d].name + "=" + *configuration.values[d];
  return text;
}

std::vector<Rung> halving_schedule(std::size_t configurations, std::size_t models, std::size_t eta,
                                   std::uint32_t repeat) {
  eta = std::max<std::size_t>(eta, 2);
  std::vector<std::size_t> survivors;  // one rung per ranking; a single survivor needs none
  for (std::size_t n = configurations; n > 1; n = (n + eta - 1) / eta) survivors.push_back(n);
  std::vector<Rung> schedule;
  for (std::size_t r = 0; r < survivors.size(); ++r) {
    const double shrink = std::pow(static_cast<double>(eta), static_cast<double>(survivors.size() - 1 - r));
    Rung rung;
    rung.configurations = survivors[r];
    rung.models = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(models / shrink)), 1,
                                          std::max<std::size_t>(models, 1));
    rung.repeat = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::ceil(repeat / shrink)));
    schedule.push_back(rung);
  }
  return schedule;
}

std::vector<std::size_t> spread_models(std::size_t total, std::size_t count) {
  count = std::min(count, total);
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < count; ++i) indices.push_back(i * total / count);
  return indices;
}

}  // namespace tessera::ab
