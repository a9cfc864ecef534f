#pragma once
// A receiving tile as a scheduler sees it during list scheduling: its mux listens to one
// sender at a time, and changing sender costs the target's switch_cost idle cycles
// (docs/architecture.md, the exchange rules). Header-only: schedulers call it in their hot loops.
#include <cstdint>
#include <limits>

namespace tessera {

struct ReceiverMux {
  static constexpr std::uint32_t kNoSender = std::numeric_limits<std::uint32_t>::max();

  std::uint64_t free = 0;                  ///< first cycle a word may arrive again
  std::uint32_t listening_to = kNoSender;  ///< the sender the mux is set to

  /// The first cycle a word from `sender` may arrive: after a switch if the mux is set to another.
  std::uint64_t ready_for(std::uint32_t sender, std::uint64_t switch_cost) const {
    const bool switching = listening_to != sender && listening_to != kNoSender;
    return free + (switching ? switch_cost : 0);  // branch-free: a coin flip the predictor loses
  }

  /// The first cycle `sender` may start a word that takes `latency` cycles to get here.
  std::uint64_t earliest_send(std::uint32_t sender, std::uint64_t latency, std::uint64_t switch_cost) const {
    const std::uint64_t ready = ready_for(sender, switch_cost);
    return ready > latency ? ready - latency : 0;
  }

  /// Books words from `sender` arriving from `first_arrival` on, one a cycle.
  void take(std::uint32_t sender, std::uint64_t first_arrival, std::uint64_t words) {
    free = first_arrival + words;
    listening_to = sender;
  }
};

}  // namespace tessera
