// A schedule as one job sequence per port (sender or receiver), re-timed as a whole or
// incrementally after a move.
#pragma once
#include <cstdint>
#include <vector>

#include "order_timing.hpp"
#include "phase_model.hpp"

namespace tessera::latency_aware {

/// Every port serves its jobs in its own sequence; a job starts as soon as its sender and
/// each of its receivers have served the jobs before it (latency and switch cost included).
/// Unlike a global order, one port's sequence can change without touching the others, which
/// is what a move on a critical path needs. Sequences can then contradict each other (a job
/// waiting, through other ports, on itself): re-timing detects that and reports it.
///
/// Ports are numbered senders first (port = tile), then receivers (port = tiles + tile).
class PortSequences {
public:
  PortSequences(const PhaseModel& model, const std::vector<std::uint32_t>& order);

  /// Re-times every job. Returns false when the sequences contradict each other.
  bool retime();

  /// Moves the job at index `from` of `port` to index `to` (shifting the jobs between) and
  /// re-times only the jobs that can depend on the move. Returns false, with the move
  /// undone and the timing as before, when the sequences would contradict each other.
  /// Otherwise the move stays until `keep()` or `undo()`.
  bool try_move(std::uint32_t port, std::uint32_t from, std::uint32_t to);
  void keep() {
    undo_.clear();
    move_pending_ = false;
  }
  /// Restores the sequences and the timing from before the last successful try_move().
  void undo();

  /// Copies another schedule of the same model (sequences and timing), e.g. a saved best.
  void assign(const PortSequences& other);

  /// Jobs the last retime() or try_move() timed: the measure of its cost.
  std::size_t last_timed() const { return affected_.size(); }
  /// Jobs plus endpoints: the measure of a full copy's cost.
  std::size_t size() const { return sequence_.size(); }

  const Score& score() const { return score_; }
  const std::vector<std::uint64_t>& start() const { return start_; }
  std::uint32_t last_job() const { return last_job_; }
  /// The job that made `job` wait and the port it waited on (kNone when it did not wait).
  std::uint32_t blocker(std::uint32_t job) const { return blocker_[job]; }
  std::uint32_t blocking_port(std::uint32_t job) const { return blocking_port_[job]; }
  /// The job's index in the sequence of `port` (which must be one of its ports).
  std::uint32_t index_of(std::uint32_t job, std::uint32_t port) const;

private:
  // An entry is one job on one of its ports: entry first_entry(job) is its place in its
  // sender's sequence, the next ones its places at its destinations. Sequences hold entries,
  // so a job's predecessor on a port comes with that port's latency, no search needed.
  std::uint32_t first_entry(std::uint32_t job) const { return model_.endpoint_begin[job] + job; }
  std::uint32_t entry_count(std::uint32_t job) const {
    return 1 + model_.endpoint_begin[job + 1] - model_.endpoint_begin[job];
  }
  std::uint32_t entry_for_port(std::uint32_t job, std::uint32_t port) const;
  void move(std::uint32_t port, std::uint32_t from, std::uint32_t to);
  std::uint32_t previous(std::uint32_t entry) const {
    const std::uint32_t slot = slot_[entry];
    return slot > begin_[entry_port_[entry]] ? sequence_[slot - 1] : kNone;
  }
  std::uint32_t next(std::uint32_t entry) const {
    const std::uint32_t slot = slot_[entry];
    return slot + 1 < begin_[entry_port_[entry] + 1] ? sequence_[slot + 1] : kNone;
  }
  /// Times `job` from the (already timed) jobs before it on its ports.
  void time_job(std::uint32_t job);
  /// Times `jobs` (closed under successors) in dependency order; false on a contradiction.
  bool time_jobs(const std::vector<std::uint32_t>& jobs);
  void score_receivers();

  const PhaseModel& model_;
  std::vector<std::uint32_t> begin_;     ///< ports + 1 offsets into sequence_
  std::vector<std::uint32_t> sequence_;  ///< entries, port by port
  std::vector<std::uint32_t> slot_;      ///< per entry: its position in sequence_
  std::vector<std::uint32_t> entry_job_, entry_port_, entry_latency_;

  Score score_;
  std::uint32_t last_job_ = kNone;
  std::vector<std::uint64_t> start_;
  std::vector<std::uint32_t> blocker_, blocking_port_;

  // Scratch for re-timing: the jobs to time, how many of their predecessors are pending,
  // and a stamp marking membership without clearing.
  std::vector<std::uint32_t> affected_, ready_, pending_, stamp_;
  std::uint32_t epoch_ = 0;

  // What undo() restores.
  struct Saved {
    std::uint32_t job;
    std::uint64_t start;
    std::uint32_t blocker, blocking_port;
  };
  std::vector<Saved> undo_;
  Score undo_score_;
  std::uint32_t undo_last_job_ = kNone;
  std::uint32_t undo_port_ = 0, undo_from_ = 0, undo_to_ = 0;
  bool move_pending_ = false;  ///< a try_move() neither kept nor undone
};

}  // namespace tessera::latency_aware
