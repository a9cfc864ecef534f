// The phase zoo: named, seeded exchange phases for scheduler and cost-model tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera {
struct Target;
}

namespace tessera::testing {

/// `words` words from `source` to every tile of `destinations`, addresses zero.
Transfer transfer(std::uint32_t source, std::vector<std::uint32_t> destinations, std::uint32_t words);
/// A phase over `tiles` tiles made of `transfers`.
ExchangePhase phase_of(std::uint32_t tiles, std::vector<Transfer> transfers = {});

// ---- Structured cases: no randomness ----

/// No transfer at all.
ExchangePhase empty_phase(std::uint32_t tiles);
/// One unicast transfer.
ExchangePhase single_transfer_phase(std::uint32_t tiles, std::uint32_t source, std::uint32_t destination,
                                    std::uint32_t words);
/// Three tiles: a transfer of no words (it needs no segment) beside one of 5 words.
ExchangePhase zero_word_phase();
/// Every other tile sends to tile 0 (fan-in: the receiver pays a switch per source), 8..68 words.
ExchangePhase all_to_one_phase(std::uint32_t tiles);
/// Tile 0 sends to every other tile (fan-out), 8..60 words.
ExchangePhase one_to_all_phase(std::uint32_t tiles);
/// Every tile sends every other tile 1..13 words, a fixed pattern.
ExchangePhase all_to_all_phase(std::uint32_t tiles);
/// Overlapping multicasts: one to everyone, some sharing receivers, some a source. Needs 11+ tiles.
ExchangePhase overlapping_multicast_phase(std::uint32_t tiles);
/// Four tiles, five 2^24-word transfers (64 MiB each), one a multicast: nothing may overflow
/// or walk words one by one.
ExchangePhase huge_words_phase();
/// Rings inside strided groups of `group` tiles: each member sends `words` to the next `steps`.
ExchangePhase ring_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t words, std::uint32_t steps);

// ---- Seeded cases: the same seed gives the same phase on every run ----

/// `per_tile` transfers from every tile to random others, 1..max_words words; with multicast,
/// one in eight goes to 2..8 distinct tiles. splitmix64, so the same on every machine.
ExchangePhase per_tile_random_phase(std::uint32_t tiles, std::uint32_t per_tile, std::uint32_t max_words,
                                    bool multicast, std::uint64_t seed);

struct RandomPhaseShape {
  std::uint32_t tiles = 1472;
  std::uint32_t transfers = 5000;
  std::uint32_t max_words = 64;
  double multicast_fraction = 0.0;  ///< share of transfers with 2..max_fanout destinations
  std::uint32_t max_fanout = 4;
};
/// Uniform random sources and destinations, 1..max_words words (mt19937_64). A multicast
/// needs max_fanout + 1 tiles or more.
ExchangePhase random_phase(const RandomPhaseShape& shape, std::uint64_t seed);
/// `hot` tiles send and receive about half the transfers, listed so that a port served in
/// phase order idles behind busy partners; 1..32 words.
ExchangePhase skewed_phase(std::uint32_t tiles, std::uint32_t transfers, std::uint32_t hot, std::uint64_t seed);
/// `count` random derangements of the tiles; each has `parts` sizes drawn from
/// [min_words, max_words], sent by every tile as `parts` transfers. Every port is at the
/// endpoint bound: what a balanced layout produces and what a scheduler finds hardest.
ExchangePhase permutation_phase(std::uint32_t tiles, std::uint32_t count, std::uint32_t min_words,
                                std::uint32_t max_words, std::uint64_t seed, std::uint32_t parts = 1);
/// Groups of `group` tiles, all-to-all inside each: strided groups take every
/// (tiles/group)-th tile and span all columns, contiguous ones share columns. Each pair's size
/// is drawn from [words, max(words, max_words)]. One group of all tiles is a plain all-to-all.
ExchangePhase group_all_to_all_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t words, bool strided,
                                     std::uint32_t max_words = 0, std::uint64_t seed = 1);
/// Contiguous groups of `group`; each member sends every other member `parts` slices of 1..40 words.
ExchangePhase reduce_scatter_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t parts, std::uint64_t seed);
/// `hot` receivers each gather `per_hot` transfers over `background` random ones; 1..64 words.
ExchangePhase hot_receiver_phase(std::uint32_t tiles, std::uint32_t hot, std::uint32_t per_hot,
                                 std::uint32_t background, std::uint64_t seed);
/// Each tile sends `fanout` distinct random tiles a block of [min_words, max_words]: at a fanout
/// near 400 on 1472 tiles, the production compiler's largest phase.
ExchangePhase scatter_phase(std::uint32_t tiles, std::uint32_t fanout, std::uint32_t min_words, std::uint32_t max_words,
                            std::uint64_t seed);
/// `count` transfers from random tiles to every other tile, 1..max_words words.
ExchangePhase broadcast_phase(std::uint32_t tiles, std::uint32_t count, std::uint32_t max_words, std::uint64_t seed);
/// The same transfers in a seeded random order.
ExchangePhase shuffled(ExchangePhase phase, std::uint64_t seed);

// ---- The zoo as a list ----

struct NamedPhase {
  std::string name;
  ExchangePhase phase;
};

/// One phase of each kind above that `target` can carry (multicast only where it has it,
/// all-to-all capped at 16 tiles), sized for a unit test: loop over it to cover the cases.
std::vector<NamedPhase> phase_zoo(const Target& target, std::uint64_t seed = 1);

}  // namespace tessera::testing
