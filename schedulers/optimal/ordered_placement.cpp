// Placement of the ideal schedule's pieces on a real target: a left shift, or dense list scheduling by ideal order.
#include "ordered_placement.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <vector>

#include "tessera/target.hpp"

namespace tessera::optimal {
namespace {

constexpr std::uint32_t kNoSource = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint32_t kNoSegment = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// How many of a source's next unplaced pieces the dense placement considers: enough to
// step around a busy receiver, few enough that the ideal order still leads.
constexpr std::uint32_t kDenseWindow = 8;

// The ports' state while pieces are placed one at a time, and the segments made so far.
class PortTimeline {
public:
  PortTimeline(const ExchangePhase& phase, const Target& target)
      : phase_(phase), target_(target), send_free_(phase.tiles, 0), receive_free_(phase.tiles, 0),
        listening_to_(phase.tiles, kNoSource), last_segment_(phase.transfers.size(), kNoSegment) {}

  // The first cycle at or after the source's last send at which every destination can
  // take the piece's first word: after its previous word and, if it changes source, the
  // switch cost.
  std::uint64_t earliest_start(std::uint32_t transfer) const {
    const Transfer& t = phase_.transfers[transfer];
    std::uint64_t start = send_free_[t.source];
    for (std::uint32_t destination : t.destinations) {
      std::uint64_t ready = receive_free_[destination];
      if (listening_to_[destination] != kNoSource && listening_to_[destination] != t.source)
        ready += target_.switch_cost;
      const std::uint32_t latency = target_.latency(t.source, destination);
      if (ready > latency) start = std::max(start, ready - latency);
    }
    return start;
  }

  // Sends the piece from `start` (at or after earliest_start) and books its ports.
  void place(const Piece& piece, std::uint64_t start) {
    const Transfer& t = phase_.transfers[piece.transfer];
    std::uint32_t& last = last_segment_[piece.transfer];
    if (last != kNoSegment && segments_[last].start + segments_[last].words == start &&
        std::uint64_t{segments_[last].words} + piece.words <= std::numeric_limits<std::uint32_t>::max()) {
      segments_[last].words += piece.words;
    } else {
      last = static_cast<std::uint32_t>(segments_.size());
      segments_.push_back(Segment{piece.transfer, start, piece.words});
    }
    send_free_[t.source] = start + piece.words;
    for (std::uint32_t destination : t.destinations) {
      receive_free_[destination] = start + target_.latency(t.source, destination) + piece.words;
      listening_to_[destination] = t.source;
    }
  }

  std::vector<Segment> take_segments() { return std::move(segments_); }

private:
  const ExchangePhase& phase_;
  const Target& target_;
  std::vector<std::uint64_t> send_free_;     ///< first cycle the port may send again
  std::vector<std::uint64_t> receive_free_;  ///< first cycle a word may arrive again
  std::vector<std::uint32_t> listening_to_;  ///< the source the receiver's mux is set to
  std::vector<std::uint32_t> last_segment_;  ///< per transfer: its latest segment
  std::vector<Segment> segments_;
};

std::vector<Segment> left_shift(const ExchangePhase& phase, const Target& target,
                                const std::vector<Piece>& pieces) {
  PortTimeline timeline(phase, target);
  for (const Piece& piece : pieces) timeline.place(piece, timeline.earliest_start(piece.transfer));
  return timeline.take_segments();
}

// Event-driven: a source that is free at cycle t looks at its next kDenseWindow unplaced
// pieces in ideal order and starts the first one every destination can take at t; if none
// can, it sleeps until the earliest cycle one of them could start and looks again. Among
// sources free at the same cycle, the one with more words left goes first.
std::vector<Segment> dense(const ExchangePhase& phase, const Target& target,
                           const std::vector<Piece>& pieces) {
  const std::uint32_t tiles = phase.tiles;
  // Each source's pieces, in ideal order.
  std::vector<std::uint32_t> begin(std::size_t{tiles} + 1, 0);
  for (const Piece& piece : pieces) ++begin[phase.transfers[piece.transfer].source + 1];
  for (std::uint32_t tile = 0; tile < tiles; ++tile) begin[tile + 1] += begin[tile];
  std::vector<std::uint32_t> by_source(pieces.size());
  std::vector<std::uint64_t> words_left(tiles, 0);
  {
    std::vector<std::uint32_t> next(begin.begin(), begin.end() - 1);
    for (std::uint32_t index = 0; index < pieces.size(); ++index) {
      const std::uint32_t source = phase.transfers[pieces[index].transfer].source;
      by_source[next[source]++] = index;
      words_left[source] += pieces[index].words;
    }
  }
  std::vector<std::uint32_t> first_unplaced(begin.begin(), begin.end() - 1);
  std::vector<std::uint8_t> placed(pieces.size(), 0);

  using Wake = std::tuple<std::uint64_t, std::uint64_t, std::uint32_t>;  // cycle, ~words left, source
  std::priority_queue<Wake, std::vector<Wake>, std::greater<>> wakes;
  for (std::uint32_t source = 0; source < tiles; ++source)
    if (begin[source] < begin[source + 1]) wakes.emplace(0, ~words_left[source], source);

  PortTimeline timeline(phase, target);
  while (!wakes.empty()) {
    const std::uint64_t cycle = std::get<0>(wakes.top());
    const std::uint32_t source = std::get<2>(wakes.top());
    wakes.pop();
    std::uint64_t wake = kNever;
    std::uint32_t chosen = kNoSegment;
    std::uint32_t seen = 0;
    for (std::uint32_t k = first_unplaced[source]; k < begin[source + 1] && seen < kDenseWindow; ++k) {
      if (placed[k]) continue;
      ++seen;
      const std::uint64_t earliest = timeline.earliest_start(pieces[by_source[k]].transfer);
      if (earliest <= cycle) {
        chosen = k;
        break;
      }
      wake = std::min(wake, earliest);
    }
    if (chosen == kNoSegment) {
      wakes.emplace(wake, ~words_left[source], source);
      continue;
    }
    const Piece& piece = pieces[by_source[chosen]];
    timeline.place(piece, cycle);
    placed[chosen] = 1;
    while (first_unplaced[source] < begin[source + 1] && placed[first_unplaced[source]])
      ++first_unplaced[source];
    words_left[source] -= piece.words;
    if (first_unplaced[source] < begin[source + 1])
      wakes.emplace(cycle + piece.words, ~words_left[source], source);
  }
  return timeline.take_segments();
}

}  // namespace

std::vector<Segment> place_in_order(const ExchangePhase& phase, const Target& target,
                                    const std::vector<Piece>& pieces, Placement placement) {
  return placement == Placement::left_shift ? left_shift(phase, target, pieces)
                                            : dense(phase, target, pieces);
}

}  // namespace tessera::optimal
