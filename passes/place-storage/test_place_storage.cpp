// Tests of the place-storage pass plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "pass_bench.hpp"
#include "tessera/lowering.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::log_field;
using tessera::testing::PassBench;

namespace {

bool live_together(const Buffer& a, const Buffer& b) { return a.first_use <= b.last_use && b.first_use <= a.last_use; }
bool share_bytes(const Buffer& a, const Buffer& b) {
  return a.offset < b.offset + std::int64_t{b.bytes} && b.offset < a.offset + std::int64_t{a.bytes};
}

/// Every buffer placed inside its region, aligned, and apart from every buffer live with it.
/// Makes the weights interleaved-only (the planner makes them standard data, which place-storage
/// may move), so a shrunken interleaved region overflows with named weight buffers.
void pin_weights_interleaved(Program& program) {
  for (Buffer& buffer : program.buffers)
    if (buffer.name.find(".w") != std::string::npos) buffer.region = Region::interleaved;
}

void check_placement(const Program& program, const Target& target) {
  for (const Buffer& buffer : program.buffers) {
    REQUIRE(buffer.offset != kUnplaced);
    CHECK(buffer.offset % buffer.alignment == 0);
    const std::uint64_t low = buffer.region == Region::interleaved ? target.interleaved_start : 0;
    const std::uint64_t high = buffer.region == Region::interleaved ? target.memory_bytes : target.interleaved_start;
    CHECK(std::uint64_t(buffer.offset) >= low);
    CHECK(std::uint64_t(buffer.offset) + buffer.bytes <= high);
  }
  for (std::size_t i = 0; i < program.buffers.size(); ++i)
    for (std::size_t j = i + 1; j < program.buffers.size(); ++j) {
      const Buffer &a = program.buffers[i], &b = program.buffers[j];
      if (a.tile != b.tile || !live_together(a, b)) continue;
      INFO(a.name << " and " << b.name << " on tile " << a.tile);
      CHECK_FALSE(share_bytes(a, b));
    }
}

Buffer buffer(const std::string& name, std::uint32_t bytes, Region region, std::uint32_t first, std::uint32_t last,
              std::uint32_t alignment = 8) {
  Buffer b;
  b.name = name;
  b.bytes = bytes;
  b.region = region;
  b.first_use = first;
  b.last_use = last;
  b.alignment = alignment;
  return b;
}

}  // namespace

TEST_CASE("place-storage keeps simultaneously live buffers apart on mlp-small", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("place-storage").ok);
  check_placement(bench.state.program, bench.state.target);
  CHECK(verify_program(bench.state.program, bench.state.target) == "");
  const auto lines = bench.log_lines("placed storage");
  REQUIRE(lines.size() == 1);
  CHECK(log_field(lines[0], "tiles") == 16);
  CHECK(log_field(lines[0], "peak_total_bytes") == bench.state.estimates.peak_tile_bytes);
  CHECK(log_field(lines[0], "peak_total_bytes") >= log_field(lines[0], "peak_interleaved_bytes"));
  CHECK(log_field(lines[0], "peak_total_bytes") >= log_field(lines[0], "mean_tile_bytes"));
  CHECK(log_field(lines[0], "peak_interleaved_bytes") > 0);
}

TEST_CASE("place-storage shares memory between buffers never live together", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.facts.insert({facts::canonical, facts::plan});  // a plan made by hand
  Program& program = bench.state.program;
  program.supersteps.resize(4);
  program.buffers = {buffer("early", 4000, Region::standard, 0, 1), buffer("late", 4000, Region::standard, 2, 3),
                     buffer("across", 1000, Region::standard, 1, 2), buffer("aligned", 100, Region::standard, 0, 3, 64),
                     buffer("fast", 256, Region::interleaved, 0, 3, 16)};
  REQUIRE(bench.run("place-storage").ok);
  check_placement(program, bench.state.target);
  // The largest buffers go first, at the bottom: "late" reuses "early"'s bytes.
  CHECK(program.buffers[0].offset == 0);
  CHECK(program.buffers[1].offset == 0);
  CHECK(program.buffers[2].offset == 4000);
  CHECK(program.buffers[3].offset == 5056);  // first multiple of 64 after 4000 + 1000
  CHECK(program.buffers[4].offset == std::int64_t(bench.state.target.interleaved_start));
  CHECK(bench.state.estimates.peak_tile_bytes == 5156 + 256);
}

