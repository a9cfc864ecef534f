// Per-port job sequences and their full or incremental re-timing (see port_sequences.hpp).
#include "port_sequences.hpp"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace tessera::latency_aware {

PortSequences::PortSequences(const PhaseModel& model, const std::vector<std::uint32_t>& order) : model_(model) {
  const std::uint32_t tiles = model.tiles;
  const std::size_t entries = std::size_t{model.jobs()} + model.destination.size();
  entry_job_.resize(entries);
  entry_port_.resize(entries);
  entry_latency_.resize(entries);
  begin_.assign(std::size_t{2} * tiles + 1, 0);
  for (std::uint32_t job = 0; job < model.jobs(); ++job) {
    const std::uint32_t first = first_entry(job);
    for (std::uint32_t k = 0; k < entry_count(job); ++k) {
      const std::uint32_t endpoint = model.endpoint_begin[job] + k - 1;
      entry_job_[first + k] = job;
      entry_port_[first + k] = k == 0 ? model.source[job] : tiles + model.destination[endpoint];
      entry_latency_[first + k] = k == 0 ? 0 : model.latency[endpoint];
      ++begin_[entry_port_[first + k] + 1];
    }
  }
  for (std::uint32_t port = 0; port < 2 * tiles; ++port) begin_[port + 1] += begin_[port];
  sequence_.resize(entries);
  slot_.resize(entries);
  std::vector<std::uint32_t> next_slot(begin_.begin(), begin_.end() - 1);
  for (const std::uint32_t job : order) {
    for (std::uint32_t entry = first_entry(job); entry < first_entry(job) + entry_count(job); ++entry) {
      const std::uint32_t slot = next_slot[entry_port_[entry]]++;
      sequence_[slot] = entry;
      slot_[entry] = slot;
    }
  }
  start_.resize(model.jobs());
  blocker_.resize(model.jobs());
  blocking_port_.resize(model.jobs());
  pending_.resize(model.jobs());
  stamp_.assign(model.jobs(), 0);
}

std::uint32_t PortSequences::entry_for_port(std::uint32_t job, std::uint32_t port) const {
  const std::uint32_t first = first_entry(job);
  for (std::uint32_t entry = first; entry < first + entry_count(job); ++entry)
    if (entry_port_[entry] == port) return entry;
  assert(false && "the job does not use this port");
  return kNone;
}

std::uint32_t PortSequences::index_of(std::uint32_t job, std::uint32_t port) const {
  return slot_[entry_for_port(job, port)] - begin_[port];
}

void PortSequences::move(std::uint32_t port, std::uint32_t from, std::uint32_t to) {
  auto first = sequence_.begin() + begin_[port];
  if (from > to) std::rotate(first + to, first + from, first + from + 1);
  else std::rotate(first + from, first + from + 1, first + to + 1);
  for (std::uint32_t position = begin_[port] + std::min(from, to); position <= begin_[port] + std::max(from, to);
       ++position)
    slot_[sequence_[position]] = position;
}

void PortSequences::time_job(std::uint32_t job) {
  const std::uint32_t sender = model_.source[job];
  const std::uint32_t first = first_entry(job);
  std::uint64_t start = 0;
  std::uint32_t blocker = kNone, blocking_port = kNone;
  if (const std::uint32_t before = previous(first); before != kNone) {
    const std::uint32_t earlier = entry_job_[before];
    start = start_[earlier] + model_.words[earlier];
    blocker = earlier;
    blocking_port = sender;
  }
  for (std::uint32_t entry = first + 1; entry < first + entry_count(job); ++entry) {
    const std::uint32_t before = previous(entry);
    if (before == kNone) continue;
    const std::uint32_t earlier = entry_job_[before];
    // The earlier job's last word arrives, then the mux needs the switch cost if the
    // sender changes.
    std::uint64_t ready = start_[earlier] + entry_latency_[before] + model_.words[earlier];
    if (model_.source[earlier] != sender) ready += model_.switch_cost;
    const std::uint32_t latency = entry_latency_[entry];
    // On a tie the receiver is the blocker: chains then follow receivers, whose idle
    // cycles (not the sender's) are what a move can recover.
    if (ready >= latency && ready - latency >= start) {
      start = ready - latency;
      blocker = earlier;
      blocking_port = entry_port_[entry];
    }
  }
  start_[job] = start;
  blocker_[job] = start == 0 ? kNone : blocker;
  blocking_port_[job] = start == 0 ? kNone : blocking_port;
}

