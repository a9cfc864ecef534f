// The MILP plugin's dense list schedule (see list_schedule.hpp).
#include "list_schedule.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <queue>
#include <vector>

#include "tessera/receiver_mux.hpp"
#include "tessera/target.hpp"

namespace tessera::milp {
namespace {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

struct Receiver {
  ReceiverMux mux;
  std::uint64_t remaining = 0;  ///< words still to arrive
};

}  // namespace

tessera::Schedule list_schedule(const tessera::ExchangePhase& phase, const tessera::Target& target) {
  const auto& transfers = phase.transfers;
  std::vector<std::vector<std::uint32_t>> pending(phase.tiles);
  std::vector<std::uint64_t> sender_remaining(phase.tiles, 0);
  std::vector<Receiver> receivers(phase.tiles);
  for (std::uint32_t index = 0; index < transfers.size(); ++index) {
    const tessera::Transfer& transfer = transfers[index];
    if (transfer.words == 0 || transfer.destinations.empty()) continue;
    pending[transfer.source].push_back(index);
    sender_remaining[transfer.source] += transfer.words;
    for (std::uint32_t destination : transfer.destinations) receivers[destination].remaining += transfer.words;
  }

  // Senders by the cycle they are free; heavier senders choose first within a cycle.
  struct Event {
    std::uint64_t cycle, remaining;
    std::uint32_t sender;
    bool operator<(const Event& other) const {
      if (cycle != other.cycle) return cycle > other.cycle;
      if (remaining != other.remaining) return remaining < other.remaining;
      return sender > other.sender;
    }
  };
  std::priority_queue<Event> events;
  for (std::uint32_t sender = 0; sender < phase.tiles; ++sender)
    if (!pending[sender].empty()) events.push({0, sender_remaining[sender], sender});

  tessera::Schedule schedule;
  while (!events.empty()) {
    const auto [cycle, remaining, sender] = events.top();
    events.pop();
    std::vector<std::uint32_t>& mine = pending[sender];
    std::size_t best = mine.size();
    std::uint64_t best_load = 0, wake = kNever;
    bool best_listening = false;
    for (std::size_t k = 0; k < mine.size(); ++k) {
      const tessera::Transfer& transfer = transfers[mine[k]];
      std::uint64_t earliest = 0, load = 0;
      bool listening = true;
      for (std::uint32_t destination : transfer.destinations) {
        const Receiver& receiver = receivers[destination];
        listening = listening && receiver.mux.listening_to == sender;
        earliest = std::max(
            earliest, receiver.mux.earliest_send(sender, target.latency(sender, destination), target.switch_cost));
        load = std::max(load, receiver.remaining);
      }
      if (earliest > cycle) {
        wake = std::min(wake, earliest);
        continue;
      }
      const bool better =
          best == mine.size() || load > best_load || (load == best_load && listening && !best_listening);
      if (better) {
        best = k;
        best_load = load;
        best_listening = listening;
      }
    }
    if (best == mine.size()) {
      events.push({wake, remaining, sender});
      continue;
    }
    const std::uint32_t index = mine[best];
    mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(best));
    const tessera::Transfer& transfer = transfers[index];
    schedule.segments.push_back({index, cycle, transfer.words});
    sender_remaining[sender] -= transfer.words;
    for (std::uint32_t destination : transfer.destinations) {
      Receiver& receiver = receivers[destination];
      receiver.mux.take(sender, cycle + target.latency(sender, destination), transfer.words);
      receiver.remaining -= transfer.words;
    }
    if (!mine.empty()) events.push({cycle + transfer.words, sender_remaining[sender], sender});
  }
  return schedule;
}

}  // namespace tessera::milp
