// Event-driven dense list scheduling (see dense_list.hpp).
//
// With lookahead 0 this is the `greedy` plugin's rule as it was first written (commit
// 144847e), decision for decision: jobs with one source and one destination set form a
// group served longest first (or in phase order), a sender scans its unfinished groups in
// the same sequence (a finished group's place is taken by the sender's last group), and the
// same packed priority keys decide. The plugin has since changed how sleeping senders wake
// up and how groups are ordered, which breaks some ties differently, so the latency-aware
// scheduler's "never later than greedy" rests on its other starts and search as well.
#include "dense_list.hpp"

#include <algorithm>
#include <limits>
#include <queue>

#include "tessera/receiver_mux.hpp"

namespace tessera::latency_aware {
namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint32_t kMulticast = std::numeric_limits<std::uint32_t>::max();

class DenseListScheduler {
public:
  DenseListScheduler(const PhaseModel& model, const ListRule& rule)
      : model_(model), rule_(rule), switch_cost_(model.switch_cost) {}

  std::optional<std::vector<std::uint32_t>> run(WorkBudget& budget, bool must_finish) {
    build_groups();
    budget.record(kUnitsPerJob * model_.jobs());
    order_.reserve(model_.jobs());
    for (std::uint32_t sender = 0; sender < model_.tiles; ++sender)
      if (slot_count_[sender] > 0) events_.push({0, remaining_send_[sender], sender});
    while (!events_.empty()) {
      const SenderEvent event = events_.top();
      events_.pop();
      const std::uint64_t work = kUnitsPerDecision + kUnitsPerSlot * slot_count_[event.sender];
      if (must_finish) budget.record(work);
      else if (!budget.charge(work)) return std::nullopt;
      serve(event.sender, event.cycle);
    }
    return std::move(order_);
  }

private:
  // Work units (about nanoseconds, see WorkBudget): grouping, one event, one slot scanned.
  static constexpr std::uint64_t kUnitsPerJob = 210;
  static constexpr std::uint64_t kUnitsPerDecision = 85;
  static constexpr std::uint64_t kUnitsPerSlot = 7;

  // Jobs with one source and one destination set, in the order the sender takes them.
  struct Group {
    std::uint32_t endpoint_begin, endpoint_end;  ///< the head job's slice of the model arrays
    std::uint32_t next, end;                     ///< into group_jobs_
  };

  // An unfinished group as its sender scans it, packed so a scan reads one array in order.
  struct Slot {
    std::uint32_t destination;  ///< the receiver, or kMulticast (then see the group)
    std::uint32_t latency;      ///< unicast only
    std::uint32_t group;
    std::uint32_t head;  ///< the group's next job
    std::uint32_t head_words;
  };

  struct Receiver {
    ReceiverMux mux;
    std::uint64_t remaining = 0;  ///< words still to arrive
  };

  struct SenderEvent {
    std::uint64_t cycle;
    std::uint64_t remaining_words;  ///< heavier senders choose first within a cycle
    std::uint32_t sender;
  };
  struct LaterEvent {
    bool operator()(const SenderEvent& a, const SenderEvent& b) const {
      if (a.cycle != b.cycle) return a.cycle > b.cycle;
      if (a.remaining_words != b.remaining_words) return a.remaining_words < b.remaining_words;
      return a.sender > b.sender;
    }
  };

  // When the group's next job could start, ignoring its sender's own port; whether all its
  // receivers already listen to the sender; the heaviest receiver's remaining words.
  struct Readiness {
    std::uint64_t earliest = 0;
    std::uint64_t receiver_load = 0;
    bool listening = true;
  };

