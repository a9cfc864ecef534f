// The compilation state as a file (`.tstate`): what `--dump-after` writes, `tessera opt` reads
// and writes, and a pass fault's reproducer holds. Versioned JSON text (docs/state-files.md).
#pragma once
#include <cstdint>
#include <string>

#include "tessera/pass.hpp"

namespace tessera {

/// Format version of state files; a reader refuses any other.
inline constexpr std::uint32_t kStateFormatVersion = 1;

/// The state as text: one JSON document, one record per line in its long lists, so two states
/// diff line by line.
std::string state_text(const CompilationState& state);
/// Writes state_text atomically; `what` names the file in errors.
void write_state(const CompilationState& state, const std::string& path, const std::string& what = "the state file");

/// Reads a state file and checks it as the pass manager checks a pass's output: the target's
/// rules, the graphs' shapes, every index in range, and (past 'plan') verify_program and each
/// scheduled phase's validator. Throws Error naming the file, the JSON place and the problem.
CompilationState read_state(const std::string& path);
/// read_state from text (`origin` names it in errors).
CompilationState parse_state(const std::string& text, const std::string& origin);

/// The state without what changes from run to run (pass timings, schedulers' elapsed times), as
/// text that read_state also reads: what golden files hold.
std::string deterministic_state_text(const CompilationState& state);

/// The state's parts ("facts", "target", "graph", "program", ...) without the record, each as
/// compact text: what `--print-changed` compares before and after a pass.
std::vector<std::pair<std::string, std::string>> state_sections(const CompilationState& state);

/// Which parts of a text dump to show: `tile=0-3,op=dense1` (tiles in ranges; ops by name as
/// the planner labels them, kind and index like dense1, by output tensor or by index, with
/// their buffers and supersteps); empty shows everything.
struct DumpFilter {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> tiles;  ///< inclusive ranges
  std::vector<std::string> ops;
  bool shows_tile(std::uint32_t tile) const;
  bool shows_op(const Graph& graph, std::size_t op) const;
  /// A buffer name or superstep label of a shown op ("dense1.w.t3", "dense1.reduce0").
  bool shows_name(const std::string& name) const;
};
/// Parses `tile=LOW-HIGH,tile=N,op=NAME,...`; throws Error naming the bad field and the form.
DumpFilter parse_dump_filter(const std::string& text);

/// A readable text dump of the state (graph, buffers, supersteps, streams), filtered.
std::string dump_state(const CompilationState& state, const DumpFilter& filter = {});

}  // namespace tessera
