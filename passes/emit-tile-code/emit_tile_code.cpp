// emit-tile-code: writes the package's tile images (buffers, codelet calls, sends, receives) and host streams.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "tessera/pass.hpp"

namespace {

using tessera::Status;

constexpr std::uint64_t kWordBytes = 4;  // exchange words and codelet data are 32-bit

/// Byte address of a word position; callers checked that every buffer is placed.
std::uint32_t byte_address(const tessera::Program& program, const tessera::BufferRef& ref) {
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(program.buffers[ref.buffer].offset) +
                                    kWordBytes * ref.word_offset);
}

class EmitTileCode final : public tessera::Pass {
protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    const tessera::Target& target = context.target;
    const tessera::Program& program = state.program;
    for (const tessera::Buffer& buffer : program.buffers) {
      if (buffer.offset == tessera::kUnplaced)
        return Status::failure(
            fmt::format("buffer '{}' on tile {} has no offset; run place-storage first", buffer.name, buffer.tile));
      if (static_cast<std::uint64_t>(buffer.offset) + buffer.bytes > std::numeric_limits<std::uint32_t>::max())
        return Status::failure(
            fmt::format("buffer '{}' on tile {} ends beyond a 32-bit address", buffer.name, buffer.tile));
    }

    tessera::Package& package = state.package;
    package.tiles.assign(target.tiles, {});
    package.superstep_labels.clear();
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
      package.tiles[tile].tile = tile;
      package.tiles[tile].supersteps.resize(program.supersteps.size());
    }
    for (const tessera::Buffer& buffer : program.buffers)
      package.tiles[buffer.tile].buffers.push_back(
          {static_cast<std::uint32_t>(buffer.offset), buffer.bytes, buffer.region});

    std::size_t sends = 0, receives = 0, calls = 0;
    for (std::size_t index = 0; index < program.supersteps.size(); ++index) {
      const tessera::Superstep& step = program.supersteps[index];
      package.superstep_labels.push_back(step.label);
      for (const tessera::CodeletCall& call : step.compute) {
        tessera::TileCodeletCall emitted{call.codelet, {}, call.params};
        for (const tessera::BufferRef& operand : call.operands)
          emitted.addresses.push_back(byte_address(program, operand));
        package.tiles[call.tile].supersteps[index].compute.push_back(std::move(emitted));
        ++calls;
      }
      if (!step.copies.empty() && step.exchange.transfers.empty())
        return Status::failure(
            fmt::format("superstep {} has copies but no exchange phase; run lower-exchanges first", index));
      if (Status status = emit_exchange(step, index, target, package); !status.ok) return status;
      for (auto& image : package.tiles) {
        auto& tile_step = image.supersteps[index];
        std::stable_sort(tile_step.sends.begin(), tile_step.sends.end(),
                         [](const auto& a, const auto& b) { return a.cycle < b.cycle; });
        std::stable_sort(tile_step.receives.begin(), tile_step.receives.end(),
                         [](const auto& a, const auto& b) { return a.arrival < b.arrival; });
        sends += tile_step.sends.size();
        receives += tile_step.receives.size();
      }
    }

    package.streams.clear();
    for (const tessera::HostStream& stream : program.streams) {
      tessera::PackageStream emitted{stream.tensor, stream.kind, stream.rows, stream.cols, {}, stream.dtype};
      for (const tessera::HostSlice& slice : stream.slices)
        emitted.slices.push_back({program.buffers[slice.destination.buffer].tile,
                                  byte_address(program, slice.destination), slice.row_begin, slice.rows,
                                  slice.col_begin, slice.cols, slice.transposed});
      package.streams.push_back(std::move(emitted));
    }

    const tessera::CostEstimate final_estimate = context.cost_model.estimate(program, target);
    state.estimates.estimated_cycles = final_estimate.total();
    state.estimates.estimated_exchange_cycles = final_estimate.exchange_cycles;
    package.estimates = state.estimates;
    context.info("costed final placed program final_cycles={} final_exchange={}", final_estimate.total(),
                 final_estimate.exchange_cycles);
    context.info("emitted tile images tiles={} supersteps={} codelet_calls={} sends={} receives={} streams={}",
                 package.tiles.size(), program.supersteps.size(), calls, sends, receives, package.streams.size());
    return allocate_support_memory(package, target, context);
  }

