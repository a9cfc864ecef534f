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

// group_in_place's table entry (at namespace scope: GCC 12 fails on it local to the template).
constexpr std::uint32_t kEmptySlot = std::numeric_limits<std::uint32_t>::max();
struct KeySlot {
  std::uint64_t key = 0;
  std::uint32_t group = kEmptySlot;
};

/// What group_in_place works in, kept across its calls so that each does not allocate afresh.
struct GroupScratch {
  std::vector<KeySlot> table;
  std::vector<std::uint32_t> group_of, next, grouped;  // next: per group its size, then its next place
};

/// Reorders items[first, last) so that items of equal key (key_of: 64 bits) sit side by side,
/// groups in order of first appearance and each in its items' order, and appends each group's
/// start to `starts`. Linear, with an open-addressing table grown to stay at most half full (few
/// keys: a small table; many: one the range's size), not a sort.
template <typename KeyOf>
void group_in_place(std::vector<std::uint32_t>& items, std::uint32_t first, std::uint32_t last, KeyOf key_of,
                    std::vector<std::uint32_t>& starts, GroupScratch& scratch) {
  std::vector<KeySlot>& table = scratch.table;
  std::vector<std::uint32_t>&group_of = scratch.group_of, &next = scratch.next, &grouped = scratch.grouped;
  table.assign(16, KeySlot{});
  group_of.resize(last - first);
  next.clear();
  auto slot_of = [&](std::uint64_t key) -> KeySlot& {
    std::size_t at = (key * 0x9E3779B97F4A7C15ull >> 32) & (table.size() - 1);
    while (table[at].group != kEmptySlot && table[at].key != key) at = (at + 1) & (table.size() - 1);
    return table[at];
  };
  for (std::uint32_t k = first; k < last; ++k) {
    const std::uint64_t key = key_of(items[k]);
    KeySlot* slot = &slot_of(key);
    if (slot->group == kEmptySlot) {
      if (2 * (next.size() + 1) > table.size()) {
        std::vector<KeySlot> old(table.size() * 2);
        old.swap(table);
        for (const KeySlot& entry : old)
          if (entry.group != kEmptySlot) slot_of(entry.key) = entry;
        slot = &slot_of(key);
      }
      *slot = {key, static_cast<std::uint32_t>(next.size())};
      next.push_back(0);
    }
    group_of[k - first] = slot->group;
    ++next[slot->group];
  }
  std::uint32_t start = first;
  for (std::uint32_t& place : next) {
    starts.push_back(start);
    start += std::exchange(place, start);
  }
  grouped.resize(last - first);
  for (std::uint32_t k = first; k < last; ++k) grouped[next[group_of[k - first]]++ - first] = items[k];
  std::copy(grouped.begin(), grouped.end(), items.begin() + first);
}

/// A superstep's fabric-crossing copies bucketed by the words they read (source buffer, word
/// offset, words), each run's copies in index order. By source buffer first (few per phase), then
/// by offset within each buffer, where most already are in order: candidates' phases reach 10^5
/// copies and are bucketed several times each, so neither a sort of them all nor a table as large.
struct Runs {
  std::vector<std::uint32_t> offsets;  ///< run r is copies[offsets[r]] to copies[offsets[r + 1] - 1]
  std::vector<std::uint32_t> copies;   ///< indices into the superstep's copy list
};

