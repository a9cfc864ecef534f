// The semi-active re-timing of a job order (see order_timing.hpp).
#include "order_timing.hpp"

#include <algorithm>
#include <cassert>

namespace latency_aware {

OrderTimer::OrderTimer(const PhaseModel& model)
    : model_(model),
      send_free_(model.tiles),
      receive_free_(model.tiles),
      send_last_(model.tiles),
      receive_last_(model.tiles),
      receive_source_(model.tiles) {}

template <bool kRecord>
Score OrderTimer::run(const std::vector<std::uint32_t>& order, Timing* timing) {
  assert(order.size() == model_.jobs());
  std::fill(send_free_.begin(), send_free_.end(), 0);
  std::fill(receive_free_.begin(), receive_free_.end(), 0);
  std::fill(send_last_.begin(), send_last_.end(), kNone);
  std::fill(receive_last_.begin(), receive_last_.end(), kNone);
  std::fill(receive_source_.begin(), receive_source_.end(), kNone);
  const std::uint64_t switch_cost = model_.switch_cost;
  const std::uint32_t* destinations = model_.destination.data();
  const std::uint32_t* latencies = model_.latency.data();
  std::uint64_t horizon = 0;
  std::uint32_t last_job = kNone;

  for (const std::uint32_t job : order) {
    const std::uint32_t sender = model_.source[job];
    const std::uint32_t first = model_.endpoint_begin[job], last = model_.endpoint_begin[job + 1];
    std::uint64_t start = send_free_[sender];
    std::uint32_t binding = send_last_[sender];
    for (std::uint32_t k = first; k < last; ++k) {
      const std::uint32_t receiver = destinations[k];
      // A receiver that last listened to another sender needs the switch cost first.
      const bool switching =
          receive_source_[receiver] != sender && receive_source_[receiver] != kNone;
      const std::uint64_t ready = receive_free_[receiver] + (switching ? switch_cost : 0);
      if (ready > latencies[k] && ready - latencies[k] > start) {
        start = ready - latencies[k];
        binding = receive_last_[receiver];
      }
    }
    const std::uint64_t words = model_.words[job];
    send_free_[sender] = start + words;
    send_last_[sender] = job;
    for (std::uint32_t k = first; k < last; ++k) {
      const std::uint32_t receiver = destinations[k];
      const std::uint64_t end = start + latencies[k] + words;
      receive_free_[receiver] = end;
      receive_last_[receiver] = job;
      receive_source_[receiver] = sender;
      if (end > horizon) {
        horizon = end;
        last_job = job;
      }
    }
    if constexpr (kRecord) {
      timing->start[job] = start;
      // A start at the sender's free cycle with nothing earlier on it binds to nobody.
      timing->binding[job] = start == 0 ? kNone : binding;
    }
  }
  Score score;
  score.horizon = horizon;
  for (std::uint32_t tile = 0; tile < model_.tiles; ++tile) {
    score.completion_sum += receive_free_[tile];
    score.ports_at_horizon += receive_free_[tile] == horizon && horizon > 0;
  }
  if constexpr (kRecord) {
    timing->score = score;
    timing->last_job = last_job;
  }
  return score;
}

void OrderTimer::time(const std::vector<std::uint32_t>& order, Timing& timing) {
  timing.start.resize(model_.jobs());
  timing.binding.resize(model_.jobs());
  run<true>(order, &timing);
}

Score OrderTimer::score(const std::vector<std::uint32_t>& order) {
  return run<false>(order, nullptr);
}

}  // namespace latency_aware
