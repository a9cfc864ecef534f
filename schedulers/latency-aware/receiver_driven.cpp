// Receiver-driven earliest-arrival list scheduling (see receiver_driven.hpp).
#include "receiver_driven.hpp"

#include <algorithm>
#include <limits>
#include <queue>

namespace tessera::latency_aware {
namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

class ReceiverDrivenScheduler {
public:
  ReceiverDrivenScheduler(const PhaseModel& model, std::uint32_t slack, std::uint64_t tie_seed)
      : model_(model), slack_(slack), tie_seed_(tie_seed) {}

  std::optional<std::vector<std::uint32_t>> run(WorkBudget& budget, bool must_finish) {
    const std::uint32_t tiles = model_.tiles;
    // Each receiver's incoming jobs, packed so its scan reads one array in order.
    incoming_begin_.assign(std::size_t{tiles} + 1, 0);
    for (std::uint32_t job = 0; job < model_.jobs(); ++job)
      ++incoming_begin_[model_.destination[model_.endpoint_begin[job]] + 1];
    for (std::uint32_t tile = 0; tile < tiles; ++tile) incoming_begin_[tile + 1] += incoming_begin_[tile];
    incoming_.resize(model_.jobs());
    pending_.assign(tiles, 0);
    sender_free_.assign(tiles, 0);
    sender_remaining_.assign(tiles, 0);
    receiver_remaining_.assign(tiles, 0);
    for (std::uint32_t job = 0; job < model_.jobs(); ++job) {
      const std::uint32_t k = model_.endpoint_begin[job];
      const std::uint32_t receiver = model_.destination[k];
      incoming_[incoming_begin_[receiver] + pending_[receiver]++] =
          Incoming{job, model_.source[job], model_.latency[k], model_.words[job]};
      sender_remaining_[model_.source[job]] += model_.words[job];
      receiver_remaining_[receiver] += model_.words[job];
    }
    std::vector<std::uint32_t> order;
    order.reserve(model_.jobs());
    for (std::uint32_t receiver = 0; receiver < tiles; ++receiver)
      if (pending_[receiver] > 0) events_.push({0, receiver_remaining_[receiver], receiver, kNone});
    auto charge = [&](std::uint64_t units) {
      if (!must_finish) return budget.charge(units);
      budget.record(units);
      return true;
    };
    if (!charge(kUnitsPerJob * model_.jobs())) return std::nullopt;
    while (!events_.empty()) {
      if (!charge(kUnitsPerDecision + kUnitsPerCandidate * pending_[events_.top().receiver])) return std::nullopt;
      const ReceiverEvent event = events_.top();
      events_.pop();
      order.push_back(serve(event));
    }
    return order;
  }

private:
  // Work units (about nanoseconds, see WorkBudget): set-up, one event, one candidate.
  static constexpr std::uint64_t kUnitsPerJob = 100;
  static constexpr std::uint64_t kUnitsPerDecision = 100;
  // Measured: a 590k-transfer shuffle (400 sources per receiver) takes ~0.45 s for ~0.7e9
  // units. Scanning only a window of the candidates saves a third and costs 10-50% horizon.
  static constexpr std::uint64_t kUnitsPerCandidate = 3;

  struct Incoming {
    std::uint32_t job, source, latency, words;
  };

  struct ReceiverEvent {
    std::uint64_t free;       ///< first cycle a word from the same source may arrive
    std::uint64_t remaining;  ///< heavier receivers choose first within a cycle
    std::uint32_t receiver;
    std::uint32_t listening_to;
  };
  struct LaterEvent {
    bool operator()(const ReceiverEvent& a, const ReceiverEvent& b) const {
      if (a.free != b.free) return a.free > b.free;
      if (a.remaining != b.remaining) return a.remaining < b.remaining;
      return a.receiver > b.receiver;
    }
  };

  std::uint64_t arrival(const ReceiverEvent& event, const Incoming& in) const {
    const bool switching = event.listening_to != kNone && event.listening_to != in.source;
    const std::uint64_t ready = event.free + (switching ? model_.switch_cost : 0);
    return std::max(ready, sender_free_[in.source] + in.latency);
  }

  // Starts the receiver's best pending job and returns it.
  std::uint32_t serve(const ReceiverEvent& event) {
    const std::uint32_t receiver = event.receiver;
    Incoming* const first = incoming_.data() + incoming_begin_[receiver];
    const std::uint32_t count = pending_[receiver];
    std::uint64_t earliest = kNever;
    for (std::uint32_t i = 0; i < count; ++i) earliest = std::min(earliest, arrival(event, first[i]));
    // Among the jobs arriving within the slack: the busiest sender, then the longer job.
    std::uint32_t best = count;
    for (std::uint32_t i = 0; i < count; ++i) {
      if (arrival(event, first[i]) > earliest + slack_) continue;
      if (best == count || better(first[i], first[best])) best = i;
    }
    const Incoming chosen = first[best];
    first[best] = first[count - 1];
    --pending_[receiver];

    const std::uint64_t arrives = arrival(event, chosen);
    sender_free_[chosen.source] = arrives - chosen.latency + chosen.words;
    sender_remaining_[chosen.source] -= chosen.words;
    receiver_remaining_[receiver] -= chosen.words;
    if (pending_[receiver] > 0)
      events_.push({arrives + chosen.words, receiver_remaining_[receiver], receiver, chosen.source});
    return chosen.job;
  }

  bool better(const Incoming& a, const Incoming& b) const {
    if (sender_remaining_[a.source] != sender_remaining_[b.source])
      return sender_remaining_[a.source] > sender_remaining_[b.source];
    if (a.words != b.words) return a.words > b.words;
    if (tie_seed_ == 0) return a.job < b.job;
    return tie_rank(a.job) < tie_rank(b.job);
  }

  // A seeded permutation of job indices (the splitmix64 finaliser).
  std::uint64_t tie_rank(std::uint32_t job) const {
    std::uint64_t x = job + tie_seed_ * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  const PhaseModel& model_;
  std::uint32_t slack_;
  std::uint64_t tie_seed_;
  std::vector<std::uint32_t> incoming_begin_, pending_;
  std::vector<Incoming> incoming_;
  std::vector<std::uint64_t> sender_free_, sender_remaining_, receiver_remaining_;
  std::priority_queue<ReceiverEvent, std::vector<ReceiverEvent>, LaterEvent> events_;
};

}  // namespace

std::optional<std::vector<std::uint32_t>> receiver_driven_order(const PhaseModel& model, std::uint32_t slack,
                                                                std::uint64_t tie_seed, WorkBudget& budget,
                                                                bool must_finish) {
  if (model.multicast_jobs > 0) return std::nullopt;
  return ReceiverDrivenScheduler(model, slack, tie_seed).run(budget, must_finish);
}

}  // namespace tessera::latency_aware
