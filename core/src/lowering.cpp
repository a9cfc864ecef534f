// Grouping a superstep's copies into the transfers of its exchange phase.
#include "tessera/lowering.hpp"

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/target.hpp"

namespace tessera {
namespace {

constexpr std::uint64_t kWordBytes = 4;  // exchange words are 32-bit

bool crosses_fabric(const Program& program, const Copy& copy) {
  return copy.words > 0 && program.buffers[copy.source.buffer].tile != program.buffers[copy.destination.buffer].tile;
}

}  // namespace

CopyGroups group_copies(const Program& program, const Superstep& step, bool multicast) {
  const std::vector<Buffer>& buffers = program.buffers;
  const std::vector<Copy>& copies = step.copies;
  for (std::size_t index = 0; index < copies.size(); ++index)
    if (copies[index].source.buffer >= buffers.size() || copies[index].destination.buffer >= buffers.size())
      throw Error(fmt::format("copy {} of superstep '{}' names buffer {} but the program has {}", index, step.label,
                              std::max(copies[index].source.buffer, copies[index].destination.buffer), buffers.size()));
  CopyGroups groups;
  if (!multicast) {
    for (std::uint32_t i = 0; i < copies.size(); ++i)
      if (crosses_fabric(program, copies[i])) {
        groups.copies.push_back(i);
        groups.offsets.push_back(static_cast<std::uint32_t>(groups.copies.size()));
      }
    return groups;
  }
  // Sorting by source range (then by copy index) puts copies of the same words side by
  // side, in their original order. Groups are flat (no vector each): phases reach 10^6 copies.
  struct Keyed {
    std::uint64_t range;  ///< buffer, then word offset
    std::uint32_t words, index;
  };
  std::vector<Keyed> keyed;
  keyed.reserve(copies.size());
  for (std::uint32_t i = 0; i < copies.size(); ++i)
    if (crosses_fabric(program, copies[i]))
      keyed.push_back(
          {(std::uint64_t{copies[i].source.buffer} << 32) | copies[i].source.word_offset, copies[i].words, i});
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return a.range != b.range ? a.range < b.range : a.words != b.words ? a.words < b.words : a.index < b.index;
  });

  // Within a run of copies of the same words, a copy goes to the first group not yet
  // holding its destination tile: the j-th copy to a tile goes to the run's j-th group.
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t tiles = 0;
  for (const Keyed& key : keyed) tiles = std::max(tiles, buffers[copies[key.index].destination.buffer].tile + 1);
  std::vector<std::uint32_t> seen_in_run(tiles, 0), times_seen(tiles, 0);
  std::vector<std::uint32_t> run_groups;                      // groups of the current source range
  std::vector<std::uint32_t> group_of(keyed.size());          // per keyed copy
  std::vector<std::uint32_t> first_of(copies.size(), kNone);  // per copy that starts a group: the group
  std::vector<std::uint32_t> members;                         // per group
  std::uint32_t run = 0;
  for (std::size_t begin = 0; begin < keyed.size(); ++run) {
    std::size_t end = begin;
    run_groups.clear();
    for (; end < keyed.size() && keyed[end].range == keyed[begin].range && keyed[end].words == keyed[begin].words;
         ++end) {
      const std::uint32_t tile = buffers[copies[keyed[end].index].destination.buffer].tile;
      if (seen_in_run[tile] != run + 1) {
        seen_in_run[tile] = run + 1;
        times_seen[tile] = 0;
      }
      const std::uint32_t nth = times_seen[tile]++;
      if (nth == run_groups.size()) {
        run_groups.push_back(static_cast<std::uint32_t>(members.size()));
        first_of[keyed[end].index] = static_cast<std::uint32_t>(members.size());
        members.push_back(0);
      }
      group_of[end] = run_groups[nth];
      ++members[run_groups[nth]];
    }
    begin = end;
  }
  // Deterministic order: by each group's first copy (its lowest index).
  std::vector<std::uint32_t> rank(members.size());
  std::uint32_t next = 0;
  for (std::uint32_t group : first_of)
    if (group != kNone) rank[group] = next++;
  std::vector<std::uint32_t> slot(members.size());  // per group, where its next copy goes
  groups.offsets.resize(members.size() + 1);
  for (std::size_t group = 0; group < members.size(); ++group) groups.offsets[rank[group] + 1] = members[group];
  for (std::size_t g = 0; g < members.size(); ++g) groups.offsets[g + 1] += groups.offsets[g];
  for (std::size_t group = 0; group < members.size(); ++group) slot[group] = groups.offsets[rank[group]];
  groups.copies.resize(keyed.size());
  for (std::size_t k = 0; k < keyed.size(); ++k) groups.copies[slot[group_of[k]]++] = keyed[k].index;
  return groups;
}

