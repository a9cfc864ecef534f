// The local executor: work items in parallel, a model's items in order on one worker, and
// simulator runs started only while the memory they are known to need is available.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "runner.hpp"
#include "tessera/target.hpp"

namespace tessera::ab {

/// Admits simulator runs while the sum of their expected peaks fits in `budget_kib`; one run
/// is always admitted when none is running, so a run larger than the budget still happens.
class MemoryGate {
public:
  explicit MemoryGate(std::int64_t budget_kib) : budget_kib_(budget_kib) {}
  /// True when a run of `kib` may start now.
  bool admits(std::int64_t kib);
  void acquire(std::int64_t kib);
  void release(std::int64_t kib);
  std::int64_t budget_kib() const { return budget_kib_; }

private:
  bool fits(std::int64_t kib) const { return running_ == 0 || reserved_kib_ + kib <= budget_kib_; }
  std::mutex mutex_;
  std::condition_variable freed_;
  std::int64_t budget_kib_;
  std::int64_t reserved_kib_ = 0;
  int running_ = 0;
};

/// Holds a run's share of a gate (none when `gate` is null) for as long as it lives.
class MemoryReservation {
public:
  MemoryReservation(MemoryGate* gate, std::int64_t kib) : gate_(gate), kib_(kib) {
    if (gate_) gate_->acquire(kib_);
  }
  ~MemoryReservation() {
    if (gate_) gate_->release(kib_);
  }
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;

private:
  MemoryGate* gate_;
  std::int64_t kib_;
};

/// What a simulator run of `entry` is expected to hold at its peak: the largest peak RSS of a
/// stored run of that model, else the target's whole SRAM (tiles x memory per tile), which
/// bounds what the simulator allocates for tile memory.
std::int64_t expected_run_kib(const ResultsDir& results, const Manifest& manifest, const SuiteEntry& entry,
                              const Target& target);

/// Waits until `gate` admits a run of `entry` and holds its share (nothing without a gate).
MemoryReservation reserve_run(MemoryGate* gate, const ResultsDir& results, const Manifest& manifest,
                              const SuiteEntry& entry, const Target& target);

/// MemAvailable from /proc/meminfo in KiB (0 when unreadable).
std::int64_t available_memory_kib();

/// Runs `items` on `jobs` workers; each worker takes a whole model's items at a time, in
/// plan order, with its own device lock file when `jobs` > 1 and no lock was given.
RunnerStats run_local(const Manifest& manifest, const ResultsDir& results, const std::vector<WorkItem>& items,
                      const RunnerOptions& options, unsigned jobs, bool lock_given);

}  // namespace tessera::ab