  void build_groups() {
    const std::uint32_t tiles = model_.tiles;
    const std::uint32_t jobs = model_.jobs();

    // Each job's destinations sorted, so equal sets compare equal.
    std::vector<std::uint32_t> sorted(model_.destination);
    for (std::uint32_t job = 0; job < jobs; ++job)
      std::sort(sorted.begin() + model_.endpoint_begin[job], sorted.begin() + model_.endpoint_begin[job + 1]);
    auto set_of = [&](std::uint32_t job) {
      return std::pair{sorted.begin() + model_.endpoint_begin[job], sorted.begin() + model_.endpoint_begin[job + 1]};
    };
    auto set_less = [&](std::uint32_t a, std::uint32_t b) {
      const auto [a_first, a_last] = set_of(a);
      const auto [b_first, b_last] = set_of(b);
      return std::lexicographical_compare(a_first, a_last, b_first, b_last);
    };
    auto same_set = [&](std::uint32_t a, std::uint32_t b) {
      const auto [a_first, a_last] = set_of(a);
      const auto [b_first, b_last] = set_of(b);
      return std::equal(a_first, a_last, b_first, b_last);
    };
    auto goes_first = [&](std::uint32_t a, std::uint32_t b) {
      if (rule_.priority != ListPriority::phase_order && model_.words[a] != model_.words[b])
        return model_.words[a] > model_.words[b];
      return a < b;
    };

    // Bucket jobs by source (a counting sort keeps phase order), then sort each bucket by
    // destination set and within a set by the rule.
    std::vector<std::uint32_t> source_begin(std::size_t{tiles} + 1, 0);
    for (std::uint32_t job = 0; job < jobs; ++job) ++source_begin[model_.source[job] + 1];
    for (std::uint32_t tile = 0; tile < tiles; ++tile) source_begin[tile + 1] += source_begin[tile];
    std::vector<std::uint32_t> by_source(jobs);
    {
      std::vector<std::uint32_t> next(source_begin.begin(), source_begin.end() - 1);
      for (std::uint32_t job = 0; job < jobs; ++job) by_source[next[model_.source[job]]++] = job;
    }

    receivers_.assign(tiles, Receiver{});
    remaining_send_.assign(tiles, 0);
    slot_begin_.assign(tiles, 0);
    slot_count_.assign(tiles, 0);
    group_jobs_.reserve(jobs);
    for (std::uint32_t source = 0; source < tiles; ++source) {
      auto first = by_source.begin() + source_begin[source];
      auto last = by_source.begin() + source_begin[source + 1];
      std::sort(first, last, [&](std::uint32_t a, std::uint32_t b) {
        if (set_less(a, b)) return true;
        if (set_less(b, a)) return false;
        return goes_first(a, b);
      });
      slot_begin_[source] = static_cast<std::uint32_t>(slots_.size());
      for (auto group_first = first; group_first != last;) {
        const std::uint32_t head = *group_first;
        auto group_last = std::find_if(group_first, last, [&](std::uint32_t job) { return !same_set(job, head); });
        Group group{model_.endpoint_begin[head], model_.endpoint_begin[head + 1],
                    static_cast<std::uint32_t>(group_jobs_.size()), 0};
        for (auto it = group_first; it != group_last; ++it) {
          group_jobs_.push_back(*it);
          remaining_send_[source] += model_.words[*it];
          for (std::uint32_t k = group.endpoint_begin; k < group.endpoint_end; ++k)
            receivers_[model_.destination[k]].remaining += model_.words[*it];
        }
        group.end = static_cast<std::uint32_t>(group_jobs_.size());
        const bool unicast = group.endpoint_end - group.endpoint_begin == 1;
        slots_.push_back(Slot{unicast ? model_.destination[group.endpoint_begin] : kMulticast,
                              unicast ? model_.latency[group.endpoint_begin] : 0,
                              static_cast<std::uint32_t>(groups_.size()), head, model_.words[head]});
        groups_.push_back(group);
        group_first = group_last;
      }
      slot_count_[source] = static_cast<std::uint32_t>(slots_.size()) - slot_begin_[source];
    }
  }

  Readiness readiness(const Slot& slot, std::uint32_t sender) const {
    Readiness all;
    const Group& group = groups_[slot.group];
    for (std::uint32_t k = group.endpoint_begin; k < group.endpoint_end; ++k) {
      const Receiver& receiver = receivers_[model_.destination[k]];
      all.listening = all.listening && receiver.mux.listening_to == sender;
      all.earliest = std::max(all.earliest, receiver.mux.earliest_send(sender, model_.latency[k], switch_cost_));
      all.receiver_load = std::max(all.receiver_load, receiver.remaining);
    }
    return all;
  }

  // The rank of a startable group, packed in one word (larger is better, never 0). Fields
  // saturate far beyond real phases: 2^39 words into a receiver, 2^23 in one transfer.
  std::uint64_t priority_key(const Slot& slot, std::uint64_t receiver_load, bool listening,
                             std::uint64_t receiver_idle) const {
    const std::uint64_t load = std::min<std::uint64_t>(receiver_load, (std::uint64_t{1} << 39) - 1);
    const std::uint64_t words = std::min<std::uint64_t>(slot.head_words, (1u << 23) - 1);
    switch (rule_.priority) {
      case ListPriority::load_first:
        return (load << 24) | (std::uint64_t{listening} << 23) | words | 1;
      case ListPriority::longest_first:
        return (words << 40) | (load << 1) | std::uint64_t{listening} | (std::uint64_t{1} << 63);
      case ListPriority::phase_order:
        return (std::uint64_t{1} << 32) - slot.head;
      case ListPriority::best_fit: {
        const std::uint64_t idle = std::min<std::uint64_t>(receiver_idle, (1u << 24) - 1);
        return (((1u << 24) - 1 - idle) << 39) | load | (std::uint64_t{1} << 63);
      }
    }
    return 1;
  }

