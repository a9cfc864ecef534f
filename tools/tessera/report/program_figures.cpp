// Computes what `tessera report` draws: memory by region, cycles per tile, exchange phases.
#include "program_figures.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"

namespace tessera::report {

namespace {

/// Receive-side evidence of which cycles of a source's sends reach `destination`.
struct ReceivedRun {
  std::uint64_t sent_begin = 0, sent_end = 0;
  std::uint32_t destination = 0;
};

std::string superstep_place(const Package& package, std::uint32_t superstep) {
  const std::string label = superstep < package.superstep_labels.size() ? package.superstep_labels[superstep] : "";
  return label.empty() ? fmt::format("superstep {}", superstep) : fmt::format("superstep {} ('{}')", superstep, label);
}

TileMemory tile_memory(const TileImage& tile, const Target& target) {
  TileMemory memory;
  for (const TileBufferEntry& buffer : tile.buffers) {
    const std::uint64_t end = std::uint64_t{buffer.offset} + buffer.bytes;
    ++memory.buffers;
    if (buffer.region == Region::interleaved) {
      memory.interleaved_buffer_bytes += buffer.bytes;
      if (end > target.interleaved_start)
        memory.interleaved_extent = std::max(memory.interleaved_extent, end - target.interleaved_start);
    } else {
      memory.standard_buffer_bytes += buffer.bytes;
      memory.standard_extent = std::max(memory.standard_extent, end);
    }
  }
  return memory;
}

TileTraffic tile_traffic(const TileImage& tile, std::uint32_t superstep) {
  const TileSuperstep& step = tile.supersteps[superstep];
  TileTraffic traffic;
  std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
  std::set<std::uint32_t> senders;
  for (const TileSend& send : step.sends) {
    if (send.words == 0) continue;
    traffic.words_sent += send.words;
    first = std::min(first, send.cycle);
    traffic.end_cycle = std::max(traffic.end_cycle, send.cycle + send.words);
  }
  for (const TileReceive& receive : step.receives) {
    if (receive.words == 0) continue;
    traffic.words_received += receive.words;
    senders.insert(receive.sender);
    first = std::min(first, receive.arrival);
    traffic.end_cycle = std::max(traffic.end_cycle, receive.arrival + receive.words);
  }
  traffic.first_cycle = traffic.end_cycle == 0 ? 0 : first;
  traffic.senders = static_cast<std::uint32_t>(senders.size());
  return traffic;
}

std::uint64_t json_uint(const nlohmann::json& value, const std::string& path, const std::string& what) {
  if (!value.is_number_unsigned())
    throw Error(path, 0, 0,
                fmt::format("{} is not a non-negative integer; is this a profile written by "
                            "`tessera run --profile`?",
                            what));
  return value.get<std::uint64_t>();
}

}  // namespace

ExchangePhase rebuild_phase(const Package& package, std::uint32_t superstep, std::uint64_t* unreceived_words) {
  const auto tiles = static_cast<std::uint32_t>(package.tiles.size());
  const Target& target = package.target;
  std::vector<std::vector<ReceivedRun>> runs(tiles);  // by source
  for (std::uint32_t destination = 0; destination < tiles; ++destination)
    for (const TileReceive& receive : package.tiles[destination].supersteps[superstep].receives) {
      if (receive.words == 0) continue;
      if (receive.sender >= tiles)
        throw Error(fmt::format("{}, tile {}: receive from tile {}, but the package has {} tiles",
                                superstep_place(package, superstep), destination, receive.sender, tiles));
      const std::uint32_t latency = target.latency(receive.sender, destination);
      if (receive.arrival < latency)
        throw Error(
            fmt::format("{}, tile {}: a word from tile {} arrives at cycle {}, before the {}-cycle "
                        "latency allows",
                        superstep_place(package, superstep), destination, receive.sender, receive.arrival, latency));
      const std::uint64_t sent = receive.arrival - latency;
      runs[receive.sender].push_back({sent, sent + receive.words, destination});
    }

  // Sweep each source's cycles: between two consecutive boundaries the set of sends and of
  // listening destinations is constant, so those words form (part of) one transfer.
  std::map<std::pair<std::uint32_t, std::vector<std::uint32_t>>, std::uint64_t> words_by_transfer;
  std::uint64_t unreceived = 0;
  for (std::uint32_t source = 0; source < tiles; ++source) {
    std::map<std::uint64_t, std::vector<std::pair<int, std::int64_t>>> changes;  // cycle -> (+/-1, who)
    constexpr std::int64_t kSend = -1;
    for (const TileSend& send : package.tiles[source].supersteps[superstep].sends) {
      if (send.words == 0) continue;
      changes[send.cycle].push_back({+1, kSend});
      changes[send.cycle + send.words].push_back({-1, kSend});
    }
    for (const ReceivedRun& run : runs[source]) {
      changes[run.sent_begin].push_back({+1, run.destination});
      changes[run.sent_end].push_back({-1, run.destination});
    }
    int sending = 0;
    std::map<std::uint32_t, int> listening;
    for (auto it = changes.begin(); it != changes.end(); ++it) {
      for (const auto& [delta, who] : it->second) {
        if (who == kSend) {
          sending += delta;
        } else if ((listening[static_cast<std::uint32_t>(who)] += delta) == 0) {
          listening.erase(static_cast<std::uint32_t>(who));
        }
      }
      const auto next = std::next(it);
      if (next == changes.end()) break;
      const std::uint64_t words = next->first - it->first;
      if (sending == 0) {
        if (!listening.empty())
          throw Error(
              fmt::format("{}: tile {} receives a word from tile {} sent at cycle {}, but tile {} "
                          "sends nothing then",
                          superstep_place(package, superstep), listening.begin()->first, source, it->first, source));
        continue;
      }
      if (listening.empty()) {
        unreceived += words;
        continue;
      }
      std::vector<std::uint32_t> destinations;
      for (const auto& entry : listening) destinations.push_back(entry.first);
      words_by_transfer[{source, std::move(destinations)}] += words;
    }
  }

  ExchangePhase phase;
  phase.tiles = tiles;
  for (const auto& [key, total] : words_by_transfer) {
    // A transfer holds at most 2^32-1 words; more (never seen in practice) are split.
    for (std::uint64_t left = total; left > 0;) {
      const auto words =
          static_cast<std::uint32_t>(std::min<std::uint64_t>(left, std::numeric_limits<std::uint32_t>::max()));
      Transfer transfer;
      transfer.source = key.first;
      transfer.destinations = key.second;
      transfer.words = words;
      phase.transfers.push_back(std::move(transfer));
      left -= words;
    }
  }
  if (unreceived_words != nullptr) *unreceived_words = unreceived;
  return phase;
}

ComputeCycles cycles_from_package(const Package& package) {
  ComputeCycles cycles;
  cycles.source = "codelet cycle formulas";
  const std::size_t supersteps = package.tiles.empty() ? 0 : package.tiles.front().supersteps.size();
  cycles.per_superstep.assign(supersteps, std::vector<std::uint64_t>(package.tiles.size(), 0));
  for (std::size_t tile = 0; tile < package.tiles.size(); ++tile)
    for (std::size_t step = 0; step < supersteps; ++step)
      for (const TileCodeletCall& call : package.tiles[tile].supersteps[step].compute)
        cycles.per_superstep[step][tile] += codelet_cycles(call.codelet, call.params, package.target);
  return cycles;
}

// A profile has a few numbers per tile and superstep.
constexpr std::uint64_t kMaxProfileBytes = std::uint64_t{1} << 30;

ComputeCycles cycles_from_profile(const Package& package, const std::string& profile_path) {
  const std::string text =
      read_bounded_file(profile_path, "the profile (written by `tessera run --profile`)", kMaxProfileBytes);
  nlohmann::json profile;
  try {
    profile = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {  // out_of_range too, for a number like 1e16384
    throw Error(profile_path, 0, 0,
                fmt::format("not valid JSON ({}); give the profile written by "
                            "`tessera run --profile`",
                            error.what()));
  }
  if (!profile.is_object() || profile.value("format", "") != "tessera-profile")
    throw Error(profile_path, 0, 0,
                "not a Tessera profile (no \"format\": \"tessera-profile\"); give the file "
                "written by `tessera run --profile`");
  const std::size_t tiles = package.tiles.size();
  const std::size_t supersteps = package.tiles.empty() ? 0 : package.tiles.front().supersteps.size();
  const std::uint64_t profile_tiles = json_uint(profile.value("tiles", nlohmann::json()), profile_path, "\"tiles\"");
  const nlohmann::json& steps = profile["supersteps"];
  if (profile_tiles != tiles || !steps.is_array() || steps.size() != supersteps ||
      profile.value("target", "") != package.target.name)
    throw Error(profile_path, 0, 0,
                fmt::format("this profile is of another package: it has {} tiles, {} supersteps, target '{}'; "
                            "the package has {}, {}, '{}'. Run this package with `tessera run PACKAGE --profile "
                            "FILE` and pass that file",
                            profile_tiles, steps.is_array() ? steps.size() : 0, profile.value("target", ""), tiles,
                            supersteps, package.target.name));

  ComputeCycles cycles;
  cycles.from_profile = true;
  cycles.source = "profile " + profile_path;
  for (std::size_t step = 0; step < supersteps; ++step) {
    const nlohmann::json& per_tile = steps[step]["tile_compute_cycles"];
    const std::string label = steps[step].value("label", "");
    if (step < package.superstep_labels.size() && label != package.superstep_labels[step])
      throw Error(profile_path, 0, 0,
                  fmt::format("superstep {} is '{}' in the profile but '{}' in the package: the profile is "
                              "of another compile; run this package again with --profile",
                              step, label, package.superstep_labels[step]));
    if (!per_tile.is_array() || per_tile.size() != tiles)
      throw Error(profile_path, 0, 0,
                  fmt::format("superstep {}: \"tile_compute_cycles\" must list {} tiles", step, tiles));
    std::vector<std::uint64_t> values;
    values.reserve(tiles);
    for (std::size_t tile = 0; tile < tiles; ++tile)
      values.push_back(
          json_uint(per_tile[tile], profile_path, fmt::format("superstep {} tile {} compute cycles", step, tile)));
    cycles.per_superstep.push_back(std::move(values));
  }
  if (profile.contains("totals") && profile["totals"].contains("cycles"))
    cycles.simulated_total_cycles = json_uint(profile["totals"]["cycles"], profile_path, "\"totals.cycles\"");
  return cycles;
}

ProgramFigures compute_figures(const Package& package, const std::string& package_path, ComputeCycles cycles,
                               const ReportOptions& options) {
  ProgramFigures figures;
  figures.package_path = package_path;
  figures.package = &package;
  figures.cycles = std::move(cycles);
  const auto tiles = static_cast<std::uint32_t>(package.tiles.size());
  const auto supersteps =
      static_cast<std::uint32_t>(package.tiles.empty() ? 0 : package.tiles.front().supersteps.size());

  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    figures.memory.push_back(tile_memory(package.tiles[tile], package.target));
    if (figures.memory.back().total_extent() > figures.peak_tile_bytes) {
      figures.peak_tile_bytes = figures.memory.back().total_extent();
      figures.peak_tile = tile;
    }
  }

  figures.tile_words_sent.assign(tiles, 0);
  figures.tile_words_received.assign(tiles, 0);
  std::vector<std::vector<TileTraffic>> traffic(supersteps);
  for (std::uint32_t step = 0; step < supersteps; ++step) {
    PhaseFigures phase;
    phase.index = step;
    phase.label = step < package.superstep_labels.size() ? package.superstep_labels[step] : "";
    for (std::uint32_t tile = 0; tile < tiles; ++tile) {
      TileTraffic t = tile_traffic(package.tiles[tile], step);
      t.tile = tile;
      phase.words_sent += t.words_sent;
      phase.words_received += t.words_received;
      phase.horizon = std::max(phase.horizon, t.end_cycle);
      phase.active_tiles += t.end_cycle > 0;
      figures.tile_words_sent[tile] += t.words_sent;
      figures.tile_words_received[tile] += t.words_received;
      traffic[step].push_back(t);
    }
    if (phase.words_sent == 0) phase.horizon = 0;  // as the simulator counts it
    const ExchangePhase rebuilt = rebuild_phase(package, step, &phase.words_unreceived);
    phase.transfers = rebuilt.transfers.size();
    phase.endpoint_lower_bound = endpoint_lower_bound(rebuilt);
    phase.lower_bound = lower_bound(rebuilt, package.target);
    figures.phases.push_back(std::move(phase));
  }

  std::vector<std::uint32_t> with_transfers;
  for (const PhaseFigures& phase : figures.phases)
    if (!phase.empty()) with_transfers.push_back(phase.index);
  if (options.phase) {
    const std::uint32_t wanted = *options.phase;
    if (wanted >= supersteps || figures.phases[wanted].empty())
      throw Error(package_path, 0, 0,
                  fmt::format("there is no exchange phase {} to draw: {}; phases with transfers: {}", wanted,
                              wanted >= supersteps ? fmt::format("the package has {} supersteps (0..{})", supersteps,
                                                                 supersteps == 0 ? 0 : supersteps - 1)
                                                   : fmt::format("superstep {} exchanges nothing", wanted),
                              with_transfers.empty() ? "none" : fmt::format("{}", fmt::join(with_transfers, ", "))));
    figures.selected_phase = wanted;
  } else if (!with_transfers.empty()) {
    figures.selected_phase = *std::max_element(
        with_transfers.begin(), with_transfers.end(),
        [&](std::uint32_t a, std::uint32_t b) { return figures.phases[a].horizon < figures.phases[b].horizon; });
  }

  if (figures.selected_phase) {
    std::vector<TileTraffic> active;
    for (const TileTraffic& t : traffic[*figures.selected_phase])
      if (t.end_cycle > 0) active.push_back(t);
    // Busiest = most words through its busier port (what the endpoint bound counts); then the
    // later finisher, then the lower tile number, so the order is stable.
    std::sort(active.begin(), active.end(), [](const TileTraffic& a, const TileTraffic& b) {
      if (a.busiest_port_words() != b.busiest_port_words()) return a.busiest_port_words() > b.busiest_port_words();
      if (a.end_cycle != b.end_cycle) return a.end_cycle > b.end_cycle;
      return a.tile < b.tile;
    });
    const std::size_t shown = std::min<std::size_t>(active.size(), std::max<std::uint32_t>(options.timeline_tiles, 1));
    figures.timeline.assign(active.begin(), active.begin() + static_cast<std::ptrdiff_t>(shown));
    // The tile whose last word sets the horizon is always shown: it is where the phase ends.
    const auto last = std::max_element(active.begin(), active.end(), [](const TileTraffic& a, const TileTraffic& b) {
      return a.end_cycle < b.end_cycle || (a.end_cycle == b.end_cycle && a.tile > b.tile);
    });
    if (last != active.end() && std::none_of(figures.timeline.begin(), figures.timeline.end(),
                                             [&](const TileTraffic& t) { return t.end_cycle == last->end_cycle; }))
      figures.timeline.back() = *last;
  }
  return figures;
}

}  // namespace tessera::report
