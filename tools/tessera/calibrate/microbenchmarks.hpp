// The program `tessera calibrate` runs on the simulator: every codelet at the feature
// table's shapes, exchange phases of several shapes, and an empty superstep (a barrier).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/program.hpp"

namespace tessera {
struct Target;
}

namespace tessera::cli {

/// One codelet call measured alone on its tile.
struct CodeletProbe {
  Codelet codelet = Codelet::copy;
  std::vector<std::uint32_t> params;
  std::uint32_t superstep = 0, tile = 0;
};

/// One superstep whose copies form an exchange phase of a named shape.
struct ExchangeProbe {
  std::string shape;  ///< e.g. "allgather k=16 words=8"
  std::uint32_t superstep = 0;
};

struct Microbenchmarks {
  Program program;  ///< planned (buffers, compute, copies): place-storage comes next
  std::vector<CodeletProbe> codelets;
  std::vector<ExchangeProbe> exchanges;
  std::uint32_t barrier_superstep = 0;
};

/// Builds the microbenchmark program for `target`. Throws Error naming a codelet of the set
/// that has no line in the calibrated cost model's feature table.
Microbenchmarks build_microbenchmarks(const Target& target);

}  // namespace tessera::cli
