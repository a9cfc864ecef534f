// Tests of the emit-tile-code pass plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <algorithm>

#include "pass_bench.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::log_field;
using tessera::testing::PassBench;

TEST_CASE("emit-tile-code sends and receives follow the schedule", "[emit-tile-code]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("emit-tile-code").ok);
  const Program& program = bench.state.program;
  const Package& package = bench.state.package;
  const Target& target = bench.state.target;
  REQUIRE(package.tiles.size() == target.tiles);
  CHECK(package.superstep_labels.size() == program.supersteps.size());
  for (std::uint32_t t = 0; t < package.tiles.size(); ++t) {
    CHECK(package.tiles[t].tile == t);
    CHECK(package.tiles[t].supersteps.size() == program.supersteps.size());
  }
  for (std::size_t s = 0; s < program.supersteps.size(); ++s) {
    INFO("superstep " << s);
    const Superstep& step = program.supersteps[s];
    std::size_t expected_sends = 0, expected_receives = 0, sends = 0, receives = 0;
    std::vector<std::uint64_t> sent_before(step.exchange.transfers.size(), 0);
    std::vector<std::uint32_t> order(step.schedule.segments.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](auto a, auto b) { return step.schedule.segments[a].start < step.schedule.segments[b].start; });
    for (std::uint32_t i : order) {
      const Segment& segment = step.schedule.segments[i];
      const Transfer& transfer = step.exchange.transfers[segment.transfer];
      const std::uint64_t offset = 4 * sent_before[segment.transfer];
      sent_before[segment.transfer] += segment.words;
      const auto& tile_sends = package.tiles[transfer.source].supersteps[s].sends;
      CHECK(std::count_if(tile_sends.begin(), tile_sends.end(), [&](const TileSend& send) {
              return send.cycle == segment.start && send.words == segment.words &&
                     send.address == transfer.source_address + offset;
            }) == 1);
      ++expected_sends;
      for (std::size_t d = 0; d < transfer.destinations.size(); ++d) {
        const auto& tile_receives = package.tiles[transfer.destinations[d]].supersteps[s].receives;
        const std::uint64_t arrival = segment.start + target.latency(transfer.source, transfer.destinations[d]);
        CHECK(std::count_if(tile_receives.begin(), tile_receives.end(), [&](const TileReceive& receive) {
                return receive.arrival == arrival && receive.sender == transfer.source &&
                       receive.words == segment.words && receive.address == transfer.destination_addresses[d] + offset;
              }) == 1);
        ++expected_receives;
      }
    }
    for (const TileImage& image : package.tiles) {
      const TileSuperstep& tile_step = image.supersteps[s];
      sends += tile_step.sends.size();
      receives += tile_step.receives.size();
      CHECK(std::is_sorted(tile_step.sends.begin(), tile_step.sends.end(),
                           [](const auto& a, const auto& b) { return a.cycle < b.cycle; }));
      CHECK(std::is_sorted(tile_step.receives.begin(), tile_step.receives.end(),
                           [](const auto& a, const auto& b) { return a.arrival < b.arrival; }));
    }
    CHECK(sends == expected_sends);
    CHECK(receives == expected_receives);
  }
}

TEST_CASE("emit-tile-code resolves buffers, calls and streams to byte addresses", "[emit-tile-code]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("emit-tile-code").ok);
  const Program& program = bench.state.program;
  const Package& package = bench.state.package;
  std::size_t buffers = 0, calls = 0;
  for (const TileImage& image : package.tiles) {
    buffers += image.buffers.size();
    for (const TileSuperstep& step : image.supersteps) calls += step.compute.size();
  }
  CHECK(buffers == program.buffers.size());
  std::size_t program_calls = 0;
  for (const Superstep& step : program.supersteps) program_calls += step.compute.size();
  CHECK(calls == program_calls);
  // The first call of the first superstep, resolved by hand.
  const CodeletCall& call = program.supersteps[0].compute[0];
  const TileCodeletCall& emitted = package.tiles[call.tile].supersteps[0].compute[0];
  CHECK(emitted.codelet == call.codelet);
  CHECK(emitted.params == call.params);
  for (std::size_t o = 0; o < call.operands.size(); ++o)
    CHECK(emitted.addresses[o] == program.buffers[call.operands[o].buffer].offset + 4 * call.operands[o].word_offset);
  REQUIRE(package.streams.size() == program.streams.size());
  for (std::size_t i = 0; i < program.streams.size(); ++i) {
    CHECK(package.streams[i].tensor == program.streams[i].tensor);
    REQUIRE(package.streams[i].slices.size() == program.streams[i].slices.size());
    const HostSlice& slice = program.streams[i].slices[0];
    CHECK(package.streams[i].slices[0].tile == program.buffers[slice.destination.buffer].tile);
    CHECK(package.streams[i].slices[0].address == program.buffers[slice.destination.buffer].offset);
  }
}

TEST_CASE("emit-tile-code packages compute the model's outputs", "[emit-tile-code]") {
  for (const bool multicast : {true, false}) {
    INFO("multicast " << multicast);
    PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
    bench.state.target.multicast = multicast;
    REQUIRE(bench.run_through("emit-tile-code").ok);
    CHECK(bench.simulate().passed);
  }
}

TEST_CASE("emit-tile-code packages compute the model's outputs for every kind of split", "[emit-tile-code]") {
  // Pinned splits exercise reduce-scatters (depth groups) and empty pieces; a slow host
  // link makes the planner spread the input once and gather it over the exchange.
  for (double host_bytes_per_cycle : {16.0, 0.05})
    for (std::int64_t columns : {1, 3, 16})
      for (std::int64_t depth : {1, 4, 16}) {
        INFO("column_groups " << columns << " depth_groups " << depth << " host " << host_bytes_per_cycle);
        PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
        bench.state.target.host_bytes_per_cycle = host_bytes_per_cycle;
        Options pinned;
        pinned.values["column_groups"] = columns;
        pinned.values["depth_groups"] = depth;
        REQUIRE(bench.run_through("emit-tile-code", {{"select-finalist", pinned}}).ok);
        REQUIRE(verify_program(bench.state.program, bench.state.target) == "");
        CHECK(bench.simulate().passed);
      }
}

TEST_CASE("emit-tile-code records the final cost of the placed program", "[emit-tile-code]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("emit-tile-code").ok);
  const auto lines = bench.log_lines("costed final placed program");
  REQUIRE(lines.size() == 1);
  const CostEstimate estimate = bench.cost_model().estimate(bench.state.program, bench.state.target);
  CHECK(log_field(lines[0], "final_cycles") == estimate.total());
  CHECK(log_field(lines[0], "final_exchange") == estimate.exchange_cycles);
  CHECK(bench.state.estimates.estimated_cycles == estimate.total());
  CHECK(bench.state.package.estimates.estimated_cycles == estimate.total());
  CHECK(bench.state.package.estimates.scheduled_exchange_cycles == bench.state.estimates.scheduled_exchange_cycles);
}
