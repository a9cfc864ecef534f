// Preparing the arms of an A/B test: merge each overlay, validate it with the core, fingerprint it.
#pragma once
#include <string>
#include <vector>

#include "results.hpp"
#include "tessera/target.hpp"

namespace tessera::ab {

struct ArmRequest {
  std::string name;
  std::string overlay;  ///< "" = the base pipeline itself
};

/// Parses "NAME=OVERLAY.yaml" or "NAME=" (the base). Throws Error on a bad name.
ArmRequest parse_arm_argument(const std::string& text);

/// The name of the A-vs-A pseudo-arm: the baseline compiled a second time.
std::string twin_name(const std::string& baseline);

/// An arm ready to run: its merged pipeline YAML and its manifest entry.
struct PreparedArm {
  ArmInfo info;      ///< `pipeline` still empty: set once the results directory is known
  std::string yaml;  ///< the merged pipeline, with a header saying how it was made
};

/// Merges every overlay onto `base_pipeline`, writes each result into `staging_directory`,
/// loads and resolves it with the core (plugins, option types, pass order), creates its plugins
/// (so each plugin's configure() checks its options), asks its cost model for one (empty)
/// exchange estimate on each of `targets` (so the tables it reads per target are loaded and
/// checked) and fingerprints it from its plugins' names, versions, library contents, resolved
/// options and the contents of the files its `path` options name (`{target}` expanded for
/// each target). Appends the baseline's twin. Throws Error naming the arm, the overlay and
/// the merged file, before any work item has run.
std::vector<PreparedArm> prepare_arms(const std::string& base_pipeline, const std::vector<ArmRequest>& requests,
                                      const std::string& staging_directory, const std::vector<Target>& targets = {});

}  // namespace tessera::ab
