// Deterministic effort accounting for the latency-aware scheduler.
#pragma once
#include <chrono>
#include <cstdint>

namespace tessera::latency_aware {

using Clock = std::chrono::steady_clock;

/// The scheduler's algorithms charge work units as they go (one unit is about a nanosecond
/// of a 2020s core's time) and stop when the limit is reached. Stopping on work done, not on
/// the clock, makes the same phase give the same schedule on a busy machine and an idle
/// one. The wall-clock deadline is only a safety stop: when it fires first, the result may
/// differ from run to run, and `stopped_by_clock()` says so.
class WorkBudget {
public:
  static constexpr std::uint64_t kUnitsPerMillisecond = 1'000'000;

  WorkBudget(std::uint64_t limit, Clock::time_point deadline) : limit_(limit), deadline_(deadline) {}

  /// Charges `units`; false once the limit is reached or the deadline has passed.
  bool charge(std::uint64_t units) {
    used_ += units;
    if (used_ >= next_clock_check_) {
      next_clock_check_ = used_ + kClockCheckInterval;
      if (Clock::now() > deadline_) stopped_by_clock_ = true;
    }
    return !spent();
  }
  /// Records work that had to be done whatever the limit (it still counts).
  void record(std::uint64_t units) { used_ += units; }

  bool spent() const { return used_ >= limit_ || stopped_by_clock_; }
  std::uint64_t used() const { return used_; }
  std::uint64_t limit() const { return limit_; }
  /// Lowers or raises the limit, e.g. to give one stage of the search its share.
  void set_limit(std::uint64_t limit) { limit_ = limit; }
  bool stopped_by_clock() const { return stopped_by_clock_; }

private:
  // Reading the clock costs tens of nanoseconds; every ~millisecond of work is enough.
  static constexpr std::uint64_t kClockCheckInterval = 1'000'000;

  std::uint64_t limit_;
  std::uint64_t used_ = 0;
  std::uint64_t next_clock_check_ = 0;
  Clock::time_point deadline_;
  bool stopped_by_clock_ = false;
};

}  // namespace tessera::latency_aware
