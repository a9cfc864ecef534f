// The phase zoo's generators. Each keeps the exact random stream of the copy it replaced, so
// the figures measured on these phases (tests' bounds, check-plugin's output) still hold.
#include "tessera/testing/phases.hpp"

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "tessera/target.hpp"

namespace tessera::testing {
namespace {

// splitmix64: unlike std's distributions, the same numbers with every standard library.
class SplitMix64 {
public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint32_t below(std::uint32_t bound) { return static_cast<std::uint32_t>(next() % bound); }

private:
  std::uint64_t state_;
};

}  // namespace

Transfer transfer(std::uint32_t source, std::vector<std::uint32_t> destinations, std::uint32_t words) {
  Transfer made;
  made.source = source;
  made.destinations = std::move(destinations);
  made.words = words;
  made.destination_addresses.assign(made.destinations.size(), 0);
  return made;
}

ExchangePhase phase_of(std::uint32_t tiles, std::vector<Transfer> transfers) {
  ExchangePhase phase;
  phase.tiles = tiles;
  phase.transfers = std::move(transfers);
  return phase;
}

ExchangePhase empty_phase(std::uint32_t tiles) { return phase_of(tiles); }

ExchangePhase single_transfer_phase(std::uint32_t tiles, std::uint32_t source, std::uint32_t destination,
                                    std::uint32_t words) {
  return phase_of(tiles, {transfer(source, {destination}, words)});
}

ExchangePhase zero_word_phase() { return phase_of(3, {transfer(0, {1}, 0), transfer(1, {2}, 5)}); }

ExchangePhase all_to_one_phase(std::uint32_t tiles) {
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t source = 1; source < tiles; ++source)
    phase.transfers.push_back(transfer(source, {0}, 8 + 13 * source % 61));
  return phase;
}

ExchangePhase one_to_all_phase(std::uint32_t tiles) {
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t destination = 1; destination < tiles; ++destination)
    phase.transfers.push_back(transfer(0, {destination}, 8 + 29 * destination % 53));
  return phase;
}

ExchangePhase all_to_all_phase(std::uint32_t tiles) {
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t source = 0; source < tiles; ++source)
    for (std::uint32_t destination = 0; destination < tiles; ++destination)
      if (source != destination)
        phase.transfers.push_back(transfer(source, {destination}, 1 + (7 * source + 3 * destination) % 13));
  return phase;
}

ExchangePhase overlapping_multicast_phase(std::uint32_t tiles) {
  ExchangePhase phase = phase_of(tiles);
  std::vector<std::uint32_t> everyone;
  for (std::uint32_t tile = 1; tile < tiles; ++tile) everyone.push_back(tile);
  phase.transfers.push_back(transfer(0, everyone, 64));
  phase.transfers.push_back(transfer(1, {2, 3, 4}, 32));
  phase.transfers.push_back(transfer(2, {0, 5, 9}, 16));
  phase.transfers.push_back(transfer(5, {0, 1}, 48));
  phase.transfers.push_back(transfer(1, {6, 7}, 8));
  phase.transfers.push_back(transfer(9, {10}, 24));
  return phase;
}

ExchangePhase huge_words_phase() {
  constexpr std::uint32_t kHuge = 1u << 24;
  return phase_of(4, {transfer(0, {1}, kHuge), transfer(1, {2}, kHuge), transfer(2, {0}, kHuge),
                      transfer(3, {0}, kHuge), transfer(3, {1, 2}, kHuge)});
}

ExchangePhase ring_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t words, std::uint32_t steps) {
  ExchangePhase phase = phase_of(tiles);
  const std::uint32_t groups = tiles / group;
  for (std::uint32_t g = 0; g < groups; ++g)
    for (std::uint32_t m = 0; m < group; ++m)
      for (std::uint32_t s = 1; s <= steps; ++s)
        phase.transfers.push_back(transfer(g + m * groups, {g + ((m + s) % group) * groups}, words));
  return phase;
}

