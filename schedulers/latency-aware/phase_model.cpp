// Builds the latency-aware scheduler's compact phase model and turns start cycles into segments.
#include "phase_model.hpp"

#include <algorithm>

#include "tessera/target.hpp"

namespace tessera::latency_aware {

std::uint64_t PhaseModel::span_of(std::uint32_t job) const {
  std::uint32_t farthest = 0;
  for (std::uint32_t l : latencies_of(job)) farthest = std::max(farthest, l);
  return std::uint64_t{farthest} + words[job];
}

PhaseModel build_phase_model(const tessera::ExchangePhase& phase, const tessera::Target& target) {
  PhaseModel model;
  model.tiles = phase.tiles;
  model.switch_cost = target.switch_cost;
  model.endpoint_begin.push_back(0);
  for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
    const tessera::Transfer& transfer = phase.transfers[index];
    if (transfer.words == 0 || transfer.destinations.empty()) continue;
    model.transfer.push_back(index);
    model.source.push_back(transfer.source);
    model.words.push_back(transfer.words);
    for (std::uint32_t destination : transfer.destinations) {
      const std::uint32_t latency = target.latency(transfer.source, destination);
      model.destination.push_back(destination);
      model.latency.push_back(latency);
      model.max_latency = std::max(model.max_latency, latency);
    }
    model.endpoint_begin.push_back(static_cast<std::uint32_t>(model.destination.size()));
    if (transfer.destinations.size() > 1) ++model.multicast_jobs;
  }
  return model;
}

tessera::Schedule to_schedule(const PhaseModel& model, const std::vector<std::uint64_t>& start) {
  tessera::Schedule schedule;
  schedule.segments.reserve(model.jobs());
  for (std::uint32_t job = 0; job < model.jobs(); ++job)
    schedule.segments.push_back({model.transfer[job], start[job], model.words[job]});
  return schedule;
}

}  // namespace tessera::latency_aware
