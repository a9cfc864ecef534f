// Bipartite edge colouring of the jobs and the round-by-round order (see colour_order.hpp).
#include "colour_order.hpp"

#include <algorithm>
#include <numeric>

namespace tessera::latency_aware {
namespace {

class EdgeColouring {
public:
  explicit EdgeColouring(const PhaseModel& model)
      : model_(model), colour_(model.jobs(), kNone), at_sender_(model.tiles), at_receiver_(model.tiles) {}

  bool run(WorkBudget& budget) {
    std::vector<std::uint32_t> jobs(model_.jobs());
    std::iota(jobs.begin(), jobs.end(), 0u);
    std::stable_sort(jobs.begin(), jobs.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return model_.words[a] > model_.words[b]; });
    if (!budget.charge(kUnitsPerJob * model_.jobs())) return false;
    for (std::uint32_t job : jobs) {
      if (!budget.charge(kUnitsPerJob + kUnitsPerStep * work_)) return false;
      work_ = 0;
      if (model_.endpoint_begin[job + 1] - model_.endpoint_begin[job] == 1) colour_unicast(job);
      else assign(job, first_common_free(job));
    }
    return true;
  }

  std::vector<std::uint32_t> rounds() const {
    std::vector<std::uint32_t> order(model_.jobs());
    std::iota(order.begin(), order.end(), 0u);
    std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (colour_[a] != colour_[b]) return colour_[a] < colour_[b];
      return a < b;
    });
    return order;
  }

private:
  // Work units (about nanoseconds, see WorkBudget): per job, per colour or path step.
  static constexpr std::uint64_t kUnitsPerJob = 80;
  static constexpr std::uint64_t kUnitsPerStep = 3;

  static std::uint32_t held(const std::vector<std::uint32_t>& slots, std::uint32_t colour) {
    return colour < slots.size() ? slots[colour] : kNone;
  }
  std::uint32_t first_free(const std::vector<std::uint32_t>& slots) {
    const auto it = std::find(slots.begin(), slots.end(), kNone);
    work_ += static_cast<std::uint64_t>(it - slots.begin());
    return static_cast<std::uint32_t>(it - slots.begin());
  }
  static void hold(std::vector<std::uint32_t>& slots, std::uint32_t colour, std::uint32_t job) {
    if (colour >= slots.size()) slots.resize(colour + 1, kNone);
    slots[colour] = job;
  }

  void assign(std::uint32_t job, std::uint32_t colour) {
    colour_[job] = colour;
    hold(at_sender_[model_.source[job]], colour, job);
    for (std::uint32_t receiver : model_.destinations_of(job)) hold(at_receiver_[receiver], colour, job);
  }
  void release(std::uint32_t job) {
    at_sender_[model_.source[job]][colour_[job]] = kNone;
    for (std::uint32_t receiver : model_.destinations_of(job)) at_receiver_[receiver][colour_[job]] = kNone;
  }

  std::uint32_t first_common_free(std::uint32_t job) {
    for (std::uint32_t colour = 0;; ++colour, ++work_) {
      bool free = held(at_sender_[model_.source[job]], colour) == kNone;
      for (std::uint32_t receiver : model_.destinations_of(job))
        free = free && held(at_receiver_[receiver], colour) == kNone;
      if (free) return colour;
    }
  }

  // König's step: colour a is free at the sender, b at the receiver. If a is taken at the
  // receiver, swap a and b along the alternating path that starts there; in a bipartite
  // graph it never reaches the sender, so a becomes free at both ends.
  void colour_unicast(std::uint32_t job) {
    const std::uint32_t sender = model_.source[job];
    const std::uint32_t receiver = model_.destination[model_.endpoint_begin[job]];
    const std::uint32_t a = first_free(at_sender_[sender]);
    if (held(at_receiver_[receiver], a) == kNone) return assign(job, a);
    const std::uint32_t b = first_free(at_receiver_[receiver]);
    path_.clear();
    std::uint32_t tile = receiver, colour = a;
    bool at_receiving_end = true;
    while (true) {
      const std::uint32_t next = held(at_receiving_end ? at_receiver_[tile] : at_sender_[tile], colour);
      if (next == kNone) break;
      // A multicast job on the path would need every one of its ports swapped too.
      if (model_.endpoint_begin[next + 1] - model_.endpoint_begin[next] != 1)
        return assign(job, first_common_free(job));
      path_.push_back(next);
      work_ += 8;
      tile = at_receiving_end ? model_.source[next] : model_.destination[model_.endpoint_begin[next]];
      at_receiving_end = !at_receiving_end;
      colour = colour == a ? b : a;
    }
    for (std::uint32_t on_path : path_) release(on_path);
    for (std::uint32_t on_path : path_) assign(on_path, colour_[on_path] == a ? b : a);
    assign(job, a);
  }

  const PhaseModel& model_;
  std::vector<std::uint32_t> colour_;
  std::vector<std::vector<std::uint32_t>> at_sender_, at_receiver_;  ///< colour -> job
  std::vector<std::uint32_t> path_;
  std::uint64_t work_ = 0;  ///< colours scanned and path steps since the last charge
};

}  // namespace

std::optional<std::vector<std::uint32_t>> colour_order(const PhaseModel& model, WorkBudget& budget) {
  EdgeColouring colouring(model);
  if (!colouring.run(budget)) return std::nullopt;
  return colouring.rounds();
}

}  // namespace tessera::latency_aware
