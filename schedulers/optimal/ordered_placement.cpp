// Placement of the ideal pieces on a real target: a left shift, or dense list scheduling.
#include "ordered_placement.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <queue>
#include <tuple>
#include <vector>

#include "tessera/receiver_mux.hpp"
#include "tessera/target.hpp"

namespace tessera::optimal {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// How many of a source's next unplaced pieces the dense placement considers: enough to
// step around a busy receiver, few enough that the ideal order still leads (measured on
// the test shapes: 2 loses up to 25%, 32 lets critical senders run ahead of the ideal
// interleaving).
constexpr std::uint32_t kDenseWindow = 8;

// Each transfer's source and its destinations with their latencies, read once from the
// phase into flat arrays: the placements look them up for every piece many times.
struct Routes {
  Routes(const ExchangePhase& phase, const Target& target)
      : source(phase.transfers.size()), begin(phase.transfers.size() + 1, 0) {
    for (std::size_t index = 0; index < phase.transfers.size(); ++index) {
      const Transfer& transfer = phase.transfers[index];
      source[index] = transfer.source;
      for (std::uint32_t destination : transfer.destinations) {
        destinations.push_back(destination);
        latencies.push_back(target.latency(transfer.source, destination));
      }
      begin[index + 1] = static_cast<std::uint32_t>(destinations.size());
    }
  }
  std::vector<std::uint32_t> source;
  std::vector<std::uint32_t> begin;  ///< transfer i's destinations are [begin[i], begin[i+1])
  std::vector<std::uint32_t> destinations, latencies;
};

// The ports' state while pieces are placed one at a time.
class PortTimeline {
public:
  PortTimeline(const Routes& routes, std::uint32_t tiles, std::uint32_t switch_cost)
      : routes_(routes), switch_cost_(switch_cost), send_free_(tiles, 0), receivers_(tiles) {}

  // The first cycle at which the source is free and every destination can take the
  // piece's first word: after its previous word and, if it changes source, the switch cost.
  std::uint64_t earliest_start(std::uint32_t transfer) const {
    const std::uint32_t source = routes_.source[transfer];
    std::uint64_t start = send_free_[source];
    for (std::uint32_t k = routes_.begin[transfer]; k < routes_.begin[transfer + 1]; ++k)
      start = std::max(start, ready_for(source, routes_.destinations[k], routes_.latencies[k]));
    return start;
  }

  // The first cycle `source` may start sending to `destination` as far as the destination
  // is concerned.
  std::uint64_t ready_for(std::uint32_t source, std::uint32_t destination, std::uint32_t latency) const {
    return receivers_[destination].earliest_send(source, latency, switch_cost_);
  }
  std::uint64_t send_free(std::uint32_t source) const { return send_free_[source]; }

  // Sends `words` of the transfer from `start` (at or after earliest_start).
  void place(std::uint32_t transfer, std::uint32_t words, std::uint64_t start) {
    const std::uint32_t source = routes_.source[transfer];
    send_free_[source] = start + words;
    for (std::uint32_t k = routes_.begin[transfer]; k < routes_.begin[transfer + 1]; ++k)
      receivers_[routes_.destinations[k]].take(source, start + routes_.latencies[k], words);
  }

private:
  const Routes& routes_;
  const std::uint64_t switch_cost_;
  std::vector<std::uint64_t> send_free_;  ///< first cycle the port may send again
  std::vector<ReceiverMux> receivers_;
};

std::uint64_t horizon_of(const Routes& routes, const std::vector<Piece>& pieces,
                         const std::vector<std::uint64_t>& starts) {
  std::uint64_t horizon = 0;
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    const std::uint32_t transfer = pieces[index].transfer;
    for (std::uint32_t k = routes.begin[transfer]; k < routes.begin[transfer + 1]; ++k)
      horizon = std::max<std::uint64_t>(horizon, starts[index] + routes.latencies[k] + pieces[index].words);
  }
  return horizon;
}

// Every port keeps the ideal order: each piece starts as early as its ports allow. With the
// order fixed per port this is the earliest such schedule, so no second pass can shorten it.
std::vector<std::uint64_t> left_shift(const Routes& routes, std::uint32_t tiles, std::uint32_t switch_cost,
                                      const std::vector<Piece>& pieces) {
  PortTimeline timeline(routes, tiles, switch_cost);
  std::vector<std::uint64_t> starts(pieces.size());
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    starts[index] = timeline.earliest_start(pieces[index].transfer);
    timeline.place(pieces[index].transfer, pieces[index].words, starts[index]);
  }
  return starts;
}