ExchangePhase per_tile_random_phase(std::uint32_t tiles, std::uint32_t per_tile, std::uint32_t max_words,
                                    bool multicast, std::uint64_t seed) {
  SplitMix64 random(seed);
  ExchangePhase phase = phase_of(tiles);
  if (tiles < 2) return phase;
  for (std::uint32_t source = 0; source < tiles; ++source) {
    for (std::uint32_t k = 0; k < per_tile; ++k) {
      std::uint32_t count = 1;
      if (multicast && random.below(8) == 0) count = std::min(tiles - 1, 2 + random.below(7));
      std::vector<std::uint32_t> destinations;
      while (destinations.size() < count) {
        const std::uint32_t destination = random.below(tiles);
        if (destination != source &&
            std::find(destinations.begin(), destinations.end(), destination) == destinations.end())
          destinations.push_back(destination);
      }
      phase.transfers.push_back(transfer(source, std::move(destinations), 1 + random.below(max_words)));
    }
  }
  return phase;
}

ExchangePhase random_phase(const RandomPhaseShape& shape, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> tile(0, shape.tiles - 1);
  std::uniform_int_distribution<std::uint32_t> words(1, shape.max_words);
  std::uniform_int_distribution<std::uint32_t> fanout(2, std::max<std::uint32_t>(2, shape.max_fanout));
  std::bernoulli_distribution multicast(shape.multicast_fraction);
  ExchangePhase phase = phase_of(shape.tiles);
  phase.transfers.reserve(shape.transfers);
  for (std::uint32_t i = 0; i < shape.transfers; ++i) {
    const std::uint32_t source = tile(random);
    const std::uint32_t wanted = multicast(random) ? fanout(random) : 1;
    std::vector<std::uint32_t> destinations;
    while (destinations.size() < wanted) {
      const std::uint32_t destination = tile(random);
      if (destination != source &&
          std::find(destinations.begin(), destinations.end(), destination) == destinations.end())
        destinations.push_back(destination);
    }
    phase.transfers.push_back(transfer(source, std::move(destinations), words(random)));
  }
  return phase;
}

ExchangePhase skewed_phase(std::uint32_t tiles, std::uint32_t transfers, std::uint32_t hot, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> any(0, tiles - 1), hot_tile(0, hot - 1);
  std::uniform_int_distribution<std::uint32_t> words(1, 32);
  std::bernoulli_distribution from_hot(0.5), to_hot(0.5);
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t i = 0; i < transfers; ++i) {
    const std::uint32_t source = from_hot(random) ? hot_tile(random) : any(random);
    std::uint32_t destination = source;
    while (destination == source) destination = to_hot(random) ? hot_tile(random) : any(random);
    phase.transfers.push_back(transfer(source, {destination}, words(random)));
  }
  return phase;
}

ExchangePhase permutation_phase(std::uint32_t tiles, std::uint32_t count, std::uint32_t min_words,
                                std::uint32_t max_words, std::uint64_t seed, std::uint32_t parts) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(min_words, max_words);
  ExchangePhase phase = phase_of(tiles);
  std::vector<std::uint32_t> image(tiles);
  for (std::uint32_t p = 0; p < count; ++p) {
    std::iota(image.begin(), image.end(), 0u);
    std::shuffle(image.begin(), image.end(), random);
    // Swapping a fixed point with its neighbour keeps a permutation and removes the point.
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      if (image[tile] == tile) std::swap(image[tile], image[(tile + 1) % tiles]);
    std::vector<std::uint32_t> sizes(parts);
    for (std::uint32_t& size : sizes) size = words(random);
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      for (std::uint32_t size : sizes) phase.transfers.push_back(transfer(tile, {image[tile]}, size));
  }
  return phase;
}

ExchangePhase group_all_to_all_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t words, bool strided,
                                     std::uint32_t max_words, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> size(words, std::max(words, max_words));
  ExchangePhase phase = phase_of(tiles);
  const std::uint32_t groups = tiles / group;
  for (std::uint32_t g = 0; g < groups; ++g) {
    auto member = [&](std::uint32_t m) { return strided ? g + m * groups : g * group + m; };
    for (std::uint32_t a = 0; a < group; ++a)
      for (std::uint32_t b = 0; b < group; ++b)
        if (a != b) phase.transfers.push_back(transfer(member(a), {member(b)}, size(random)));
  }
  return phase;
}

ExchangePhase reduce_scatter_phase(std::uint32_t tiles, std::uint32_t group, std::uint32_t parts, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(1, 40);
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t base = 0; base + group <= tiles; base += group)
    for (std::uint32_t source = base; source < base + group; ++source)
      for (std::uint32_t destination = base; destination < base + group; ++destination)
        if (destination != source)
          for (std::uint32_t part = 0; part < parts; ++part)
            phase.transfers.push_back(transfer(source, {destination}, words(random)));
  return phase;
}

