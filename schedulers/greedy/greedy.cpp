// The `greedy` exchange scheduler: non-preemptive dense list scheduling, event-driven.
//
// Each transfer is sent as one segment. Time advances through events in cycle order; when
// a sender is free it starts the best transfer whose receivers can all take its first word
// at cycle + latency (switch cost included), or sleeps until one of its transfers could
// start. So no sender idles while one of its transfers could start: the schedule is dense,
// which bounds it by twice the optimum on the ideal target. Receivers are never filled
// back before a word already booked to arrive later (ports only move forward in time).
//
// Transfers with the same source and the same destination set are grouped: they compete
// for exactly the same ports, so a sender scans its groups (at most one per receiver for
// unicast), not its transfers: one scan per decision, O(groups). A sender with nothing
// startable sleeps on the receivers it waits for, and a freed receiver wakes only the
// heaviest sleeper that can use it, so a receiver many senders wait for costs one wake-up
// per use, not one per waiting sender.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/log.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/receiver_mux.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::ExchangePhase;
using tessera::ReceiverMux;
using tessera::Schedule;
using tessera::Segment;
using tessera::Target;
using tessera::Transfer;

enum class Order {
  load_first,     ///< heaviest remaining receiver load first
  longest_first,  ///< longest transfer first
  phase_order,    ///< lowest transfer index first
};

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

class DenseListScheduler {
public:
  DenseListScheduler(const ExchangePhase& phase, const Target& target, Order order)
      : phase_(phase), target_(target), order_(order), switch_cost_(target.switch_cost) {}

  Schedule run() {
    build_groups();
    generation_.assign(phase_.tiles, 0);
    sleep_.assign(phase_.tiles, SleepState{});
    std::uint32_t most_slots = 0;
    for (std::uint32_t count : slot_count_) most_slots = std::max(most_slots, count);
    earliest_.assign(most_slots, 0);
    sleepers_.assign(phase_.tiles, {});
    armed_.assign(phase_.tiles, kNever);
    Schedule schedule;
    schedule.segments.reserve(phase_.transfers.size());
    for (std::uint32_t sender = 0; sender < phase_.tiles; ++sender)
      if (slot_count_[sender] > 0) events_.push({0, kSenderEvent, remaining_send_[sender], sender, 0});
    while (!events_.empty()) {
      const Event event = events_.top();
      events_.pop();
      if (event.kind == kReceiverEvent) {
        if (armed_[event.tile] == event.cycle) wake_a_sleeper(event.tile, event.cycle, event.remaining_words);
      } else if (event.generation == generation_[event.tile]) {
        ++generation_[event.tile];  // any other wake-up it had pending is now stale
        serve(event.tile, event.cycle, event.woken, schedule);
      }
    }
    return schedule;
  }

private:
  static constexpr std::uint32_t kMulticast = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kNoChoice = std::numeric_limits<std::size_t>::max();
  // With at most this many groups a sleeping sender registers with every receiver it
  // waits for (cheap, and no timer firing in vain while a hot receiver serves others);
  // with more, with the receivers of its kSleepSlots earliest groups and a timer.
  static constexpr std::uint32_t kSleepOnEveryReceiverBelow = 64;
  static constexpr std::uint32_t kSleepSlots = 8;
  static constexpr std::uint32_t kNoSlot = std::numeric_limits<std::uint32_t>::max();

  // A group's destination set (multicast groups are scanned through it; a unicast group
  // keeps its one destination in its slot).
  struct Group {
    std::uint32_t destination_begin, destination_end;  ///< into destinations_/latencies_
  };

  // A transfer waiting in its group, with the one field the scheduler needs from it.
  struct Queued {
    std::uint32_t transfer;
    std::uint32_t words;
  };

  // An unfinished group (transfers with one source and one destination set) as its sender
  // scans it. The scan reads only these 20 bytes per group, in order; the rest is in a
  // parallel array touched once per booking.
  struct Slot {
    std::uint32_t destination;  ///< the receiver, or kMulticast (then see the group)
    std::uint32_t latency;      ///< unicast only
    std::uint32_t head_words;   ///< of the group's next transfer
    std::uint32_t head;         ///< the group's next transfer (its index in the phase)
    std::uint32_t next;         ///< the next transfer, into queued_
  };
  struct SlotQueue {
    std::uint32_t end;    ///< into queued_
    std::uint32_t group;  ///< multicast only
  };