ExchangePhase physical_phase(const Program& program, const Superstep& step, const Target& target) {
  const std::vector<Buffer>& buffers = program.buffers;
  auto address = [&](const BufferRef& ref, const char* what) -> std::uint32_t {
    const Buffer& buffer = buffers[ref.buffer];
    if (buffer.offset == kUnplaced) return 0;
    const std::uint64_t byte = static_cast<std::uint64_t>(buffer.offset) + kWordBytes * ref.word_offset;
    if (byte > std::numeric_limits<std::uint32_t>::max())
      throw Error(
          fmt::format("superstep '{}': copy {} in '{}' lies beyond a 32-bit address", step.label, what, buffer.name));
    return static_cast<std::uint32_t>(byte);
  };
  ExchangePhase phase;
  phase.tiles = target.tiles;
  const CopyGroups groups = group_copies(program, step, target.multicast);
  phase.transfers.reserve(groups.size());  // phases reach 10^6 transfers: no regrowth
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::uint32_t begin = groups.offsets[g], end = groups.offsets[g + 1];
    const Copy& first = step.copies[groups.copies[begin]];
    Transfer transfer;
    transfer.source = buffers[first.source.buffer].tile;
    transfer.words = first.words;
    transfer.source_address = address(first.source, "source");
    transfer.destinations.reserve(end - begin);
    transfer.destination_addresses.reserve(end - begin);
    for (std::uint32_t member = begin; member < end; ++member) {
      const std::uint32_t copy = groups.copies[member];
      transfer.destinations.push_back(buffers[step.copies[copy].destination.buffer].tile);
      transfer.destination_addresses.push_back(address(step.copies[copy].destination, "destination"));
    }
    phase.transfers.push_back(std::move(transfer));
  }
  return phase;
}

std::vector<std::uint64_t> exchange_descriptor_bytes(const Program& program, std::uint32_t tiles, bool multicast) {
  if (!multicast) return copy_descriptor_bytes(program, tiles);
  const std::vector<Buffer>& buffers = program.buffers;
  std::vector<std::uint64_t> bytes(tiles, 0);
  // Counted as group_copies groups them, without building the groups: a run of copies of the
  // same words makes as many transfers (send entries) as the most copies it sends one tile.
  struct Keyed {
    std::uint64_t range;  ///< buffer, then word offset
    std::uint32_t words, destination;
    auto operator<=>(const Keyed&) const = default;
  };
  std::vector<Keyed> keyed;
  for (const Superstep& step : program.supersteps) {
    keyed.clear();
    for (const Copy& copy : step.copies) {
      if (copy.source.buffer >= buffers.size() || copy.destination.buffer >= buffers.size()) continue;
      const std::uint32_t destination = buffers[copy.destination.buffer].tile;
      if (!crosses_fabric(program, copy)) continue;
      if (destination < tiles) bytes[destination] += kReceiveDescriptorBytes;
      keyed.push_back({(std::uint64_t{copy.source.buffer} << 32) | copy.source.word_offset, copy.words, destination});
    }
    std::sort(keyed.begin(), keyed.end());
    for (std::size_t begin = 0; begin < keyed.size();) {
      std::size_t end = begin;
      std::uint64_t transfers = 0;
      while (end < keyed.size() && keyed[end].range == keyed[begin].range && keyed[end].words == keyed[begin].words) {
        std::size_t same_tile = end;
        while (same_tile < keyed.size() && keyed[same_tile] == keyed[end]) ++same_tile;
        transfers = std::max<std::uint64_t>(transfers, same_tile - end);
        end = same_tile;
      }
      if (const std::uint32_t source = buffers[keyed[begin].range >> 32].tile; source < tiles)
        bytes[source] += transfers * kSendDescriptorBytes;
      begin = end;
    }
  }
  return bytes;
}

}  // namespace tessera
