// The lowering contract: how a superstep's copies become the exchange phase lower-exchanges builds.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/exchange.hpp"
#include "tessera/program.hpp"

namespace tessera {

struct Target;

/// Copies (indices into the superstep's copy list) grouped into transfers, flat: group g is
/// copies[offsets[g]] to copies[offsets[g + 1] - 1]. A group's copies all read the same words
/// of the same buffer, and each writes a different destination tile.
struct CopyGroups {
  std::vector<std::uint32_t> offsets{0};  ///< one more than there are groups
  std::vector<std::uint32_t> copies;
  std::size_t size() const { return offsets.size() - 1; }
};

/// One transfer per copy without multicast. With multicast, copies reading the same
/// (source buffer, word offset, words) share a transfer: the words leave the source once and
/// every destination's mux listens. A transfer never lists a destination tile twice (the
/// fabric delivers one word per receiver), so a second copy of the same words to a tile
/// already in the group starts another group. Groups keep the order of their first copy.
/// A copy within one tile or of no words crosses no fabric and is in no group (verify_program
/// refuses both in a finished plan; a cost model may see them in a candidate). Throws Error
/// on a copy naming a buffer the program does not have.
CopyGroups group_copies(const Program& program, const Superstep& step, bool multicast);

/// The exchange phase the superstep's copies become: one transfer per group, with byte
/// addresses once every buffer is placed (0 while unplaced). What lower-exchanges schedules,
/// and what every cost model should estimate before it exists. Throws Error when a placed
/// address lies beyond 32 bits.
ExchangePhase physical_phase(const Program& program, const Superstep& step, const Target& target);

/// Per tile, its exchange descriptors as lower-exchanges sends the copies: copy_descriptor_bytes
/// (program.hpp), except that with `multicast` a group of copies sent as one transfer
/// (group_copies) takes one send entry on its source, as emit-tile-code writes it.
std::vector<std::uint64_t> exchange_descriptor_bytes(const Program& program, std::uint32_t tiles, bool multicast);

}  // namespace tessera
