// A pipeline overlay (a piece of pipeline YAML) deep-merged onto a base pipeline: the arms of
// `tessera ab` and `tessera compile --overlay`.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tessera::overlay {

struct MergedPipeline {
  std::string yaml;                  ///< the merged pipeline; every path in it is absolute
  std::vector<std::string> changes;  ///< what the overlay changed, e.g. "exchange_scheduler: greedy -> in-order"
  /// Where each node of `yaml` was written: its (line, column), 0-based, to "file:line:column"
  /// in the base or the overlay.
  std::map<std::pair<int, int>, std::string> places;
};

/// `message` with its place in `merged_file` ("FILE:LINE:COLUMN", `yaml` starting after
/// `header_lines` lines there) replaced by the place in the base or overlay that wrote that
/// node, so an error names the file the user edits; unchanged when it names no such place.
std::string place_in_sources(const std::string& message, const std::string& merged_file, int header_lines,
                             const MergedPipeline& merged);

/// True when option `option` of plugin `plugin` is of type `path` (then a relative value is
/// made absolute against the file that wrote it).
using PathOptionTest = std::function<bool(const std::string& plugin, const std::string& option)>;

/// Merges the overlay file onto the base pipeline file. Maps merge key by key; `passes`
/// entries are matched by plugin name and their options merged (`remove: true` drops a pass,
/// `after:`/`before: NAME` inserts a new one); naming another plugin for cost_model,
/// exchange_scheduler replaces that entry with its own options; plugin_paths are added to
/// the base's. An empty `overlay_path` gives the base itself. Relative paths (`target`,
/// `plugin_paths` and options `is_path` names) are resolved against the file that wrote them.
/// Throws Error with the overlay's file:line:column.
MergedPipeline merge_pipeline_overlay(const std::string& base_path, const std::string& overlay_path,
                                      const PathOptionTest& is_path = {});

/// Merges the overlay onto the base with the relative values of `path` options resolved
/// against the file that wrote them too: which options are paths is known once the plugins are
/// loaded, so it merges, loads the result's plugins, and merges again. Writes `header` and the
/// merged pipeline to `merged_file` (where load_pipeline reads it) and returns the merge.
/// Throws Error with the base's or the overlay's file:line:column.
MergedPipeline merge_overlay_into_file(const std::string& base_path, const std::string& overlay_path,
                                       const std::string& merged_file, const std::string& header);

}  // namespace tessera::overlay
