// Test phases shaped like real exchange traffic: permutations, group all-to-alls, hot receivers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera::testing {

/// `count` random permutations of the tiles (no tile sends to itself); permutation i carries
/// the same number of words, drawn from [min_words, max_words], on every edge. Every tile
/// sends and receives the same load: the endpoint bound is reached by every port, which is
/// what a balanced data layout produces and what a scheduler finds hardest.
inline ExchangePhase permutation_phase(std::uint32_t tiles, std::uint32_t count,
                                       std::uint32_t min_words, std::uint32_t max_words,
                                       std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(min_words, max_words);
  ExchangePhase phase;
  phase.tiles = tiles;
  std::vector<std::uint32_t> image(tiles);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::iota(image.begin(), image.end(), 0u);
    std::shuffle(image.begin(), image.end(), random);
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      if (image[tile] == tile) std::swap(image[tile], image[(tile + 1) % tiles]);
    const std::uint32_t size = words(random);
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      phase.transfers.push_back(Transfer{tile, {image[tile]}, size, 0, {}});
  }
  return phase;
}

/// Tiles split into groups of `group` tiles; every member sends `words` to every other member
/// (a reduce-scatter or shuffle inside each group). Strided groups take every (tiles/group)-th
/// tile, so each spans all columns and latencies vary; contiguous groups share columns.
/// With `max_words` above `words`, each pair's size is drawn from [words, max_words].
inline ExchangePhase group_all_to_all_phase(std::uint32_t tiles, std::uint32_t group,
                                            std::uint32_t words, bool strided,
                                            std::uint32_t max_words = 0, std::uint64_t seed = 1) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> size(words, std::max(words, max_words));
  ExchangePhase phase;
  phase.tiles = tiles;
  const std::uint32_t groups = tiles / group;
  for (std::uint32_t g = 0; g < groups; ++g) {
    auto member = [&](std::uint32_t m) { return strided ? g + m * groups : g * group + m; };
    for (std::uint32_t a = 0; a < group; ++a)
      for (std::uint32_t b = 0; b < group; ++b)
        if (a != b)
          phase.transfers.push_back(Transfer{member(a), {member(b)}, size(random), 0, {}});
  }
  return phase;
}

/// `hot` receivers each gather `per_hot` transfers from random senders (a reduction's root),
/// over `background` random transfers; 1..64 words each.
inline ExchangePhase hot_receiver_phase(std::uint32_t tiles, std::uint32_t hot,
                                        std::uint32_t per_hot, std::uint32_t background,
                                        std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> tile(0, tiles - 1), words(1, 64);
  ExchangePhase phase;
  phase.tiles = tiles;
  auto add = [&](std::uint32_t source, std::uint32_t destination) {
    if (source == destination) destination = (destination + 1) % tiles;
    phase.transfers.push_back(Transfer{source, {destination}, words(random), 0, {}});
  };
  for (std::uint32_t h = 0; h < hot; ++h)
    for (std::uint32_t i = 0; i < per_hot; ++i) add(tile(random), (h * 97) % tiles);
  for (std::uint32_t i = 0; i < background; ++i) add(tile(random), tile(random));
  return phase;
}

/// Rings inside strided groups of `group` tiles: each member sends `words` to the next
/// `steps` members (a pipelined ring reduction).
inline ExchangePhase ring_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t words,
                                std::uint32_t steps) {
  ExchangePhase phase;
  phase.tiles = tiles;
  const std::uint32_t groups = tiles / group;
  for (std::uint32_t g = 0; g < groups; ++g)
    for (std::uint32_t m = 0; m < group; ++m)
      for (std::uint32_t s = 1; s <= steps; ++s)
        phase.transfers.push_back(
            Transfer{g + m * groups, {g + ((m + s) % group) * groups}, words, 0, {}});
  return phase;
}

}  // namespace tessera::testing