  struct Receiver {
    ReceiverMux mux;
    std::uint64_t remaining = 0;  ///< words still to arrive
  };

  // A sender asleep on a receiver: woken when the receiver can take its words.
  struct Sleeper {
    std::uint32_t sender, generation, latency;
  };

  // How a sender went to sleep: the slots it waits for on receivers (slots do not move
  // while their sender sleeps; none listed: look at all) and its timer.
  struct SleepState {
    std::array<std::uint32_t, kSleepSlots> registered;
    std::uint32_t registered_count = 0;
    std::uint64_t timer = kNever;
  };

  // "Sender free (or due to look again) at cycle" or "receiver may have a sleeper to wake".
  // Within a cycle the heavier sender goes first, whether it is running or asleep: a
  // receiver's event carries the load of the sleeper it would wake (an upper bound until
  // the receiver has looked).
  static constexpr std::uint32_t kSenderEvent = 0, kReceiverEvent = 1;
  static constexpr std::uint64_t kAnyLoad = std::numeric_limits<std::uint64_t>::max();
  struct Event {
    std::uint64_t cycle;
    std::uint32_t kind;
    std::uint64_t remaining_words;  ///< of the sender (to wake)
    std::uint32_t tile;
    std::uint32_t generation;  ///< senders only: stale when the sender moved on
    bool woken = false;        ///< senders only: woken by the receiver it slept on
  };
  struct LaterEvent {
    bool operator()(const Event& a, const Event& b) const {
      if (a.cycle != b.cycle) return a.cycle > b.cycle;
      if (a.remaining_words != b.remaining_words) return a.remaining_words < b.remaining_words;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.tile > b.tile;
    }
  };

  void build_groups() {
    const std::uint32_t tiles = phase_.tiles;
    const auto& transfers = phase_.transfers;

    // One pass over the transfers (large, scattered objects) into compact arrays: each
    // transfer's destinations sorted, so equal sets compare equal, and a sort key.
    struct Pending {
      std::uint64_t set_key;  ///< destination count, then first destination
      std::uint32_t words, index;
    };
    std::vector<std::uint32_t> sorted_begin(transfers.size() + 1, 0);
    for (std::size_t i = 0; i < transfers.size(); ++i)
      sorted_begin[i + 1] = sorted_begin[i] + static_cast<std::uint32_t>(transfers[i].destinations.size());
    std::vector<std::uint32_t> sorted_destinations(sorted_begin.back());
    std::vector<std::uint32_t> source_begin(std::size_t{tiles} + 1, 0);
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      auto first = sorted_destinations.begin() + sorted_begin[i];
      std::copy(transfers[i].destinations.begin(), transfers[i].destinations.end(), first);
      std::sort(first, first + static_cast<std::ptrdiff_t>(transfers[i].destinations.size()));
      if (transfers[i].words > 0) ++source_begin[transfers[i].source + 1];
    }
    for (std::uint32_t tile = 0; tile < tiles; ++tile) source_begin[tile + 1] += source_begin[tile];
    // Bucketed by source; a counting sort keeps each bucket in phase order.
    std::vector<Pending> by_source(source_begin.back());
    {
      std::vector<std::uint32_t> next(source_begin.begin(), source_begin.end() - 1);
      for (std::uint32_t i = 0; i < transfers.size(); ++i) {
        const Transfer& transfer = transfers[i];
        if (transfer.words == 0) continue;
        const std::uint64_t first_destination =
            transfer.destinations.empty() ? 0 : sorted_destinations[sorted_begin[i]];
        by_source[next[transfer.source]++] = {(std::uint64_t{transfer.destinations.size()} << 32) | first_destination,
                                              transfer.words, i};
      }
    }
    auto destinations_of = [&](const Pending& p) {
      return std::pair{sorted_destinations.begin() + sorted_begin[p.index],
                       sorted_destinations.begin() + sorted_begin[p.index + 1]};
    };
    // Orders a sender's transfers by destination set, then as the group serves them.
    auto before = [&](const Pending& a, const Pending& b) {
      if (a.set_key != b.set_key) return a.set_key < b.set_key;
      if ((a.set_key >> 32) > 1) {
        const auto [a_first, a_last] = destinations_of(a);
        const auto [b_first, b_last] = destinations_of(b);
        if (auto order = std::lexicographical_compare_three_way(a_first, a_last, b_first, b_last); order != 0)
          return order < 0;
      }
      if (order_ != Order::phase_order && a.words != b.words) return a.words > b.words;
      return a.index < b.index;
    };
    auto same_set = [&](const Pending& a, const Pending& b) {
      if (a.set_key != b.set_key) return false;
      if ((a.set_key >> 32) <= 1) return true;
      const auto [a_first, a_last] = destinations_of(a);
      const auto [b_first, b_last] = destinations_of(b);
      return std::equal(a_first, a_last, b_first, b_last);
    };

