// Builds the calibration microbenchmarks as a planned program, one superstep per measurement group.
#include "microbenchmarks.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "calibration.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/target.hpp"

namespace tessera::cli {

namespace {

constexpr std::uint32_t kWordBytes = 4;

/// `words` words from `source` to each of `destinations` (a multicast where the target has it).
struct LogicalTransfer {
  std::uint32_t source;
  std::vector<std::uint32_t> destinations;
  std::uint32_t words;
};

struct PhaseShape {
  std::string name;
  std::vector<LogicalTransfer> transfers;
};

/// Members of group `group` when `tiles` tiles form groups of `size` by striding, so a group
/// spans columns and its exchange sees a spread of latencies.
std::vector<std::uint32_t> strided_group(std::uint32_t tiles, std::uint32_t size, std::uint32_t group) {
  const std::uint32_t groups = tiles / size;
  std::vector<std::uint32_t> members;
  for (std::uint32_t m = 0; m < size; ++m) members.push_back(group + m * groups);
  return members;
}

// The phase shapes: permutations at several distances (latency spread), many-to-one gathers
// (fan-in, as partial sums meet), a broadcast and group all-gathers (multicast fan-out and
// fan-in, as activations are broadcast), and one-to-several scatters.
std::vector<PhaseShape> exchange_shapes(const Target& target) {
  const std::uint32_t n = target.tiles;
  std::vector<PhaseShape> shapes;
  auto shift = [&](std::uint32_t distance, std::uint32_t words) {
    if (distance % n == 0) return;
    PhaseShape shape{fmt::format("shift distance={} words={}", distance, words), {}};
    for (std::uint32_t i = 0; i < n; ++i) shape.transfers.push_back({i, {(i + distance) % n}, words});
    shapes.push_back(std::move(shape));
  };
  auto gather = [&](std::uint32_t senders, std::uint32_t words) {
    senders = std::min(senders, n - 1);
    PhaseShape shape{fmt::format("gather senders={} words={}", senders, words), {}};
    for (std::uint32_t g = 0; g < n / (senders + 1); ++g) {
      const auto members = strided_group(n, senders + 1, g);
      for (std::uint32_t m = 1; m < members.size(); ++m) shape.transfers.push_back({members[m], {members[0]}, words});
    }
    shapes.push_back(std::move(shape));
  };
  auto allgather = [&](std::uint32_t size, std::uint32_t words) {
    size = std::min(size, n);
    PhaseShape shape{fmt::format("allgather size={} words={}", size, words), {}};
    for (std::uint32_t g = 0; g < n / size; ++g) {
      const auto members = strided_group(n, size, g);
      for (std::uint32_t source : members) {
        LogicalTransfer transfer{source, {}, words};
        for (std::uint32_t destination : members)
          if (destination != source) transfer.destinations.push_back(destination);
        shape.transfers.push_back(std::move(transfer));
      }
    }
    shapes.push_back(std::move(shape));
  };
  auto scatter = [&](std::uint32_t fan_out, std::uint32_t words) {
    fan_out = std::min(fan_out, n - 1);
    const std::uint32_t step = std::max(1u, n / (fan_out + 1));
    PhaseShape shape{fmt::format("scatter fan_out={} words={}", fan_out, words), {}};
    for (std::uint32_t i = 0; i < n; ++i)
      for (std::uint32_t j = 1; j <= fan_out; ++j) shape.transfers.push_back({i, {(i + j * step) % n}, words});
    shapes.push_back(std::move(shape));
  };
  auto broadcast = [&](std::uint32_t words) {
    LogicalTransfer transfer{0, {}, words};
    for (std::uint32_t d = 1; d < n; ++d) transfer.destinations.push_back(d);
    shapes.push_back({fmt::format("broadcast words={}", words), {std::move(transfer)}});
  };
  shift(1, 8);
  shift(1, 256);
  shift(target.tiles_per_column, 64);
  shift(n / 2, 32);
  shift(n / 2, 400);
  gather(3, 16);
  gather(3, 200);
  gather(15, 32);
  gather(63, 8);
  broadcast(32);
  broadcast(512);
  allgather(4, 8);
  allgather(4, 100);
  allgather(16, 16);
  allgather(64, 3);
  allgather(64, 24);
  scatter(4, 16);
  scatter(8, 64);
  return shapes;
}

class ProgramBuilder {
public:
  explicit ProgramBuilder(const Target& target) : target_(target) {}

  std::uint32_t superstep(const std::string& label) {
    Superstep step;
    step.label = label;
    program.supersteps.push_back(std::move(step));
    return static_cast<std::uint32_t>(program.supersteps.size() - 1);
  }

