// Groups a superstep's logical copies into exchange transfers (multicast where the target allows).
// Shared by select-finalist (re-costing finalists' exchange), optimize-exchange-placement
// (scheduling candidate tile mappings) and lower-exchanges (the real lowering), so all see
// the same transfers for the same copies.
#pragma once
#include <cstdint>
#include <algorithm>
#include <utility>
#include <vector>

#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace tessera::passes {

/// The copies (indices into the superstep's copy list) that become one transfer: they all
/// read the same words of the same buffer, and each writes a different destination tile.
struct CopyGroup {
  std::vector<std::uint32_t> copies;
};

/// One transfer per copy without multicast. With multicast, copies reading the same
/// (source buffer, word offset, words) share a transfer: the words leave the source once and
/// every destination's mux listens. A transfer never lists a destination tile twice (the
/// fabric delivers one word per receiver), so a second copy of the same words to a tile
/// already in the group starts another group. Groups keep the order of their first copy,
/// so the result is deterministic.
inline std::vector<CopyGroup> group_copies(const std::vector<Buffer>& buffers,
                                           const std::vector<Copy>& copies, bool multicast) {
  std::vector<CopyGroup> groups;
  if (!multicast) {
    groups.resize(copies.size());
    for (std::uint32_t i = 0; i < copies.size(); ++i) groups[i].copies.push_back(i);
    return groups;
  }
  // Sorting by source range (then by copy index) puts copies of the same words side by
  // side, in their original order; no per-key allocation, which matters at 10^5 copies.
  struct Keyed {
    std::uint64_t range;  ///< buffer, then word offset
    std::uint32_t words, index;
  };
  std::vector<Keyed> keyed(copies.size());
  for (std::uint32_t i = 0; i < copies.size(); ++i)
    keyed[i] = {(std::uint64_t{copies[i].source.buffer} << 32) | copies[i].source.word_offset, copies[i].words, i};
  std::sort(keyed.begin(), keyed.end(), [](const Keyed& a, const Keyed& b) {
    return a.range != b.range ? a.range < b.range : a.words != b.words ? a.words < b.words : a.index < b.index;
  });
  std::vector<std::uint32_t> order(copies.size());
  for (std::size_t i = 0; i < keyed.size(); ++i) order[i] = keyed[i].index;

  // Within a run of copies of the same words, a copy goes to the first group not yet
  // holding its destination tile: the j-th copy to a tile goes to the run's j-th group.
  std::uint32_t tiles = 0;
  for (const Copy& copy : copies) tiles = std::max(tiles, buffers[copy.destination.buffer].tile + 1);
  std::vector<std::uint32_t> seen_in_run(tiles, 0), times_seen(tiles, 0);
  std::vector<std::uint32_t> run_groups;  // groups of the current source range
  std::uint32_t run = 0;
  for (std::size_t begin = 0; begin < order.size(); ++run) {
    const Copy& first = copies[order[begin]];
    std::size_t end = begin;
    run_groups.clear();
    for (; end < order.size(); ++end) {
      const Copy& copy = copies[order[end]];
      if (copy.source.buffer != first.source.buffer || copy.source.word_offset != first.source.word_offset ||
          copy.words != first.words)
        break;
      const std::uint32_t tile = buffers[copy.destination.buffer].tile;
      if (seen_in_run[tile] != run + 1) {
        seen_in_run[tile] = run + 1;
        times_seen[tile] = 0;
      }
      const std::uint32_t nth = times_seen[tile]++;
      if (nth == run_groups.size()) {
        run_groups.push_back(static_cast<std::uint32_t>(groups.size()));
        groups.emplace_back();
      }
      groups[run_groups[nth]].copies.push_back(order[end]);
    }
    begin = end;
  }
  // Deterministic order: by each group's first copy.
  std::sort(groups.begin(), groups.end(),
            [](const CopyGroup& a, const CopyGroup& b) { return a.copies.front() < b.copies.front(); });
  return groups;
}

/// The exchange phase a superstep's copies become once lowered, addresses aside: what a
/// scheduler sees before place-storage has run.
inline ExchangePhase physical_phase(const Program& program, const Superstep& step, const Target& target) {
  ExchangePhase phase;
  phase.tiles = target.tiles;
  for (const CopyGroup& group : group_copies(program.buffers, step.copies, target.multicast)) {
    const Copy& first = step.copies[group.copies.front()];
    Transfer transfer;
    transfer.source = program.buffers[first.source.buffer].tile;
    transfer.words = first.words;
    for (std::uint32_t copy : group.copies)
      transfer.destinations.push_back(program.buffers[step.copies[copy].destination.buffer].tile);
    phase.transfers.push_back(std::move(transfer));
  }
  return phase;
}

}  // namespace tessera::passes