private:
  /// The images' support memory above each tile's data in the standard region: code, vertex
  /// states and exchange descriptors (place-storage reserved its estimate of them; a schedule
  /// that splits transfers emits more), checked against the region's end.
  static Status allocate_support_memory(const tessera::Package& package, const tessera::Target& target,
                                        tessera::PassContext& context) {
    tessera::SupportBytes largest;
    std::uint32_t largest_tile = 0;
    std::uint64_t sum = 0;
    for (const tessera::TileImage& image : package.tiles) {
      const tessera::SupportBytes support = tile_support_bytes(image);
      std::uint64_t standard_end = 0;
      for (const tessera::TileBufferEntry& buffer : image.buffers)
        if (buffer.region == tessera::Region::standard)
          standard_end = std::max<std::uint64_t>(standard_end, std::uint64_t{buffer.offset} + buffer.bytes);
      const std::uint64_t reserved = support.total();
      if (standard_end + reserved > target.interleaved_start)
        return Status::failure(fmt::format(
            "model does not fit: tile {} needs {} bytes of support memory (code {}, vertex state {}, exchange "
            "descriptors {}) above its {} bytes of standard-region data, {} bytes past the standard region's end at "
            "{}\n"
            "  fix: give select-finalist a lower available_memory_proportion, or use a target with more memory per "
            "tile than '{}'",
            image.tile, reserved, support.code, support.vertex_state, support.exchange_descriptors, standard_end,
            standard_end + reserved - target.interleaved_start, target.interleaved_start, target.name));
      sum += support.total();
      if (support.total() > largest.total()) largest = support, largest_tile = image.tile;
    }
    context.info(
        "allocated package support memory max_tile_support_bytes={} tile={} code_bytes={} vertex_state_bytes={} "
        "exchange_descriptor_bytes={} mean_tile_support_bytes={}",
        largest.total(), largest_tile, largest.code, largest.vertex_state, largest.exchange_descriptors,
        package.tiles.empty() ? 0 : sum / package.tiles.size());
    return Status::success();
  }

  /// Sends and receives of one superstep from its schedule. Segments of a transfer carry its
  /// words in start order, so a segment's words begin after those of the transfer's earlier
  /// segments; every destination hears them `latency` cycles after they leave.
  static Status emit_exchange(const tessera::Superstep& step, std::size_t index, const tessera::Target& target,
                              tessera::Package& package) {
    const auto& transfers = step.exchange.transfers;
    std::vector<std::uint32_t> order(step.schedule.segments.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    const auto& segments = step.schedule.segments;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      return std::tie(segments[a].transfer, segments[a].start) < std::tie(segments[b].transfer, segments[b].start);
    });
    std::vector<std::uint64_t> words_sent(transfers.size(), 0);
    for (std::uint32_t i : order) {
      const tessera::Segment& segment = segments[i];
      if (segment.transfer >= transfers.size())
        return Status::failure(fmt::format("superstep {}: schedule segment {} names transfer {} of {}", index, i,
                                           segment.transfer, transfers.size()));
      const tessera::Transfer& transfer = transfers[segment.transfer];
      const std::uint64_t offset = kWordBytes * words_sent[segment.transfer];
      words_sent[segment.transfer] += segment.words;
      package.tiles[transfer.source].supersteps[index].sends.push_back(
          {segment.start, static_cast<std::uint32_t>(transfer.source_address + offset), segment.words});
      for (std::size_t d = 0; d < transfer.destinations.size(); ++d) {
        const std::uint32_t destination = transfer.destinations[d];
        package.tiles[destination].supersteps[index].receives.push_back(
            {segment.start + target.latency(transfer.source, destination), transfer.source,
             static_cast<std::uint32_t>(transfer.destination_addresses[d] + offset), segment.words});
      }
    }
    for (std::size_t t = 0; t < transfers.size(); ++t)
      if (words_sent[t] != transfers[t].words)
        return Status::failure(fmt::format("superstep {}: the schedule sends {} of the {} words of transfer {}", index,
                                           words_sent[t], transfers[t].words, t));
    return Status::success();
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* emit_tile_code_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "emit-tile-code", "0.1.0",
      "emits per-tile images (buffers, codelet calls, sends, receives) and host streams into the package",
      tessera::facts::exchange, tessera::facts::tile_images, &tessera::create_plugin_object<EmitTileCode>);
  return &manifest;
}
TESSERA_PLUGIN(emit_tile_code_manifest)
