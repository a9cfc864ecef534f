// The shipped targets (configs/targets/NAME.yaml) of this source tree.
#pragma once
#include <string>

#include "tessera/target.hpp"

namespace tessera::testing {

inline Target shipped_target(const std::string& name) {
  return load_target(std::string(TESSERA_SOURCE_DIR) + "/configs/targets/" + name + ".yaml");
}

}  // namespace tessera::testing
