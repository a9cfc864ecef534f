// Executes A/B work items: compile through the tessera binary, hash, run on the simulator, record.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "results.hpp"

namespace tessera::ab {

class MemoryGate;
class Progress;

struct RunnerOptions {
  std::string tessera;           ///< the tessera binary to run (normally this one)
  std::string lock_path;         ///< device lock file for `tessera run` ("" = its default)
  bool retry_failed = false;     ///< redo stored items whose compile or run failed
  bool fresh = false;            ///< redo every stored item (`tessera ab --fresh`)
  MemoryGate* memory = nullptr;  ///< admits simulator runs by their expected peak (local --jobs)
  Progress* progress = nullptr;  ///< told of every finished or skipped item
};

struct RunnerStats {
  std::size_t executed = 0;  ///< items compiled now
  std::size_t skipped = 0;   ///< finished earlier (resumed)
  std::size_t stale = 0;     ///< stored records of another suite, arm or build, redone
  std::size_t failed = 0;    ///< items executed now whose compile or run failed
  std::size_t runs = 0;      ///< simulator runs made now
  std::size_t warmups = 0;   ///< discarded warm-up compiles made now
  double child_wall_ms = 0;  ///< wall time of every child process started now

  RunnerStats& operator+=(const RunnerStats& other) {
    executed += other.executed;
    skipped += other.skipped;
    stale += other.stale;
    failed += other.failed;
    runs += other.runs;
    warmups += other.warmups;
    child_wall_ms += other.child_wall_ms;
    return *this;
  }
};

/// Executes `items` in order, skipping those with a matching stored record, and stores a
/// record as each one finishes. An item's compile is repeat-independent; the simulator run
/// is made at repeat 0 only (cycles are deterministic), and not at all when the package is
/// byte-identical to the baseline arm's. A failing compile or run is recorded, not thrown.
/// Before the first compile of each (model, arm) it makes, it makes `manifest.warmup`
/// warm-up compiles of it and discards them.
RunnerStats run_work(const Manifest& manifest, const ResultsDir& results, const std::vector<WorkItem>& items,
                     const RunnerOptions& options);

/// True when `record` was made under `manifest` for the item (model, arm, repeat).
bool record_matches(const Record& record, const Manifest& manifest, const std::string& model, const std::string& arm,
                    std::uint32_t repeat);

}  // namespace tessera::ab