    receivers_.assign(tiles, Receiver{});
    remaining_send_.assign(tiles, 0);
    slot_begin_.assign(tiles, 0);
    slot_count_.assign(tiles, 0);
    queued_.reserve(by_source.size());
    for (std::uint32_t source = 0; source < tiles; ++source) {
      auto first = by_source.begin() + source_begin[source];
      auto last = by_source.begin() + source_begin[source + 1];
      std::sort(first, last, before);
      slot_begin_[source] = static_cast<std::uint32_t>(slots_.size());
      for (auto group_first = first; group_first != last;) {
        auto group_last = std::find_if(group_first + 1, last,
                                       [&](const Pending& pending) { return !same_set(pending, *group_first); });
        const auto [destination_first, destination_last] = destinations_of(*group_first);
        Group group;
        group.destination_begin = static_cast<std::uint32_t>(destinations_.size());
        for (auto it = destination_first; it != destination_last; ++it) {
          destinations_.push_back(*it);
          latencies_.push_back(target_.latency(source, *it));
        }
        group.destination_end = static_cast<std::uint32_t>(destinations_.size());
        const auto first_queued = static_cast<std::uint32_t>(queued_.size());
        for (auto it = group_first; it != group_last; ++it) {
          queued_.push_back({it->index, it->words});
          remaining_send_[source] += it->words;
          for (auto d = destination_first; d != destination_last; ++d) receivers_[*d].remaining += it->words;
        }
        const bool unicast = destination_last - destination_first == 1;
        slots_.push_back(Slot{unicast ? *destination_first : kMulticast,
                              unicast ? latencies_[group.destination_begin] : 0, queued_[first_queued].words,
                              queued_[first_queued].transfer, first_queued});
        queues_.push_back(
            SlotQueue{static_cast<std::uint32_t>(queued_.size()), static_cast<std::uint32_t>(groups_.size())});
        groups_.push_back(group);
        group_first = group_last;
      }
      slot_count_[source] = static_cast<std::uint32_t>(slots_.size()) - slot_begin_[source];
    }
  }

  // The first cycle the group's next transfer could leave `sender`, ignoring the sender's
  // own port; also whether all its receivers already listen to the sender, and the
  // heaviest receiver's remaining words.
  struct Readiness {
    std::uint64_t earliest;
    std::uint64_t receiver_load;
    bool listening;
  };

  Readiness readiness(const SlotQueue& queue, std::uint32_t sender) const {
    Readiness all{0, 0, true};
    const Group& group = groups_[queue.group];
    for (std::uint32_t k = group.destination_begin; k < group.destination_end; ++k) {
      const Receiver& receiver = receivers_[destinations_[k]];
      all.listening = all.listening && receiver.mux.listening_to == sender;
      all.earliest = std::max(all.earliest, receiver.mux.earliest_send(sender, latencies_[k], switch_cost_));
      all.receiver_load = std::max(all.receiver_load, receiver.remaining);
    }
    return all;
  }

  // The group's rank among the sender's startable groups, packed so the scan compares
  // integers (larger is better, never 0). Ties fall to the earlier transfer in the phase:
  // lowering passes list transfers in a meaningful order (rounds of a permutation, a
  // reduction's slices), which an arbitrary tie-break would scramble. Fields saturate far
  // beyond any real phase: 2^39 words into one receiver, 2^23 words in one transfer.
  using Key = unsigned __int128;
  Key priority_key(const Slot& slot, std::uint64_t receiver_load, bool listening) const {
    const std::uint64_t load = std::min<std::uint64_t>(receiver_load, (std::uint64_t{1} << 39) - 1);
    const std::uint64_t words = std::min<std::uint64_t>(slot.head_words, (1u << 23) - 1);
    const std::uint64_t earlier = std::numeric_limits<std::uint32_t>::max() - slot.head;
    std::uint64_t rank = 1;
    switch (order_) {
      case Order::load_first:
        // The sender's own load is the same for all its groups, so the receiver decides;
        // then a receiver already listening (no switch), then the longer transfer.
        rank = (load << 24) | (std::uint64_t{listening} << 23) | words | 1;
        break;
      case Order::longest_first:
        rank = (words << 40) | (load << 1) | std::uint64_t{listening} | (std::uint64_t{1} << 63);
        break;
      case Order::phase_order:
        break;
    }
    return (Key{rank} << 64) | earlier;
  }

  // Sender `sender` is free at `cycle`: start its best startable transfer, or sleep until
  // one could start.
  void serve(std::uint32_t sender, std::uint64_t cycle, bool woken, Schedule& schedule) {
    const SleepState& slept = sleep_[sender];
    std::uint32_t best = kNoSlot;
    // Woken before its timer, only the slots it slept on can have become startable.
    if (woken && cycle < slept.timer && slept.registered_count > 0)
      best = choose(sender, cycle, slept.registered.data(), slept.registered_count);
    if (best == kNoSlot) best = choose(sender, cycle, nullptr, slot_count_[sender]);
    if (best == kNoSlot) {
      sleep(sender, cycle);
      return;
    }
    book(sender, cycle, best, schedule);
  }

  // The best startable slot among `positions` (all slots when null), or kNoSlot. A full
  // scan also leaves every slot's earliest start in earliest_ for sleep().
  std::uint32_t choose(std::uint32_t sender, std::uint64_t cycle, const std::uint32_t* positions, std::uint32_t count) {
    const Slot* const slots = slots_.data() + slot_begin_[sender];
    const SlotQueue* const queues = queues_.data() + slot_begin_[sender];
    std::uint64_t* const earliest_of = earliest_.data();
    std::uint32_t best = kNoSlot;
    Key best_key = 0;
    // The hot loop of the scheduler: written so the unicast path compiles to conditional
    // moves, since whether a receiver is ready is a coin flip the branch predictor loses.
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t position = positions ? positions[i] : i;
      const Slot& slot = slots[position];
      std::uint64_t earliest, load;
      bool listening;
      if (slot.destination != kMulticast) {
        const Receiver& receiver = receivers_[slot.destination];
        listening = receiver.mux.listening_to == sender;
        earliest = receiver.mux.earliest_send(sender, slot.latency, switch_cost_);
        load = receiver.remaining;
      } else {
        const Readiness all = readiness(queues[position], sender);
        earliest = all.earliest;
        load = all.receiver_load;
        listening = all.listening;
      }
      const bool startable = earliest <= cycle;
      earliest_of[position] = earliest;
      const Key key = startable ? priority_key(slot, load, listening) : 0;
      if (key > best_key) {
        best_key = key;
        best = position;
        // Booking the winner reads these; start fetching them now, off the critical path.
        __builtin_prefetch(&queued_[slot.next]);
        __builtin_prefetch(&queues[position]);
      }
    }
    return best;
  }

  void book(std::uint32_t sender, std::uint64_t cycle, std::uint32_t position, Schedule& schedule) {
    Slot* const slots = slots_.data() + slot_begin_[sender];
    SlotQueue* const queues = queues_.data() + slot_begin_[sender];
    const std::uint32_t count = slot_count_[sender];
    Slot& slot = slots[position];
    SlotQueue& queue = queues[position];
    const Queued head = queued_[slot.next++];
    schedule.segments.push_back(Segment{head.transfer, cycle, head.words});
    remaining_send_[sender] -= head.words;
    auto take = [&](std::uint32_t destination, std::uint32_t latency) {
      Receiver& receiver = receivers_[destination];
      receiver.mux.take(sender, cycle + latency, head.words);
      receiver.remaining -= head.words;
    };
    if (slot.destination != kMulticast) {
      take(slot.destination, slot.latency);
    } else {
      const Group& group = groups_[queue.group];
      for (std::uint32_t k = group.destination_begin; k < group.destination_end; ++k)
        take(destinations_[k], latencies_[k]);
    }
    if (slot.next < queue.end) {
      slot.head_words = queued_[slot.next].words;
      slot.head = queued_[slot.next].transfer;
    } else {
      // Order among slots only breaks exact ties, so the last one fills the hole.
      slot = slots[count - 1];
      queue = queues[count - 1];
      --slot_count_[sender];
    }
    if (slot_count_[sender] > 0)
      events_.push({cycle + head.words, kSenderEvent, remaining_send_[sender], sender, generation_[sender]});
  }

  // Nothing of `sender` can start now; earliest_ holds when each slot could. Rather than
  // every sender waiting for a busy receiver looking again when it frees (all but one in
  // vain, over and over on a hot receiver), the sender sleeps on receivers, and a receiver
  // wakes the heaviest of its sleepers that can use it. A sender with few groups left
  // sleeps on every receiver it waits for. One with many sleeps on the receivers of its
  // kSleepSlots earliest groups and sets a timer for the next earliest, before which no
  // other group of it can start, so the schedule stays dense. Multicast groups use timers.
  void sleep(std::uint32_t sender, std::uint64_t cycle) {
    const Slot* const slots = slots_.data() + slot_begin_[sender];
    const std::uint32_t count = slot_count_[sender];
    const std::uint32_t generation = generation_[sender];
    SleepState& state = sleep_[sender];
    state.registered_count = 0;
    state.timer = kNever;
    auto sleep_on = [&](std::uint32_t position) {
      const Slot& slot = slots[position];
      const std::uint64_t earliest = std::max(cycle, earliest_[position]);
      if (slot.destination == kMulticast) {
        state.timer = std::min(state.timer, earliest);
        return;
      }
      sleepers_[slot.destination].push_back({sender, generation, slot.latency});
      arm(slot.destination, earliest);
      if (state.registered_count < kSleepSlots) state.registered[state.registered_count++] = position;
    };
    if (count <= kSleepOnEveryReceiverBelow) {
      for (std::uint32_t position = 0; position < count; ++position) sleep_on(position);
      state.registered_count = 0;  // woken by one of many: look at every slot then
    } else {
      // The kSleepSlots + 1 earliest slots, by insertion into a short sorted list.
      std::array<std::pair<std::uint64_t, std::uint32_t>, kSleepSlots + 1> earliest_slots;
      std::uint32_t found = 0;
      for (std::uint32_t position = 0; position < count; ++position) {
        const std::pair<std::uint64_t, std::uint32_t> candidate{earliest_[position], position};
        if (found == earliest_slots.size() && !(candidate < earliest_slots.back())) continue;
        std::uint32_t at = found < earliest_slots.size() ? found++ : found - 1;
        while (at > 0 && candidate < earliest_slots[at - 1]) {
          earliest_slots[at] = earliest_slots[at - 1];
          --at;
        }
        earliest_slots[at] = candidate;
      }
      for (std::uint32_t i = 0; i < std::min<std::uint32_t>(found, kSleepSlots); ++i)
        sleep_on(earliest_slots[i].second);
      if (found > kSleepSlots) state.timer = std::min(state.timer, earliest_slots[kSleepSlots].first);
    }
    if (state.timer != kNever) events_.push({state.timer, kSenderEvent, remaining_send_[sender], sender, generation});
  }

  std::uint64_t unicast_earliest(const Slot& slot, std::uint32_t sender) const {
    return receivers_[slot.destination].mux.earliest_send(sender, slot.latency, switch_cost_);
  }

  void arm(std::uint32_t receiver, std::uint64_t cycle, std::uint64_t load = kAnyLoad) {
    if (cycle >= armed_[receiver]) return;
    armed_[receiver] = cycle;
    events_.push({cycle, kReceiverEvent, load, receiver, 0});
  }

  // Wakes the heaviest sleeper that can send to `receiver_tile` at `cycle`, unless a
  // heavier running sender still has to choose in this cycle (then it waits its turn).
  // After a wake-up it looks again in the same cycle, as the woken sender may prefer
  // another receiver; with nobody to wake it re-arms for when a sleeper could send.
  void wake_a_sleeper(std::uint32_t receiver_tile, std::uint64_t cycle, std::uint64_t turn) {
    armed_[receiver_tile] = kNever;
    const Receiver& receiver = receivers_[receiver_tile];
    std::vector<Sleeper>& sleepers = sleepers_[receiver_tile];
    std::size_t kept = 0, chosen = kNoChoice;
    std::uint64_t chosen_load = 0, runner_up_load = 0, next = kNever;
    for (const Sleeper& sleeper : sleepers) {
      if (sleeper.generation != generation_[sleeper.sender]) continue;  // woke up elsewhere
      const std::uint64_t earliest = receiver.mux.earliest_send(sleeper.sender, sleeper.latency, switch_cost_);
      if (earliest <= cycle) {
        const std::uint64_t load = remaining_send_[sleeper.sender];
        if (chosen == kNoChoice || load > chosen_load ||
            (load == chosen_load && sleeper.sender < sleepers[chosen].sender)) {
          runner_up_load = chosen == kNoChoice ? 0 : chosen_load;
          chosen = kept;
          chosen_load = load;
        } else {
          runner_up_load = std::max(runner_up_load, load);
        }
      } else {
        next = std::min(next, earliest);
      }
      sleepers[kept++] = sleeper;
    }
    sleepers.resize(kept);
    if (chosen == kNoChoice) {
      if (next != kNever) arm(receiver_tile, next);
      return;
    }
    if (chosen_load < turn) {
      arm(receiver_tile, cycle, chosen_load);
      return;
    }
    const std::uint32_t sender = sleepers[chosen].sender;
    sleepers[chosen] = sleepers.back();
    sleepers.pop_back();
    events_.push({cycle, kSenderEvent, chosen_load, sender, ++generation_[sender], true});
    arm(receiver_tile, cycle, runner_up_load);
  }

  const ExchangePhase& phase_;
  const Target& target_;
  Order order_;
  std::uint64_t switch_cost_;

  std::vector<Group> groups_;
  std::vector<std::uint32_t> destinations_, latencies_;  ///< per group destination
  std::vector<Queued> queued_;                           ///< each group's transfers, in order
  std::vector<Slot> slots_;                              ///< each sender's unfinished groups
  std::vector<SlotQueue> queues_;                        ///< parallel to slots_
  std::vector<std::uint32_t> slot_begin_, slot_count_;   ///< per sender, into slots_

  std::vector<Receiver> receivers_;
  std::vector<std::uint64_t> remaining_send_;
  std::vector<SleepState> sleep_;               ///< per sender
  std::vector<std::uint64_t> earliest_;         ///< per slot of the sender being served
  std::vector<std::uint32_t> generation_;       ///< per sender: bumps on every wake-up
  std::vector<std::vector<Sleeper>> sleepers_;  ///< per receiver
  std::vector<std::uint64_t> armed_;            ///< per receiver: its pending event's cycle
  std::priority_queue<Event, std::vector<Event>, LaterEvent> events_;
};

