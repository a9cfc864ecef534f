// Places the ideal schedule validly on any target (latency, switch cost, multicast).
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera {
struct Target;
}

namespace tessera::optimal {

/// `words` of one transfer, to be sent in one go.
struct Piece {
  std::uint32_t transfer = 0;
  std::uint32_t words = 0;
};

enum class Placement {
  /// Every port keeps the order of its pieces; each piece starts at the earliest cycle its
  /// source and all its destinations allow (latency, switch cost). A left shift of the
  /// ideal schedule.
  left_shift,
  /// A free source starts, among its next few pieces in the given order, one that every
  /// destination can take now (the one whose busiest destination has the most words still
  /// to come), so no source idles while one of those could start; the order is a priority,
  /// not a constraint.
  dense,
  /// Both, keeping the one with the earlier horizon.
  best,
};

/// Places `pieces`, listed in the order of the ideal schedule, on `target`. The result is
/// valid by construction. A piece that continues the previous piece of its transfer
/// without a gap is merged into it. The pieces of a transfer must add up to its words.
std::vector<Segment> place_in_order(const ExchangePhase& phase, const Target& target, const std::vector<Piece>& pieces,
                                    Placement placement);

}  // namespace tessera::optimal
