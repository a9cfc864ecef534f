// A schedule that loses one word must not pass: the validator refuses such a schedule from a
// plugin, and if a package carries one anyway, the simulator's numerical test fails.
#include <catch2/catch.hpp>

#include "run_command.hpp"
#include "temp_dir.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/run.hpp"
#include "tessera/target.hpp"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("package whose exchange drops words fails the numerical test", "[e2e][exchange]") {
  TempDir dir;
  const std::string package_file = (dir.path() / "small.tpkg").string();
  auto compiled = run_command({tessera_binary(), "compile", source_path("configs/models/mlp-small.yaml"), "-p",
                               pipeline_copy(dir, source_path("configs/pipelines/small.yaml"), "greedy", "greedy"),
                               "-o", package_file});
  REQUIRE(compiled.exit_code == 0);
  Package package = read_package(package_file);
  runtime::RunOptions options;
  options.lock_path = (dir.path() / "lock").string();
  REQUIRE(runtime::run_package(package, options).passed());

  // Drop the last word of every multi-word send of the last exchange (the final layer's
  // partial sums: every word lands in an output, and a relu may hide any one of them), and
  // the same word at its receivers.
  bool dropped = false;
  for (std::size_t s = package.superstep_labels.size(); s-- > 0 && !dropped;) {
    for (TileImage& sender : package.tiles) {
      for (TileSend& send : sender.supersteps[s].sends) {
        if (send.words < 2) continue;
        int receivers = 0;
        for (TileImage& receiver : package.tiles)
          for (TileReceive& r : receiver.supersteps[s].receives)
            if (r.sender == sender.tile && r.words == send.words &&
                r.arrival == send.cycle + package.target.latency(sender.tile, receiver.tile)) {
              --r.words;
              ++receivers;
            }
        REQUIRE(receivers > 0);
        --send.words;
        dropped = true;
      }
    }
  }
  REQUIRE(dropped);
  runtime::RunResult result = runtime::run_package(package, options);
  CHECK_FALSE(result.passed());
  CHECK(result.numerics.max_abs_error > result.numerics.tolerance);
}
