// Targets built in code for exchange tests: no YAML file, only the fabric's figures.
#pragma once
#include <cstdint>
#include <string>

#include "tessera/target.hpp"

namespace tessera::testing {

/// The exchange figures a scheduler sees; everything else keeps a GC200 tile's memory.
struct Fabric {
  std::uint32_t tiles = 16;
  std::uint32_t tiles_per_column = 4;
  std::uint32_t base_latency = 0;  ///< cycles from send to arrival within a column
  double latency_per_column = 0;   ///< extra cycles per column of distance
  std::uint32_t switch_cost = 0;   ///< idle cycles for a receiver to change source
  bool multicast = true;
};

/// A target named `name` with `fabric`'s exchange and 624 KiB tiles (interleaved from 256 KiB).
Target fabric_target(const std::string& name, const Fabric& fabric);
/// No latency, no switch cost, multicast: the preemptive optimum is the endpoint bound.
Target ideal_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column);
/// t1472's fabric (latency 6 + 1 per column, switch cost 1, multicast) on `tiles` tiles.
Target latency_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column);
/// The same target without multicast, named `<name>-unicast`.
Target without_multicast(Target target);

}  // namespace tessera::testing
