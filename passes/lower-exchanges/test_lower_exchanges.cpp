// Tests of the lower-exchanges pass plugin, loaded through the real PluginHost.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>

#include "pass_bench.hpp"

using namespace tessera;
using tessera::testing::config_path;
using tessera::testing::log_field;
using tessera::testing::PassBench;

namespace {

using Move = std::tuple<std::uint32_t, std::uint64_t, std::uint32_t, std::uint64_t, std::uint32_t>;

std::uint64_t address(const Program& program, const BufferRef& ref) {
  return std::uint64_t(program.buffers[ref.buffer].offset) + 4ull * ref.word_offset;
}

/// (source tile, source address, destination tile, destination address, words) of every
/// copy of a superstep, and of every (transfer, destination) pair of its exchange.
std::vector<Move> moves_of_copies(const Program& program, const Superstep& step) {
  std::vector<Move> moves;
  for (const Copy& copy : step.copies)
    moves.emplace_back(program.buffers[copy.source.buffer].tile, address(program, copy.source),
                       program.buffers[copy.destination.buffer].tile, address(program, copy.destination), copy.words);
  std::sort(moves.begin(), moves.end());
  return moves;
}

std::vector<Move> moves_of_transfers(const Superstep& step) {
  std::vector<Move> moves;
  for (const Transfer& transfer : step.exchange.transfers)
    for (std::size_t d = 0; d < transfer.destinations.size(); ++d)
      moves.emplace_back(transfer.source, transfer.source_address, transfer.destinations[d],
                         transfer.destination_addresses[d], transfer.words);
  std::sort(moves.begin(), moves.end());
  return moves;
}

void check_exchanges(PassBench& bench) {
  const Program& program = bench.state.program;
  std::uint64_t horizons = 0, bounds = 0;
  std::size_t phases = 0;
  for (std::size_t s = 0; s < program.supersteps.size(); ++s) {
    const Superstep& step = program.supersteps[s];
    INFO("superstep " << s);
    CHECK(step.exchange.tiles == bench.state.target.tiles);
    CHECK(moves_of_transfers(step) == moves_of_copies(program, step));
    for (const Transfer& transfer : step.exchange.transfers) {
      std::vector<std::uint32_t> tiles = transfer.destinations;
      std::sort(tiles.begin(), tiles.end());
      CHECK(std::adjacent_find(tiles.begin(), tiles.end()) == tiles.end());
      if (!bench.state.target.multicast) CHECK(transfer.destinations.size() == 1);
    }
    const ScheduleReport report = validate_schedule(step.exchange, step.schedule, bench.state.target);
    CHECK(report.valid);
    if (step.copies.empty()) continue;
    ++phases;
    horizons += report.horizon;
    bounds += report.lower_bound;
    // The remark kept for this phase holds what the validator measures.
    const auto remark = std::find_if(bench.state.record.schedules.begin(), bench.state.record.schedules.end(),
                                     [&](const ScheduleRemark& r) { return r.phase == s; });
    REQUIRE(remark != bench.state.record.schedules.end());
    CHECK(remark->transfers == step.exchange.transfers.size());
    CHECK(remark->segments == step.schedule.segments.size());
    CHECK(remark->horizon == report.horizon);
    CHECK(remark->endpoint_lower_bound == report.endpoint_lower_bound);
    CHECK(remark->lower_bound == report.lower_bound);
    CHECK(remark->scheduler == "greedy");
    // And the log line is rendered from it.
    const auto optimized = bench.log_lines("optimized physical exchange schedule phase=" + std::to_string(s) + " ");
    REQUIRE(optimized.size() == 1);
    CHECK(log_field(optimized[0], "horizon") == report.horizon);
    CHECK(log_field(optimized[0], "lower_bound") == report.lower_bound);
  }
  CHECK(bench.state.record.schedules.size() == phases);
  CHECK(phases > 0);
  CHECK(bench.state.estimates.scheduled_exchange_cycles == horizons);
  CHECK(bench.state.estimates.exchange_lower_bound == bounds);
  CHECK(verify_program(program, bench.state.target) == "");
}

}  // namespace

