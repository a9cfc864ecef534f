// The local executor's memory gate and the expected peak of a simulator run.
#include <catch2/catch.hpp>

#include "executor_local.hpp"
#include "temp_dir.hpp"
#include "tessera/target.hpp"

using namespace tessera::ab;
using tessera::testing::TempDir;

TEST_CASE("the memory gate admits runs while their expected peaks fit", "[ab][executor]") {
  MemoryGate gate(100);
  CHECK(gate.admits(60));
  gate.acquire(60);
  CHECK(gate.admits(40));
  CHECK_FALSE(gate.admits(41));  // 60 + 41 would exceed the budget
  gate.acquire(40);
  gate.release(60);
  CHECK(gate.admits(60));
  gate.release(40);
  CHECK(gate.admits(500));  // nothing running: a run larger than the budget still goes
}

TEST_CASE("a run's expected peak is a measured run of its model, else the target's SRAM", "[ab][executor]") {
  TempDir dir;
  const ResultsDir results((dir.path() / "results").string());
  Manifest manifest;
  manifest.entries.push_back({"m", "m.yaml", "t.yaml", "1", "2"});
  manifest.arms.push_back({"A", "", "arms/A.yaml", "f", {}, {}, ""});
  manifest.arms.push_back({"B", "", "arms/B.yaml", "g", {}, {}, ""});
  manifest.repeat = 2;
  tessera::Target target;
  target.tiles = 16;
  target.memory_bytes = 64 * 1024;
  CHECK(expected_run_kib(results, manifest, manifest.entries[0], target) == 16 * 64);

  Record record;
  record.model = "m";
  record.arm = "B";
  record.run.performed = true;
  record.run.process.peak_rss_kib = 5000;
  results.write_record(record);
  record.arm = "A";
  record.run.process.peak_rss_kib = 7000;
  results.write_record(record);
  CHECK(expected_run_kib(results, manifest, manifest.entries[0], target) == 7000);
}
