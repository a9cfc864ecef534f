// Test helpers for exchange phases: seeded random and skewed phases, shipped targets.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tessera/exchange.hpp"
#include "tessera/target.hpp"

namespace tessera::testing {

inline Target shipped_target(const std::string& name) {
  return load_target(std::string(TESSERA_SOURCE_DIR) + "/configs/targets/" + name + ".yaml");
}

struct RandomPhaseShape {
  std::uint32_t tiles = 1472;
  std::uint32_t transfers = 5000;
  std::uint32_t max_words = 64;
  double multicast_fraction = 0.0;  ///< share of transfers with 2..max_fanout destinations
  std::uint32_t max_fanout = 4;
};

/// A reproducible random phase: uniform sources and destinations, 1..max_words words.
inline ExchangePhase random_phase(const RandomPhaseShape& shape, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> tile(0, shape.tiles - 1);
  std::uniform_int_distribution<std::uint32_t> words(1, shape.max_words);
  std::uniform_int_distribution<std::uint32_t> fanout(2, std::max<std::uint32_t>(2, shape.max_fanout));
  std::bernoulli_distribution multicast(shape.multicast_fraction);
  ExchangePhase phase;
  phase.tiles = shape.tiles;
  phase.transfers.reserve(shape.transfers);
  for (std::uint32_t i = 0; i < shape.transfers; ++i) {
    Transfer transfer;
    transfer.source = tile(random);
    const std::uint32_t wanted = multicast(random) ? fanout(random) : 1;
    while (transfer.destinations.size() < wanted) {
      const std::uint32_t destination = tile(random);
      if (destination != transfer.source &&
          std::find(transfer.destinations.begin(), transfer.destinations.end(), destination) ==
              transfer.destinations.end())
        transfer.destinations.push_back(destination);
    }
    transfer.words = words(random);
    phase.transfers.push_back(std::move(transfer));
  }
  return phase;
}

/// A phase whose load is concentrated: `hot` tiles send and receive a large share of the
/// transfers, listed so that a port serving in phase order idles behind busy partners.
inline ExchangePhase skewed_phase(std::uint32_t tiles, std::uint32_t transfers, std::uint32_t hot,
                                  std::uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_int_distribution<std::uint32_t> any(0, tiles - 1), hot_tile(0, hot - 1);
  std::uniform_int_distribution<std::uint32_t> words(1, 32);
  std::bernoulli_distribution from_hot(0.5), to_hot(0.5);
  ExchangePhase phase;
  phase.tiles = tiles;
  for (std::uint32_t i = 0; i < transfers; ++i) {
    Transfer transfer;
    transfer.source = from_hot(random) ? hot_tile(random) : any(random);
    std::uint32_t destination = transfer.source;
    while (destination == transfer.source) destination = to_hot(random) ? hot_tile(random) : any(random);
    transfer.destinations = {destination};
    transfer.words = words(random);
    phase.transfers.push_back(std::move(transfer));
  }
  return phase;
}

}  // namespace tessera::testing