TEST_CASE("lower-exchanges produces transfers whose words match the copies", "[lower-exchanges]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("lower-exchanges").ok);
  check_exchanges(bench);
  // With multicast, replicated x chunks leave their source once.
  std::size_t copies = 0, transfers = 0;
  for (const Superstep& step : bench.state.program.supersteps) {
    copies += step.copies.size();
    transfers += step.exchange.transfers.size();
  }
  CHECK(transfers <= copies);
}

TEST_CASE("lower-exchanges lowers reduce-scatters and input gathers", "[lower-exchanges]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.target.host_bytes_per_cycle = 0.05;  // the input is spread once, then gathered
  Options pinned;
  pinned.values["column_groups"] = std::int64_t{4};
  pinned.values["depth_groups"] = std::int64_t{4};
  REQUIRE(bench.run_through("lower-exchanges", {{"select-finalist", pinned}}).ok);
  check_exchanges(bench);
  std::size_t multicasts = 0;
  for (const Superstep& step : bench.state.program.supersteps)
    for (const Transfer& transfer : step.exchange.transfers) multicasts += transfer.destinations.size() > 1;
  CHECK(multicasts > 0);  // four column groups need the same x chunks
}

TEST_CASE("lower-exchanges sends one transfer per copy without multicast", "[lower-exchanges]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  bench.state.target.multicast = false;
  REQUIRE(bench.run_through("lower-exchanges").ok);
  check_exchanges(bench);
  for (const Superstep& step : bench.state.program.supersteps)
    CHECK(step.exchange.transfers.size() == step.copies.size());
}

TEST_CASE("lower-exchanges merges identical copies into multicast transfers", "[lower-exchanges]") {
  PassBench bench(config_path("models/mlp-small.yaml"), config_path("targets/t16.yaml"));
  REQUIRE(bench.run_through("place-storage").ok);
  // Three tiles need the same words of tile 0's first buffer, one of them twice (two
  // buffers): that one must go in a second transfer.
  Program& program = bench.state.program;
  auto add_buffer = [&](std::uint32_t tile) {
    Buffer b;
    b.name = "extra";
    b.tile = tile;
    b.bytes = 64;
    b.first_use = b.last_use = 0;
    b.offset = 0;
    program.buffers.push_back(b);
    return static_cast<std::uint32_t>(program.buffers.size() - 1);
  };
  const std::uint32_t source = add_buffer(0), a = add_buffer(1), b = add_buffer(2), c = add_buffer(2);
  // Keep storage valid: put the extra buffers beyond everything else on their tiles.
  std::int64_t top = 0;
  for (const Buffer& buffer : program.buffers)
    if (buffer.region == Region::standard) top = std::max<std::int64_t>(top, buffer.offset + buffer.bytes);
  program.buffers[source].offset = program.buffers[a].offset = program.buffers[b].offset = (top + 63) / 64 * 64;
  program.buffers[c].offset = program.buffers[b].offset + 64;
  Superstep& step = program.supersteps[0];
  step.copies = {{{source, 2}, {a, 0}, 5}, {{source, 2}, {b, 0}, 5}, {{source, 2}, {c, 3}, 5}};
  REQUIRE(bench.run("lower-exchanges").ok);
  REQUIRE(step.exchange.transfers.size() == 2);
  CHECK(step.exchange.transfers[0].destinations == std::vector<std::uint32_t>{1, 2});
  CHECK(step.exchange.transfers[1].destinations == std::vector<std::uint32_t>{2});
  CHECK(step.exchange.transfers[0].source_address == program.buffers[source].offset + 8);
  CHECK(step.exchange.transfers[1].destination_addresses[0] == program.buffers[c].offset + 12);
  CHECK(moves_of_transfers(step) == moves_of_copies(program, step));
  REQUIRE(bench.state.record.schedules.size() == 1);
  CHECK(bench.state.record.schedules[0].transfers == 2);
  CHECK(bench.state.record.schedules[0].widest_multicast == 2);
  CHECK(bench.state.record.schedules[0].words == 10);
}