bool PortSequences::time_jobs(const std::vector<std::uint32_t>& jobs) {
  // Kahn's algorithm restricted to `jobs`: a job is ready once its predecessors among them
  // are timed (the others keep their times).
  ready_.clear();
  for (const std::uint32_t job : jobs) {
    std::uint32_t waiting = 0;
    for (std::uint32_t entry = first_entry(job); entry < first_entry(job) + entry_count(job); ++entry) {
      const std::uint32_t before = previous(entry);
      waiting += before != kNone && stamp_[entry_job_[before]] == epoch_;
    }
    pending_[job] = waiting;
    if (waiting == 0) ready_.push_back(job);
  }
  std::size_t timed = 0;
  while (!ready_.empty()) {
    const std::uint32_t job = ready_.back();
    ready_.pop_back();
    time_job(job);
    ++timed;
    for (std::uint32_t entry = first_entry(job); entry < first_entry(job) + entry_count(job); ++entry) {
      const std::uint32_t after = next(entry);
      if (after == kNone) continue;
      const std::uint32_t later = entry_job_[after];
      if (stamp_[later] == epoch_ && --pending_[later] == 0) ready_.push_back(later);
    }
  }
  return timed == jobs.size();
}

void PortSequences::score_receivers() {
  const std::uint32_t tiles = model_.tiles;
  score_ = Score{};
  last_job_ = kNone;
  std::uint64_t horizon = 0;
  for (std::uint32_t port = tiles; port < 2 * tiles; ++port) {
    if (begin_[port] == begin_[port + 1]) continue;
    const std::uint32_t entry = sequence_[begin_[port + 1] - 1];
    const std::uint32_t job = entry_job_[entry];
    const std::uint64_t end = start_[job] + entry_latency_[entry] + model_.words[job];
    score_.completion_sum += end;
    if (end > horizon) {
      horizon = end;
      last_job_ = job;
      score_.ports_at_horizon = 0;
    }
    score_.ports_at_horizon += end == horizon;
  }
  score_.horizon = horizon;
}

bool PortSequences::retime() {
  ++epoch_;
  affected_.resize(model_.jobs());
  std::iota(affected_.begin(), affected_.end(), 0u);
  for (const std::uint32_t job : affected_) stamp_[job] = epoch_;
  if (!time_jobs(affected_)) return false;
  score_receivers();
  return true;
}

bool PortSequences::try_move(std::uint32_t port, std::uint32_t from, std::uint32_t to) {
  undo_.clear();
  undo_score_ = score_;
  undo_last_job_ = last_job_;
  undo_port_ = port;
  undo_from_ = from;
  undo_to_ = to;
  move_pending_ = true;
  move(port, from, to);

  // The moved range and everything after it on any port, transitively.
  ++epoch_;
  affected_.clear();
  for (std::uint32_t position = begin_[port] + std::min(from, to); position <= begin_[port] + std::max(from, to);
       ++position) {
    const std::uint32_t job = entry_job_[sequence_[position]];
    if (stamp_[job] != epoch_) {
      stamp_[job] = epoch_;
      affected_.push_back(job);
    }
  }
  for (std::size_t i = 0; i < affected_.size(); ++i) {
    const std::uint32_t job = affected_[i];
    for (std::uint32_t entry = first_entry(job); entry < first_entry(job) + entry_count(job); ++entry) {
      const std::uint32_t after = next(entry);
      if (after == kNone) continue;
      const std::uint32_t later = entry_job_[after];
      if (stamp_[later] != epoch_) {
        stamp_[later] = epoch_;
        affected_.push_back(later);
      }
    }
  }
  undo_.reserve(affected_.size());
  for (const std::uint32_t job : affected_) undo_.push_back({job, start_[job], blocker_[job], blocking_port_[job]});
  if (!time_jobs(affected_)) {
    undo();
    return false;
  }
  score_receivers();
  return true;
}

void PortSequences::assign(const PortSequences& other) {
  assert(&model_ == &other.model_);
  sequence_ = other.sequence_;
  slot_ = other.slot_;
  start_ = other.start_;
  blocker_ = other.blocker_;
  blocking_port_ = other.blocking_port_;
  score_ = other.score_;
  last_job_ = other.last_job_;
  undo_.clear();
  move_pending_ = false;
}

void PortSequences::undo() {
  assert(move_pending_ && "undo() without a pending try_move()");
  move_pending_ = false;
  move(undo_port_, undo_to_, undo_from_);
  for (const Saved& saved : undo_) {
    start_[saved.job] = saved.start;
    blocker_[saved.job] = saved.blocker;
    blocking_port_[saved.job] = saved.blocking_port;
  }
  undo_.clear();
  score_ = undo_score_;
  last_job_ = undo_last_job_;
}

}  // namespace tessera::latency_aware