class GreedyScheduler final : public tessera::ExchangeScheduler {
public:
  static const tessera::OptionTable<GreedyScheduler>& option_table() {
    static const tessera::OptionTable<GreedyScheduler> table{
        tessera::option("order", &GreedyScheduler::order_, Order::load_first,
                        {{"load-first", Order::load_first},
                         {"longest-first", Order::longest_first},
                         {"phase-order", Order::phase_order}},
                        "which startable transfer a free sender takes: load-first (heaviest remaining receiver), "
                        "longest-first, or phase-order"),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) override {
    const auto started = std::chrono::steady_clock::now();
    Schedule schedule = DenseListScheduler(phase, target, order_).run();
    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    tessera::logger("tessera.scheduler")
        ->debug(
            "greedy scheduled exchange phase transfers={} segments={} elapsed_ms={} "
            "budget_ms={}",
            phase.transfers.size(), schedule.segments.size(), elapsed_ms, budget_ms);
    return schedule;
  }

private:
  Order order_{};  // set by configure from option_table()
};

}  // namespace

extern "C" const TesseraPluginManifest* greedy_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "greedy", "0.1.0",
                             "dense non-preemptive list scheduling, heaviest ports first",
                             GreedyScheduler::option_table(), "", "", &tessera::create_plugin_object<GreedyScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(greedy_manifest)
