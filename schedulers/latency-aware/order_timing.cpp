// The semi-active re-timing of a job order (see order_timing.hpp).
#include "order_timing.hpp"

#include <algorithm>
#include <cassert>

namespace tessera::latency_aware {

OrderTimer::OrderTimer(const PhaseModel& model)
    : model_(model), send_free_(model.tiles), receive_free_(model.tiles), receive_source_(model.tiles) {}

Score OrderTimer::run(const std::vector<std::uint32_t>& order, std::uint64_t* start_of) {
  assert(order.size() == model_.jobs());
  std::fill(send_free_.begin(), send_free_.end(), 0);
  std::fill(receive_free_.begin(), receive_free_.end(), 0);
  std::fill(receive_source_.begin(), receive_source_.end(), kNone);
  const std::uint64_t switch_cost = model_.switch_cost;
  const std::uint32_t* destinations = model_.destination.data();
  const std::uint32_t* latencies = model_.latency.data();
  Score score;

  for (const std::uint32_t job : order) {
    const std::uint32_t sender = model_.source[job];
    const std::uint32_t first = model_.endpoint_begin[job], last = model_.endpoint_begin[job + 1];
    std::uint64_t start = send_free_[sender];
    for (std::uint32_t k = first; k < last; ++k) {
      const std::uint32_t receiver = destinations[k];
      // A receiver that last listened to another sender needs the switch cost first.
      const bool switching = receive_source_[receiver] != sender && receive_source_[receiver] != kNone;
      const std::uint64_t ready = receive_free_[receiver] + (switching ? switch_cost : 0);
      if (ready > latencies[k]) start = std::max(start, ready - latencies[k]);
    }
    const std::uint64_t words = model_.words[job];
    send_free_[sender] = start + words;
    for (std::uint32_t k = first; k < last; ++k) {
      const std::uint32_t receiver = destinations[k];
      receive_free_[receiver] = start + latencies[k] + words;
      receive_source_[receiver] = sender;
      score.horizon = std::max(score.horizon, receive_free_[receiver]);
    }
    if (start_of) start_of[job] = start;
  }
  for (std::uint32_t tile = 0; tile < model_.tiles; ++tile) {
    score.completion_sum += receive_free_[tile];
    score.ports_at_horizon += receive_free_[tile] == score.horizon && score.horizon > 0;
  }
  return score;
}

void OrderTimer::time(const std::vector<std::uint32_t>& order, Timing& timing) {
  timing.start.resize(model_.jobs());
  timing.score = run(order, timing.start.data());
}

Score OrderTimer::score(const std::vector<std::uint32_t>& order) { return run(order, nullptr); }

}  // namespace tessera::latency_aware