TEST_CASE("place-storage moves the fewest standard buffers the interleaved region can take", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.facts.insert({facts::canonical, facts::plan});  // a plan made by hand
  Target& target = bench.state.target;
  target.interleaved_start = 8192;
  target.memory_bytes = 16384;
  Program& program = bench.state.program;
  program.supersteps.resize(1);
  // 12 KiB of standard data in an 8 KiB region: moving one buffer fits, moving all three
  // would overflow the interleaved region instead.
  program.buffers = {buffer("a", 4096, Region::standard, 0, 0), buffer("b", 4096, Region::standard, 0, 0),
                     buffer("c", 4096, Region::standard, 0, 0), buffer("fast", 1024, Region::interleaved, 0, 0, 16)};
  REQUIRE(bench.run("place-storage").ok);
  check_placement(program, target);
  int moved = 0;
  for (const Buffer& b : program.buffers)
    if (b.name != "fast") moved += b.region == Region::interleaved;
  CHECK(moved == 1);
}

TEST_CASE("place-storage logs a memory summary of the tiles' extents", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.facts.insert({facts::canonical, facts::plan});  // a plan made by hand
  Program& program = bench.state.program;
  program.supersteps.resize(2);
  Buffer standard = buffer("standard", 4000, Region::standard, 0, 1),
         fast = buffer("fast", 256, Region::interleaved, 0, 1);
  // Tile 1 holds 580,000 bytes: over 90% of its 638,976.
  Buffer full_standard = buffer("full-standard", 250000, Region::standard, 0, 1);
  Buffer full_fast = buffer("full-fast", 330000, Region::interleaved, 0, 1);
  full_standard.tile = full_fast.tile = 1;
  program.buffers = {standard, fast, full_standard, full_fast};
  REQUIRE(bench.run("place-storage").ok);
  check_placement(program, bench.state.target);
  const auto lines = bench.log_lines("memory summary ");
  REQUIRE(lines.size() == 1);
  CHECK(log_field(lines[0], "max_tile_bytes") == 580000);
  CHECK(log_field(lines[0], "mean_tile_bytes") == (4256 + 580000) / 16);
  CHECK(log_field(lines[0], "tiles_over_90_percent") == 1);
  CHECK(log_field(lines[0], "peak_standard_bytes") == 250000);
  CHECK(log_field(lines[0], "peak_interleaved_bytes") == 330000);
  CHECK(log_field(lines[0], "max_tile") == 1);
  CHECK(bench.state.estimates.peak_tile_bytes == 580000);
}

TEST_CASE("place-storage keeps a matmul's operands in different memory elements", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.facts.insert({facts::canonical, facts::plan});  // a plan made by hand
  Program& program = bench.state.program;
  program.supersteps.resize(1);
  program.buffers = {buffer("x", 1000, Region::interleaved, 0, 0, 16),
                     buffer("w", 20000, Region::interleaved, 0, 0, 16),
                     buffer("partial", 80, Region::interleaved, 0, 0, 16)};
  program.supersteps[0].compute.push_back({0, Codelet::matmul, {{0, 0}, {1, 0}, {2, 0}}, {1, 250, 20, 0}});
  const Status placed = bench.run("place-storage");
  INFO(placed.message);
  REQUIRE(placed.ok);
  check_placement(program, bench.state.target);
  const std::int64_t start = std::int64_t(bench.state.target.interleaved_start), element = 16384;
  // "w" fills elements 16 and 17 in part; "x" starts at element 18, "partial" packs after "w".
  CHECK(program.buffers[1].offset == start);
  CHECK(program.buffers[0].offset == start + 2 * element);
  CHECK(program.buffers[2].offset == start + 20000);
}

TEST_CASE("place-storage never puts a planned matmul's operands in one memory element", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("place-storage").ok);
  const Program& program = bench.state.program;
  const std::int64_t element = bench.state.target.memory_element_bytes;
  std::size_t matmuls = 0;
  for (const Superstep& step : program.supersteps)
    for (const CodeletCall& call : step.compute) {
      if (!is_matmul(call.codelet)) continue;  // matmul, matmul_transposed, matmul_half pair their loads
      ++matmuls;
      const Buffer &a = program.buffers[call.operands[0].buffer], &b = program.buffers[call.operands[1].buffer];
      INFO(a.name << " and " << b.name << " on tile " << a.tile);
      const bool apart = (a.offset + std::int64_t{a.bytes} - 1) / element < b.offset / element ||
                         (b.offset + std::int64_t{b.bytes} - 1) / element < a.offset / element;
      CHECK(apart);
    }
  CHECK(matmuls > 0);
}

