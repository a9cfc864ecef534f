// `tessera cycles --target T CODELET ...`: the simulator's exact charge for one codelet call.
#pragma once
#include <cstdint>
#include <string>

namespace CLI {
class App;
}

namespace tessera::cli {

struct CyclesRequest {
  std::string target;
  std::string codelet;        ///< matmul, matmul_transposed, relu, add, copy, bias_add, softmax, ...
  std::string dtype = "f32";  ///< f16: half weights (matmul_half, bias_add_half)
  std::string orientation = "auto";
  std::uint32_t m = 0, k = 0, n = 0, count = 0, rows = 0, cols = 0, parts = 0;
  bool relu = false;
  /// conv, max_pool, avg_pool: a whole layer on one tile, a call per image.
  std::uint32_t batch = 0, in_channels = 0, height = 0, width = 0, out_channels = 0, stride = 1, dilation = 1,
                groups = 1, pad = 0;
  std::string kernel;  ///< KHxKW, or K for a square kernel
};

/// Adds the subcommand and its options, bound to `request`.
CLI::App* add_cycles_command(CLI::App& app, CyclesRequest& request);
/// Prints `codelet=NAME <params> path=.. cycles=N mac_floor=N load_floor=N`; throws Error on a
/// shape the codelet does not take.
int cycles_command(const CyclesRequest& request);

}  // namespace tessera::cli