  // With lookahead: receiver load, a small bonus for no switch, minus the wait it costs.
  double lookahead_score(std::uint64_t receiver_load, bool listening, std::uint64_t wait) const {
    return static_cast<double>(receiver_load) + (listening ? 0.5 : 0.0) -
           rule_.wait_penalty * static_cast<double>(wait);
  }

  // `sender` is free at `cycle`: start its best eligible job (now, or within the lookahead),
  // or sleep until the first cycle one could start.
  void serve(std::uint32_t sender, std::uint64_t cycle) {
    Slot* const slots = slots_.data() + slot_begin_[sender];
    const std::uint32_t count = slot_count_[sender];
    const std::uint64_t horizon = cycle + rule_.lookahead;
    std::uint32_t best = count;
    std::uint64_t best_key = 0;
    double best_score = 0;
    std::uint64_t best_start = cycle;
    std::uint64_t wake = kNever;
    for (std::uint32_t position = 0; position < count; ++position) {
      const Slot& slot = slots[position];
      std::uint64_t earliest, load;
      bool listening;
      if (slot.destination != kMulticast) {
        // The hot loop: kept branch-light, whether a receiver is ready is a coin flip.
        const Receiver& receiver = receivers_[slot.destination];
        listening = receiver.mux.listening_to == sender;
        earliest = receiver.mux.earliest_send(sender, slot.latency, switch_cost_);
        load = receiver.remaining;
      } else {
        const Readiness all = readiness(slot, sender);
        earliest = all.earliest;
        load = all.receiver_load;
        listening = all.listening;
      }
      // Cycles the (last ready) receiver would sit idle if the job started now: the first
      // word arrives `cycle - earliest` after it could have.
      const bool eligible = earliest <= horizon;
      wake = std::min(wake, eligible ? kNever : earliest);
      if (!eligible) continue;
      if (rule_.lookahead == 0) {
        const std::uint64_t key = priority_key(slot, load, listening, cycle - earliest);
        if (key > best_key) {
          best_key = key;
          best = position;
        }
      } else {
        const std::uint64_t start = std::max(earliest, cycle);
        const double score = lookahead_score(load, listening, start - cycle);
        if (best == count || score > best_score) {
          best_score = score;
          best = position;
          best_start = start;
        }
      }
    }
    if (best == count) {
      events_.push({wake, remaining_send_[sender], sender});
      return;
    }

    Slot& slot = slots[best];
    Group& group = groups_[slot.group];
    const std::uint32_t job = group_jobs_[group.next++];
    const std::uint32_t words = model_.words[job];
    order_.push_back(job);
    remaining_send_[sender] -= words;
    for (std::uint32_t k = group.endpoint_begin; k < group.endpoint_end; ++k) {
      Receiver& receiver = receivers_[model_.destination[k]];
      receiver.mux.take(sender, best_start + model_.latency[k], words);
      receiver.remaining -= words;
    }
    if (group.next < group.end) {
      slot.head = group_jobs_[group.next];
      slot.head_words = model_.words[slot.head];
    } else {
      // Slot order only breaks exact ties, so the last slot fills the hole.
      slot = slots[count - 1];
      --slot_count_[sender];
    }
    if (slot_count_[sender] > 0) events_.push({best_start + words, remaining_send_[sender], sender});
  }

  const PhaseModel& model_;
  ListRule rule_;
  std::uint64_t switch_cost_;

  std::vector<Group> groups_;
  std::vector<std::uint32_t> group_jobs_;
  std::vector<Slot> slots_;                             ///< each sender's unfinished groups
  std::vector<std::uint32_t> slot_begin_, slot_count_;  ///< per sender, into slots_
  std::vector<Receiver> receivers_;
  std::vector<std::uint64_t> remaining_send_;
  std::priority_queue<SenderEvent, std::vector<SenderEvent>, LaterEvent> events_;
  std::vector<std::uint32_t> order_;
};

}  // namespace

std::optional<std::vector<std::uint32_t>> dense_list_order(const PhaseModel& model, const ListRule& rule,
                                                           WorkBudget& budget, bool must_finish) {
  return DenseListScheduler(model, rule).run(budget, must_finish);
}

}  // namespace tessera::latency_aware