TEST_CASE("place-storage reports every tile over with its largest buffers", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  // The same plan on a machine with only 4 KiB of interleaved memory per tile.
  Target& target = bench.state.target;
  target.memory_bytes = target.interleaved_start + 4096;
  pin_weights_interleaved(bench.state.program);
  std::vector<std::uint32_t> expected_over;
  for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
    std::uint64_t weights = 0;
    for (const Buffer& b : bench.state.program.buffers)
      if (b.tile == tile && b.region == Region::interleaved && b.name.find(".w") != std::string::npos)
        weights += b.bytes;
    if (weights > 4096) expected_over.push_back(tile);
  }
  REQUIRE_FALSE(expected_over.empty());
  const Status status = bench.run("place-storage");
  REQUIRE_FALSE(status.ok);
  CHECK_THAT(status.message, Catch::StartsWith("pass 'place-storage' failed: model does not fit: "));
  CHECK_THAT(status.message, Catch::Contains("over " + std::to_string(target.memory_bytes) + " bytes"));
  const std::uint64_t capacity = target.memory_bytes - target.interleaved_start;
  std::size_t detailed = 0;  // the worst three in full; the others in the ranges line
  for (std::uint32_t tile : expected_over) {
    // Each over tile: what it needs, by how much, and its largest tensor's buffers by name.
    std::uint64_t interleaved_bytes = 0, largest = 0;
    std::map<std::string, std::uint64_t> by_name;
    for (const Buffer& b : bench.state.program.buffers)
      if (b.tile == tile && b.region == Region::interleaved) {
        interleaved_bytes += b.bytes;  // all live at once here: weights, x chunk, partials
        largest = std::max(largest, by_name[b.name] += b.bytes);
      }
    std::string largest_name;
    for (const auto& [name, bytes] : by_name)
      if (bytes == largest && largest_name.empty()) largest_name = name;
    const std::string line_start = "\n  tile " + std::to_string(tile) + " needs ";
    const std::size_t at = status.message.find(line_start);
    if (at == std::string::npos) continue;
    ++detailed;
    const std::string line = status.message.substr(at + 1, status.message.find('\n', at + 1) - at - 1);
    INFO(line);
    CHECK_THAT(line, Catch::Contains("interleaved region "));
    CHECK_THAT(line, Catch::Contains(" of " + std::to_string(capacity) + " bytes ("));
    CHECK_THAT(line, Catch::Contains(largest_name + " " + std::to_string(largest) + " bytes ("));
    CHECK_THAT(line, Catch::Contains("peak live "));
    std::uint64_t needs = 0, over = 0;
    REQUIRE(std::sscanf(line.c_str(), " tile %*u needs %lu bytes (%lu over)", &needs, &over) == 2);
    CHECK(over > 0);
    CHECK(needs == target.memory_bytes + over);
    CHECK(interleaved_bytes > capacity);
  }
  CHECK(detailed == std::min<std::size_t>(3, expected_over.size()));
  if (expected_over.size() > 3)
    CHECK_THAT(status.message, Catch::Contains("\n  and " + std::to_string(expected_over.size() - 3) + " more tile"));
  CHECK_THAT(status.message, Catch::Contains(".w "));
  CHECK_THAT(status.message, Catch::Contains("fix: "));
  // Nothing is half placed after a failure.
  for (const Buffer& b : bench.state.program.buffers) CHECK(b.offset == kUnplaced);
}