ExchangePhase hot_receiver_phase(std::uint32_t tiles, std::uint32_t hot, std::uint32_t per_hot,
                                 std::uint32_t background, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> tile(0, tiles - 1), words(1, 64);
  ExchangePhase phase = phase_of(tiles);
  auto add = [&](std::uint32_t source, std::uint32_t destination) {
    if (source == destination) destination = (destination + 1) % tiles;
    phase.transfers.push_back(transfer(source, {destination}, words(random)));
  };
  for (std::uint32_t h = 0; h < hot; ++h)
    for (std::uint32_t i = 0; i < per_hot; ++i) add(tile(random), (h * 97) % tiles);
  for (std::uint32_t i = 0; i < background; ++i) add(tile(random), tile(random));
  return phase;
}

ExchangePhase scatter_phase(std::uint32_t tiles, std::uint32_t fanout, std::uint32_t min_words, std::uint32_t max_words,
                            std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> words(min_words, max_words);
  ExchangePhase phase = phase_of(tiles);
  phase.transfers.reserve(std::size_t{tiles} * fanout);
  std::vector<std::uint32_t> others(tiles);
  for (std::uint32_t source = 0; source < tiles; ++source) {
    std::iota(others.begin(), others.end(), 0u);
    std::swap(others[source], others.back());
    for (std::uint32_t k = 0; k < fanout; ++k) {  // partial Fisher-Yates over the other tiles
      std::uniform_int_distribution<std::uint32_t> pick(k, tiles - 2);
      std::swap(others[k], others[pick(random)]);
      phase.transfers.push_back(transfer(source, {others[k]}, words(random)));
    }
  }
  return phase;
}

ExchangePhase broadcast_phase(std::uint32_t tiles, std::uint32_t count, std::uint32_t max_words, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  ExchangePhase phase = phase_of(tiles);
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto source = static_cast<std::uint32_t>(random() % tiles);
    const auto words = 1 + static_cast<std::uint32_t>(random() % max_words);
    std::vector<std::uint32_t> everyone_else;
    for (std::uint32_t tile = 0; tile < tiles; ++tile)
      if (tile != source) everyone_else.push_back(tile);
    phase.transfers.push_back(transfer(source, std::move(everyone_else), words));
  }
  return phase;
}

ExchangePhase shuffled(ExchangePhase phase, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::shuffle(phase.transfers.begin(), phase.transfers.end(), random);
  return phase;
}

std::vector<NamedPhase> phase_zoo(const Target& target, std::uint64_t seed) {
  const std::uint32_t tiles = target.tiles;
  std::vector<NamedPhase> zoo = {{"empty", empty_phase(tiles)}};
  if (tiles < 2) return zoo;
  // Small phases keep the zoo fast on a 1472-tile target: the shapes matter, not the size.
  const std::uint32_t dense = std::min<std::uint32_t>(tiles, 16);
  zoo.push_back({"single transfer", single_transfer_phase(tiles, 0, tiles - 1, 100)});
  zoo.push_back({"all-to-one", all_to_one_phase(dense)});
  zoo.push_back({"one-to-all", one_to_all_phase(dense)});
  zoo.push_back({"all-to-all", all_to_all_phase(dense)});
  zoo.push_back({"permutations", permutation_phase(tiles, 4, 1, 64, seed)});
  zoo.push_back({"skewed", skewed_phase(tiles, 4 * tiles, std::max<std::uint32_t>(1, tiles / 64), seed)});
  zoo.push_back({"per-tile random", per_tile_random_phase(tiles, 4, 256, target.multicast, seed)});
  if (tiles >= 3) zoo.push_back({"zero words", zero_word_phase()});
  if (tiles >= 4 && target.multicast) zoo.push_back({"huge words", huge_words_phase()});  // one is a multicast
  if (target.multicast && tiles >= 11) zoo.push_back({"overlapping multicast", overlapping_multicast_phase(dense)});
  if (target.multicast && tiles >= 3) {  // a multicast needs two destinations besides its source
    RandomPhaseShape shape;
    shape.tiles = tiles;
    shape.transfers = 4 * tiles;
    shape.multicast_fraction = 0.25;
    shape.max_fanout = std::min<std::uint32_t>(6, tiles - 1);
    zoo.push_back({"random multicast", random_phase(shape, seed)});
  }
  return zoo;
}

}  // namespace tessera::testing
