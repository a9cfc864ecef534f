// Target descriptions: the shipped targets load, bad ones fail with file:line:column.
#include <catch2/catch.hpp>

#include "tessera/diagnostic.hpp"
#include "tessera/target.hpp"
#include "temp_dir.hpp"

using namespace tessera;
using tessera::testing::source_path;
using tessera::testing::TempDir;

TEST_CASE("target t1472 loads with the Mk2 figures", "[target]") {
  Target t = load_target(source_path("configs/targets/t1472.yaml"));
  CHECK(t.name == "t1472");
  CHECK(t.tiles == 1472);
  CHECK(t.memory_bytes == 638976);
  CHECK(t.memory_element_bytes == 16384);
  CHECK(t.multicast);
  CHECK(t.latency(0, 1) == t.exchange_base_latency);          // same column
  CHECK(t.latency(0, 1471) == t.exchange_base_latency + 22);  // 22 columns apart
  CHECK(t.latency(1471, 0) == t.latency(0, 1471));
}

TEST_CASE("target ideal has no latency and no switch cost", "[target]") {
  Target t = load_target(source_path("configs/targets/t1472-ideal.yaml"));
  CHECK(t.latency(0, 1471) == 0);
  CHECK(t.switch_cost == 0);
  CHECK(t.hash() != load_target(source_path("configs/targets/t1472.yaml")).hash());
}

TEST_CASE("target hash is stable and sensitive", "[target]") {
  Target a = load_target(source_path("configs/targets/t16.yaml"));
  Target b = a;
  CHECK(a.hash() == b.hash());
  b.sync_cycles += 1;
  CHECK(a.hash() != b.hash());
}

TEST_CASE("target errors name the file, line and key", "[target]") {
  TempDir dir;
  auto file = dir.write("bad.yaml", "name: x\ntiles: 4\nmemory:\n  bytes_per_tile: 1024\n  bytez: 3\n");
  REQUIRE_THROWS_AS(load_target(file), Error);
  try {
    load_target(file);
  } catch (const Error& e) {
    std::string message = e.what();
    CHECK(message.find(file + ":5:3") != std::string::npos);
    CHECK(message.find("unknown key 'bytez'") != std::string::npos);
  }
  auto negative = dir.write("neg.yaml", "name: x\ntiles: -4\nmemory: {bytes_per_tile: 1024}\n");
  CHECK_THROWS_WITH(load_target(negative),
                    Catch::Contains(negative + ":2:8") && Catch::Contains("non-negative integer"));
  CHECK_THROWS_WITH(load_target(dir.path().string() + "/missing.yaml"), Catch::Contains("file not found"));
  auto syntax = dir.write("syntax.yaml", "name: [x\n");
  CHECK_THROWS_WITH(load_target(syntax), Catch::Contains(syntax + ":2") && Catch::Contains("YAML syntax error"));
}