TEST_CASE("place-storage shows the worst 3 tiles over in full and the rest as tile ranges", "[place-storage]") {
  PassBench bench(config_path("models/mlp-b2-n3.yaml"), config_path("targets/t1472.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  // The same plan with 4 KiB of interleaved memory per tile: every tile holding weights is over.
  Target& target = bench.state.target;
  target.memory_bytes = target.interleaved_start + 4096;
  pin_weights_interleaved(bench.state.program);
  const Status status = bench.run("place-storage");
  REQUIRE_FALSE(status.ok);
  std::uint64_t over_tiles = 0;
  REQUIRE(std::sscanf(status.message.c_str(), "pass 'place-storage' failed: model does not fit: %lu tiles over",
                      &over_tiles) == 1);
  REQUIRE(over_tiles > 3);
  std::size_t detailed = 0;
  for (std::size_t at = status.message.find("\n  tile "); at != std::string::npos;
       at = status.message.find("\n  tile ", at + 1))
    ++detailed;
  CHECK(detailed == 3);
  const std::string summary = "\n  and " + std::to_string(over_tiles - 3) + " more tiles over by ";
  const std::size_t at = status.message.find(summary);
  REQUIRE(at != std::string::npos);
  // The ranges name every other tile over once.
  const std::string line = status.message.substr(at + 1, status.message.find('\n', at + 1) - at - 1);
  std::uint64_t named = 0;
  for (std::size_t p = line.find(": ") + 2; p < line.size();) {
    unsigned first = 0, last = 0;
    const int fields = std::sscanf(line.c_str() + p, "%u-%u", &first, &last);
    REQUIRE(fields >= 1);
    named += fields == 2 ? last - first + 1 : 1;
    const std::size_t comma = line.find(", ", p);
    p = comma == std::string::npos ? line.size() : comma + 2;
  }
  CHECK(named == over_tiles - 3);
  CHECK(status.message.size() < 16384);  // readable, where 1,472 full lines would be ~700 KB
}

TEST_CASE("place-storage reserves code, vertex state and exchange descriptors above the data", "[place-storage]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("select-finalist").ok);
  const Program& program = bench.state.program;
  const std::uint32_t tiles = bench.state.target.tiles;
  // Per copy a send entry on its source tile and a receive entry on its destination tile.
  std::vector<std::uint64_t> descriptors(tiles, 0);
  for (const Superstep& step : program.supersteps)
    for (const Copy& copy : step.copies) {
      descriptors.at(program.buffers.at(copy.source.buffer).tile) += kSendDescriptorBytes;
      descriptors.at(program.buffers.at(copy.destination.buffer).tile) += kReceiveDescriptorBytes;
    }
  CHECK(copy_descriptor_bytes(program, tiles) == descriptors);
  // With multicast (t16 has it) copies of the same words to several tiles are one transfer,
  // one send entry on the source: what place-storage reserves.
  REQUIRE(bench.state.target.multicast);
  const std::vector<std::uint64_t> per_transfer = exchange_descriptor_bytes(program, tiles, true);
  for (std::uint32_t t = 0; t < tiles; ++t) CHECK(per_transfer[t] <= descriptors[t]);
  descriptors = per_transfer;
  const std::vector<std::uint64_t> calls = call_support_bytes(program, tiles);
  std::uint64_t most_support = 0, most_descriptors = 0;
  for (std::uint32_t t = 0; t < tiles; ++t)
    most_support = std::max(most_support, calls[t] + descriptors[t]),
    most_descriptors = std::max(most_descriptors, descriptors[t]);
  REQUIRE(most_descriptors > 0);  // the plan has copies

  PassBench placed(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(placed.run_through("place-storage").ok);
  const auto summary = placed.log_lines("memory summary");
  REQUIRE(summary.size() == 1);
  CHECK(log_field(summary[0], "peak_support_reserved_bytes") == most_support);
  // Every tile's standard-region data ends below its reserved support memory.
  std::vector<std::uint64_t> standard_end(tiles, 0);
  for (const Buffer& buffer : placed.state.program.buffers)
    if (buffer.region == Region::standard)
      standard_end.at(buffer.tile) =
          std::max<std::uint64_t>(standard_end[buffer.tile], std::uint64_t(buffer.offset) + buffer.bytes);
  for (std::uint32_t t = 0; t < tiles; ++t)
    CHECK(standard_end[t] + calls[t] + descriptors[t] <= placed.state.target.interleaved_start);

  // The does-not-fit report shows each over tile's reserved support memory and descriptors.
  Target& target = bench.state.target;
  target.memory_bytes = target.interleaved_start + 4096;
  pin_weights_interleaved(bench.state.program);
  const Status status = bench.run("place-storage");
  REQUIRE_FALSE(status.ok);
  bool shown = false;
  for (std::uint32_t t = 0; t < tiles; ++t) {
    const std::size_t at = status.message.find("\n  tile " + std::to_string(t) + " needs ");
    if (at == std::string::npos) continue;
    const std::string line = status.message.substr(at + 1, status.message.find('\n', at + 1) - at - 1);
    INFO(line);
    CHECK_THAT(line, Catch::EndsWith(fmt::format("support (code, vertex state) {} bytes; exchange descriptors {} bytes",
                                                 calls[t], descriptors[t])));
    shown = true;
  }
  CHECK(shown);
}
