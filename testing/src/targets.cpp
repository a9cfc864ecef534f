// Targets built in code for exchange tests.
#include "tessera/testing/targets.hpp"

#include <utility>

namespace tessera::testing {

Target fabric_target(const std::string& name, const Fabric& fabric) {
  Target target;
  target.name = name;
  target.source_file = "(built by tessera::testing)";
  target.tiles = fabric.tiles;
  target.tiles_per_column = fabric.tiles_per_column;
  target.memory_bytes = 638976;
  target.interleaved_start = 262144;
  target.exchange_base_latency = fabric.base_latency;
  target.exchange_latency_per_column = fabric.latency_per_column;
  target.switch_cost = fabric.switch_cost;
  target.multicast = fabric.multicast;
  return target;
}

Target ideal_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column) {
  return fabric_target(name, Fabric{tiles, tiles_per_column, 0, 0.0, 0, true});
}

Target latency_target(const std::string& name, std::uint32_t tiles, std::uint32_t tiles_per_column) {
  return fabric_target(name, Fabric{tiles, tiles_per_column, 6, 1.0, 1, true});
}

Target without_multicast(Target target) {
  target.multicast = false;
  target.name += "-unicast";
  return target;
}

}  // namespace tessera::testing
