// `tessera tune`'s search: an option space read from YAML, configurations drawn from it as
// pipeline overlays, and the successive-halving schedule that narrows them down.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::ab {

/// One searched choice: which plugin fills a slot, or the value of one plugin option.
struct Dimension {
  std::string name;    ///< "exchange_scheduler", "select-finalist.finalists", "exchange_scheduler[greedy].order"
  std::string place;   ///< file:line:column of its entry in the space file
  std::string slot;    ///< "cost_model" or "exchange_scheduler" ("" for a pass option)
  std::string pass;    ///< the pass plugin whose option this is ("" for a slot)
  std::string plugin;  ///< slot options: only when this plugin fills the slot ("" = whichever does)
  std::string option;  ///< "" when the dimension chooses the slot's plugin
  std::vector<std::string> choices;  ///< plugin names, or option values as YAML scalars
  bool is_range = false;             ///< a numeric range instead of choices
  bool integer = false;              ///< of a range: integers only
  bool log_scale = false;            ///< of a range: drawn uniformly in log space
  double low = 0, high = 0;          ///< of a range, inclusive
};

struct Space {
  std::string file;
  std::vector<Dimension> dimensions;
};

/// Reads `space:` from a YAML file: a list of entries, each either
///   {slot: cost_model|exchange_scheduler, plugins: [A, B]}                     which plugin
///   {slot: S, [plugin: P,] option: O, choices: [..] | range: [LO, HI] [, scale: log]}
///   {pass: P, option: O, choices: [..] | range: [LO, HI] [, scale: log]}
/// Throws Error with file:line:column and the fix.
Space load_space(const std::string& path);

/// A point of the space: one value per dimension, nullopt where the dimension does not apply
/// (an option of a plugin the configuration did not choose).
struct Configuration {
  std::string id;  ///< c01, c02, ...
  std::vector<std::optional<std::string>> values;
};

/// Whether dimension `d` applies given the values chosen so far (its slot's plugin).
bool applies(const Space& space, std::size_t d, const std::vector<std::optional<std::string>>& values);

/// Up to `count` distinct configurations: every one when the space is finite and holds no
/// more, else drawn at random with `seed` (the same seed gives the same list).
std::vector<Configuration> draw_configurations(const Space& space, std::size_t count, std::uint64_t seed);

/// The overlay YAML of a configuration (what `tessera ab --arm` and `compile --overlay` read).
std::string overlay_yaml(const Space& space, const Configuration& configuration, const std::string& header);

/// "exchange_scheduler=greedy select-finalist.finalists=3"
std::string describe(const Space& space, const Configuration& configuration);

/// One round of successive halving: how many configurations, on how many models, how often.
struct Rung {
  std::size_t configurations = 0, models = 0;
  std::uint32_t repeat = 1;
};

/// The rungs for `configurations` candidates over `models` suite models: each rung keeps the
/// best 1/eta of the last and gives them eta times the models and repeats, the last rung all
/// models and `repeat` compiles each. None when there is one configuration: nothing to rank.
std::vector<Rung> halving_schedule(std::size_t configurations, std::size_t models, std::size_t eta,
                                   std::uint32_t repeat);

/// `count` of `total` suite entries spread evenly over the suite (indices, ascending).
std::vector<std::size_t> spread_models(std::size_t total, std::size_t count);

}  // namespace tessera::ab