// Event-driven: a source free at cycle t looks at its next kDenseWindow unplaced pieces in
// ideal order and starts, among those every destination can take at t, the one whose
// busiest destination has the most words still to come; if none can start, it sleeps until
// the earliest cycle one of them could and looks again. Among sources free at the same
// cycle, the one with more words left goes first.
std::vector<std::uint64_t> dense(const Routes& routes, std::uint32_t tiles, std::uint32_t switch_cost,
                                 const std::vector<Piece>& pieces) {
  // Each source's pieces, in ideal order.
  std::vector<std::uint32_t> begin(std::size_t{tiles} + 1, 0);
  for (const Piece& piece : pieces) ++begin[routes.source[piece.transfer] + 1];
  for (std::uint32_t tile = 0; tile < tiles; ++tile) begin[tile + 1] += begin[tile];
  // The scans read these in order; a unicast piece needs nothing else.
  struct Pending {
    std::uint32_t piece;
    std::uint32_t destination;  ///< unicast: the destination; multicast: kNone
    std::uint32_t latency;
  };
  std::vector<Pending> by_source(pieces.size());
  std::vector<std::uint64_t> to_send(tiles, 0), to_receive(tiles, 0);
  {
    std::vector<std::uint32_t> next(begin.begin(), begin.end() - 1);
    for (std::uint32_t index = 0; index < pieces.size(); ++index) {
      const std::uint32_t transfer = pieces[index].transfer, source = routes.source[transfer];
      const bool unicast = routes.begin[transfer + 1] - routes.begin[transfer] == 1;
      by_source[next[source]++] = {index, unicast ? routes.destinations[routes.begin[transfer]] : kNone,
                                   unicast ? routes.latencies[routes.begin[transfer]] : 0};
      to_send[source] += pieces[index].words;
      for (std::uint32_t k = routes.begin[transfer]; k < routes.begin[transfer + 1]; ++k)
        to_receive[routes.destinations[k]] += pieces[index].words;
    }
  }
  PortTimeline timeline(routes, tiles, switch_cost);
  auto receiver_load = [&](const Pending& pending) {
    if (pending.destination != kNone) return to_receive[pending.destination];
    std::uint64_t load = 0;
    const std::uint32_t transfer = pieces[pending.piece].transfer;
    for (std::uint32_t k = routes.begin[transfer]; k < routes.begin[transfer + 1]; ++k)
      load = std::max(load, to_receive[routes.destinations[k]]);
    return load;
  };
  auto earliest = [&](std::uint32_t source, const Pending& pending) {
    if (pending.destination == kNone) return timeline.earliest_start(pieces[pending.piece].transfer);
    return std::max(timeline.send_free(source), timeline.ready_for(source, pending.destination, pending.latency));
  };
  std::vector<std::uint32_t> first_unplaced(begin.begin(), begin.end() - 1);
  std::vector<std::uint8_t> placed(pieces.size(), 0);

  using Wake = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;  // cycle, ~words left, source
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> wakes;
  for (std::uint32_t source = 0; source < tiles; ++source)
    if (begin[source] < begin[source + 1]) wakes.emplace(0, ~to_send[source], source);

  std::vector<std::uint64_t> starts(pieces.size(), 0);
  while (!wakes.empty()) {
    const std::uint64_t cycle = std::get<0>(wakes.top());
    const std::uint32_t source = std::get<2>(wakes.top());
    wakes.pop();
    std::uint64_t wake = kNever, chosen_load = 0;
    std::uint32_t chosen = kNone, seen = 0;
    for (std::uint32_t k = first_unplaced[source]; k < begin[source + 1] && seen < kDenseWindow; ++k) {
      if (placed[k]) continue;
      ++seen;
      const std::uint64_t start = earliest(source, by_source[k]);
      if (start > cycle) {
        wake = std::min(wake, start);
        continue;
      }
      const std::uint64_t load = receiver_load(by_source[k]);
      if (chosen == kNone || load > chosen_load) {
        chosen = k;
        chosen_load = load;
      }
    }
    if (chosen == kNone) {
      wakes.emplace(wake, ~to_send[source], source);
      continue;
    }
    const std::uint32_t index = by_source[chosen].piece;
    const Piece& piece = pieces[index];
    timeline.place(piece.transfer, piece.words, cycle);
    starts[index] = cycle;
    placed[chosen] = 1;
    while (first_unplaced[source] < begin[source + 1] && placed[first_unplaced[source]]) ++first_unplaced[source];
    to_send[source] -= piece.words;
    for (std::uint32_t k = routes.begin[piece.transfer]; k < routes.begin[piece.transfer + 1]; ++k)
      to_receive[routes.destinations[k]] -= piece.words;
    if (first_unplaced[source] < begin[source + 1]) wakes.emplace(cycle + piece.words, ~to_send[source], source);
  }
  return starts;
}

// Segments in start order, a piece that continues its transfer's previous one merged in.
std::vector<Segment> to_segments(const ExchangePhase& phase, const std::vector<Piece>& pieces,
                                 const std::vector<std::uint64_t>& starts) {
  std::vector<std::uint32_t> order(pieces.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return starts[a] < starts[b]; });
  std::vector<std::uint32_t> last_segment(phase.transfers.size(), kNone);
  std::vector<Segment> segments;
  segments.reserve(pieces.size());
  for (std::uint32_t index : order) {
    const Piece& piece = pieces[index];
    std::uint32_t& last = last_segment[piece.transfer];
    if (last != kNone && segments[last].start + segments[last].words == starts[index] &&
        std::uint64_t{segments[last].words} + piece.words <= std::numeric_limits<std::uint32_t>::max()) {
      segments[last].words += piece.words;
      continue;
    }
    last = static_cast<std::uint32_t>(segments.size());
    segments.push_back(Segment{piece.transfer, starts[index], piece.words});
  }
  return segments;
}

}  // namespace

std::vector<Segment> place_in_order(const ExchangePhase& phase, const Target& target, const std::vector<Piece>& pieces,
                                    Placement placement) {
  const Routes routes(phase, target);
  const std::uint32_t tiles = phase.tiles, switch_cost = target.switch_cost;
  switch (placement) {
    case Placement::left_shift:
      return to_segments(phase, pieces, left_shift(routes, tiles, switch_cost, pieces));
    case Placement::dense:
      return to_segments(phase, pieces, dense(routes, tiles, switch_cost, pieces));
    case Placement::best:
      break;
  }
  const std::vector<std::uint64_t> shifted = left_shift(routes, tiles, switch_cost, pieces);
  const std::vector<std::uint64_t> packed = dense(routes, tiles, switch_cost, pieces);
  const bool dense_wins = horizon_of(routes, pieces, packed) < horizon_of(routes, pieces, shifted);
  return to_segments(phase, pieces, dense_wins ? packed : shifted);
}

}  // namespace tessera::optimal
