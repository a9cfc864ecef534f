// Tests of select-finalist's capacity check: refusals before planning, with the numbers; no false refusal.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "pass_bench.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::PassBench;
using tessera::testing::TempDir;

namespace {

/// One dense layer: x [rows, width] times w [width, width] plus b, of `dtype` weights.
std::string layer_model(const TempDir& dir, std::uint32_t rows, std::uint32_t width, const char* dtype = "float32") {
  return dir.write("big.yaml", fmt::format("model: big\nseed: 3\ntensors:\n"
                                           "  - {{name: x, shape: [{0}, {1}], kind: input}}\n"
                                           "  - {{name: w, shape: [{1}, {1}], dtype: {2}, kind: weight, scale: 0.01}}\n"
                                           "  - {{name: b, shape: [{1}], dtype: {2}, kind: weight}}\n"
                                           "ops:\n"
                                           "  - {{op: matmul, inputs: [x, w], output: h}}\n"
                                           "  - {{op: add, inputs: [h, b], output: y}}\n"
                                           "outputs: [y]\n",
                                           rows, width, dtype));
}

/// Runs lower-mid and select-finalist on t16 (16 tiles: 6029312 interleaved bytes, 4194304 standard).
Status plan_on_t16(PassBench& bench) {
  REQUIRE(bench.run("lower-mid").ok);
  return bench.run("select-finalist");
}

}  // namespace

TEST_CASE("select-finalist refuses weights far larger than the target before planning, with the numbers",
          "[select-finalist][capacity]") {
  TempDir dir;
  PassBench bench(layer_model(dir, 2, 4096), config_path("targets/t16.yaml"));
  const Status status = plan_on_t16(bench);
  REQUIRE_FALSE(status.ok);
  const std::string& message = status.message;
  CHECK_THAT(message, Catch::Contains("big.yaml: model does not fit on target 't16' ('big')"));
  // w: 4096 x 4096 x 4 bytes, b: 4096 x 4; dense weights may live in either region.
  CHECK_THAT(message, Catch::Contains("weights: 67125248 bytes (64.0 MiB)\n"));
  CHECK_THAT(message, Catch::Contains("interleaved region 16 x 376832 = 6029312 bytes"));
  CHECK_THAT(message, Catch::Contains("standard region 16 x 262144 = 4194304 bytes"));
  CHECK_THAT(message, Catch::Contains("10223616 bytes (9.8 MiB) in all"));
  CHECK_THAT(message, Catch::Contains("full: the whole memory (both regions): the weights and the live activations "
                                      "need 67190784 bytes, 6.57x what it holds"));
  // Halved they are 33562624 bytes: still 3.29x.
  CHECK_THAT(message, Catch::Contains("would make the weights 33562624 bytes (32.0 MiB): still 3.29x what fits"));
  CHECK_THAT(message, Catch::Contains("7 chips' worth of 't16'"));
  CHECK_THAT(message, Catch::Contains("a smaller batch would not: the weights alone do not fit"));
  // Refused before any op was planned.
  CHECK(bench.log_lines("selected operator plan").empty());
  CHECK(bench.log_lines("screened operator plans").empty());
}

TEST_CASE("select-finalist's refusal says when float16 weights would fit", "[select-finalist][capacity]") {
  TempDir dir;
  // 2048 x 2048 float32 = 16777216 bytes > 10223616 in both regions; as float16, 8388608 fits.
  PassBench bench(layer_model(dir, 2, 2048), config_path("targets/t16.yaml"));
  const Status status = plan_on_t16(bench);
  REQUIRE_FALSE(status.ok);
  CHECK_THAT(status.message, Catch::Contains("would make the weights 8392704 bytes (8.0 MiB): that would fit"));
  CHECK_THAT(status.message, Catch::Contains("2 chips' worth of 't16'"));

  // Declared float16, the same layer is not refused by the capacity check.
  TempDir half_dir;
  PassBench half(layer_model(half_dir, 2, 2048, "float16"), config_path("targets/t16.yaml"));
  (void)plan_on_t16(half);
  CHECK(half.log_lines("capacity check passed weight_bytes=8392704 ").size() == 1);
}

TEST_CASE("select-finalist's refusal of activations too large for the target proposes a smaller batch",
          "[select-finalist][capacity]") {
  TempDir dir;
  // x and h [32768, 64] float32 are 8 MiB each and live together at the matmul: 16 MiB > 9.75 MiB.
  PassBench bench(layer_model(dir, 32768, 64), config_path("targets/t16.yaml"));
  const Status status = plan_on_t16(bench);
  REQUIRE_FALSE(status.ok);
  const std::string& message = status.message;
  CHECK_THAT(message, Catch::Contains("activations: at least 16777216 bytes (16.0 MiB) live at once, at op 0"));
  CHECK_THAT(message, Catch::Contains("full: the whole memory (both regions)"));
  // (10223616 - 16640 bytes of weights) / 16777216 = 0.608: about 19935 of the 32768 rows.
  CHECK_THAT(message, Catch::Contains("a batch about 0.61x this one would"));
  CHECK_THAT(message, Catch::Contains("input 'x' with at most about 19935 of its 32768 rows"));
  CHECK_THAT(message, Catch::Contains("float16 storage of the float32 matmul weights and biases would make the weights "
                                      "8320 bytes (0.0 MiB): still 1.64x what fits, not enough"));
}

TEST_CASE("select-finalist's capacity check passes models that fit and counts what must coexist",
          "[select-finalist][capacity]") {
  // mlp-small plans on t16: the check passes it and planning goes on.
  PassBench small(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(plan_on_t16(small).ok);
  REQUIRE(small.log_lines("capacity check passed").size() == 1);

  // A layer whose weights fill 41% of both regions: not refused by the check (the
  // planner decides), and x and y (8192 bytes each) live together at the dense op.
  TempDir dir;
  PassBench near(layer_model(dir, 2, 1024), config_path("targets/t16.yaml"));
  (void)plan_on_t16(near);
  CHECK(near.log_lines("capacity check passed weight_bytes=4198400 interleaved_weight_bytes=0 "
                       "live_activation_bytes=16384 ")
            .size() == 1);
}