Runs copy_runs(const Program& program, const std::vector<Copy>& copies) {
  Runs runs;
  for (std::uint32_t i = 0; i < copies.size(); ++i) {
    const Copy& copy = copies[i];
    const bool named = copy.source.buffer < program.buffers.size() && copy.destination.buffer < program.buffers.size();
    if (named && crosses_fabric(program, copy)) runs.copies.push_back(i);  // group_copies refuses unnamed buffers first
  }
  const auto crossing = static_cast<std::uint32_t>(runs.copies.size());
  std::vector<std::uint32_t> buffer_starts;
  GroupScratch scratch;
  group_in_place(
      runs.copies, 0, crossing, [&](std::uint32_t copy) { return copies[copy].source.buffer; }, buffer_starts, scratch);
  buffer_starts.push_back(crossing);
  auto words_read = [&](std::uint32_t copy) {
    return std::uint64_t{copies[copy].source.word_offset} << 32 | copies[copy].words;
  };
  for (std::size_t b = 0; b + 1 < buffer_starts.size(); ++b) {
    const std::uint32_t first = buffer_starts[b], last = buffer_starts[b + 1];
    bool ordered = true;
    for (std::uint32_t k = first + 1; k < last && ordered; ++k)
      ordered = words_read(runs.copies[k - 1]) <= words_read(runs.copies[k]);
    if (!ordered) {  // a block sent row by row to many tiles
      group_in_place(runs.copies, first, last, words_read, runs.offsets, scratch);
      continue;
    }
    for (std::uint32_t k = first; k < last; ++k)
      if (k == first || words_read(runs.copies[k]) != words_read(runs.copies[k - 1])) runs.offsets.push_back(k);
  }
  runs.offsets.push_back(crossing);
  return runs;
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
  const Runs runs = copy_runs(program, copies);

  // Within a run of copies of the same words, a copy goes to the first group not yet
  // holding its destination tile: the j-th copy to a tile goes to the run's j-th group.
  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  std::uint32_t tiles = 0;
  for (std::uint32_t copy : runs.copies) tiles = std::max(tiles, buffers[copies[copy].destination.buffer].tile + 1);
  std::vector<std::uint32_t> seen_in_run(tiles, 0), times_seen(tiles, 0);
  std::vector<std::uint32_t> run_groups;                      // groups of the current run
  std::vector<std::uint32_t> group_of(runs.copies.size());    // per bucketed copy
  std::vector<std::uint32_t> first_of(copies.size(), kNone);  // per copy that starts a group: the group
  std::vector<std::uint32_t> members;                         // per group
  for (std::uint32_t run = 0; run + 1 < runs.offsets.size(); ++run) {
    run_groups.clear();
    for (std::uint32_t k = runs.offsets[run]; k < runs.offsets[run + 1]; ++k) {
      const std::uint32_t copy = runs.copies[k];
      const std::uint32_t tile = buffers[copies[copy].destination.buffer].tile;
      if (seen_in_run[tile] != run + 1) {
        seen_in_run[tile] = run + 1;
        times_seen[tile] = 0;
      }
      const std::uint32_t nth = times_seen[tile]++;
      if (nth == run_groups.size()) {
        run_groups.push_back(static_cast<std::uint32_t>(members.size()));
        first_of[copy] = static_cast<std::uint32_t>(members.size());
        members.push_back(0);
      }
      group_of[k] = run_groups[nth];
      ++members[run_groups[nth]];
    }
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
  groups.copies.resize(runs.copies.size());
  for (std::size_t k = 0; k < runs.copies.size(); ++k) groups.copies[slot[group_of[k]]++] = runs.copies[k];
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
  std::vector<std::uint32_t> seen_in_run(tiles, 0), times_seen(tiles, 0);
  std::uint32_t run_number = 0;
  for (const Superstep& step : program.supersteps) {
    const Runs runs = copy_runs(program, step.copies);
    for (std::uint32_t run = 0; run + 1 < runs.offsets.size(); ++run) {
      ++run_number;
      std::uint32_t transfers = 0;
      for (std::uint32_t k = runs.offsets[run]; k < runs.offsets[run + 1]; ++k) {
        const std::uint32_t tile = buffers[step.copies[runs.copies[k]].destination.buffer].tile;
        if (tile >= tiles) {  // verify_program refuses such a copy; it still makes a transfer
          transfers = std::max(transfers, 1u);
          continue;
        }
        bytes[tile] += kReceiveDescriptorBytes;
        if (seen_in_run[tile] != run_number) {
          seen_in_run[tile] = run_number;
          times_seen[tile] = 0;
        }
        transfers = std::max(transfers, ++times_seen[tile]);
      }
      const Copy& first = step.copies[runs.copies[runs.offsets[run]]];
      if (const std::uint32_t source = buffers[first.source.buffer].tile; source < tiles)
        bytes[source] += std::uint64_t{transfers} * kSendDescriptorBytes;
    }
  }
  return bytes;
}

}  // namespace tessera