  /// A buffer live only in `superstep`.
  std::uint32_t buffer(std::uint32_t tile, std::uint64_t words, std::uint32_t superstep, const std::string& name) {
    const std::uint64_t bytes = std::max<std::uint64_t>(words, 1) * kWordBytes;
    // A shape too large for the standard region is a mistake in the feature table's shapes.
    if (bytes > target_.interleaved_start)
      throw Error(
          fmt::format("calibration microbenchmark buffer '{}' needs {} bytes but target '{}' has {} in its "
                      "standard region; use smaller shapes in the feature table",
                      name, bytes, target_.name, target_.interleaved_start));
    Buffer buffer;
    buffer.name = name;
    buffer.tile = tile;
    buffer.bytes = static_cast<std::uint32_t>(bytes);
    buffer.alignment = std::max<std::uint32_t>(target_.alignment, 8);
    buffer.first_use = buffer.last_use = superstep;
    program.buffers.push_back(std::move(buffer));
    return static_cast<std::uint32_t>(program.buffers.size() - 1);
  }

  Program program;

private:
  const Target& target_;
};

}  // namespace

Microbenchmarks build_microbenchmarks(const Target& target) {
  Microbenchmarks benchmarks;
  ProgramBuilder builder(target);

  // Codelets: each call alone on its tile, up to one call per tile per superstep.
  for (std::uint32_t id = 0; id < kCodeletCount; ++id) {
    const auto codelet = static_cast<Codelet>(id);
    const calibration::CodeletLine* line = calibration::codelet_line(codelet);
    if (!line || line->shapes.empty())
      throw Error(
          fmt::format("codelet '{}' (id {}) has no line in the calibrated cost model's feature table "
                      "(plugins/calibrated/calibration.cpp, kCodeletLines); add its features and "
                      "microbenchmark shapes, then re-run tessera calibrate",
                      codelet_name(codelet), id));
    std::uint32_t step = 0;
    for (std::size_t index = 0; index < line->shapes.size(); ++index) {
      const auto tile = static_cast<std::uint32_t>(index % target.tiles);
      if (tile == 0)
        step = builder.superstep(fmt::format("calibrate.{}.{}", codelet_name(codelet), index / target.tiles));
      const std::vector<std::uint32_t>& params = line->shapes[index];
      if (params.size() != codelet_param_count(codelet))
        throw Error(fmt::format("feature table shape {} of codelet '{}' has {} params; the codelet takes {}", index,
                                codelet_name(codelet), params.size(), codelet_param_count(codelet)));
      CodeletCall call{tile, codelet, {}, params};
      for (std::uint32_t operand = 0; operand < codelet_operand_count(codelet); ++operand)
        call.operands.push_back({builder.buffer(tile, codelet_operand_words(codelet, params, operand), step,
                                                fmt::format("{}.{}.{}", codelet_name(codelet), index, operand)),
                                 0});
      builder.program.supersteps[step].compute.push_back(std::move(call));
      benchmarks.codelets.push_back({codelet, params, step, tile});
    }
  }

  // Exchange phases: one per superstep, from copies, as a planner would leave them. Each tile
  // receives into one buffer, at consecutive offsets (few buffers: placement stays quick).
  for (const PhaseShape& shape : exchange_shapes(target)) {
    const std::uint32_t step = builder.superstep("calibrate.exchange." + shape.name);
    std::vector<std::uint64_t> received_words(target.tiles, 0);
    for (const LogicalTransfer& transfer : shape.transfers)
      for (std::uint32_t destination : transfer.destinations) received_words[destination] += transfer.words;
    std::vector<std::uint32_t> receive_buffer(target.tiles, 0);
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile)
      if (received_words[tile] > 0)
        receive_buffer[tile] = builder.buffer(tile, received_words[tile], step, fmt::format("receive.{}", tile));
    std::vector<std::uint32_t> filled(target.tiles, 0);
    for (std::size_t t = 0; t < shape.transfers.size(); ++t) {
      const LogicalTransfer& transfer = shape.transfers[t];
      const std::uint32_t source = builder.buffer(transfer.source, transfer.words, step, fmt::format("send.{}", t));
      for (std::uint32_t destination : transfer.destinations) {
        builder.program.supersteps[step].copies.push_back(
            {{source, 0}, {receive_buffer[destination], filled[destination]}, transfer.words});
        filled[destination] += transfer.words;
      }
    }
    benchmarks.exchanges.push_back({shape.name, step});
  }

  // A barrier alone: no compute, no exchange.
  benchmarks.barrier_superstep = builder.superstep("calibrate.barrier");
  benchmarks.program = std::move(builder.program);
  return benchmarks;
}

}  // namespace tessera::cli
