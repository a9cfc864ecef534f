// lower-exchanges: turns each superstep's copies into an addressed exchange phase and has the scheduler plugin schedule it.
#include <algorithm>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "copy_transfers.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Status;

constexpr std::uint64_t kWordBytes = 4;  // exchange words and codelet data are 32-bit

class LowerExchanges final : public tessera::Pass {
protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    const tessera::Target& target = context.target;
    tessera::Program& program = state.program;
    for (const tessera::Buffer& buffer : program.buffers)
      if (buffer.offset == tessera::kUnplaced)
        return Status::failure(fmt::format("buffer '{}' on tile {} has no offset; run place-storage first",
                                           buffer.name, buffer.tile));

    std::uint64_t scheduled_cycles = 0, lower_bounds = 0;
    std::size_t phases = 0, transfers = 0;
    for (std::size_t index = 0; index < program.supersteps.size(); ++index) {
      tessera::Superstep& step = program.supersteps[index];
      step.exchange = tessera::ExchangePhase{target.tiles, {}};
      step.schedule = {};
      if (step.copies.empty()) continue;
      if (Status status = build_phase(program, step, target, index); !status.ok) return status;

      std::size_t widest = 0;
      for (const tessera::Transfer& transfer : step.exchange.transfers)
        widest = std::max(widest, transfer.destinations.size());
      context.info("prepared large physical exchange phase phase={} transfers={} maximum_identical_destinations={}",
                   index, step.exchange.transfers.size(), widest);
      tessera::ScheduleReport report;
      step.schedule = context.scheduler.schedule(step.exchange, target, context.schedule_budget_ms, &report);
      context.info("optimized physical exchange schedule phase={} initial_horizon={} selected_horizon={} "
                   "endpoint_lower_bound={} lower_bound_gap={} selected_kind=\"{}\" neighborhood_improvements=0",
                   index, report.horizon, report.horizon, report.endpoint_lower_bound,
                   report.horizon - std::min(report.horizon, report.lower_bound), context.scheduler.plugin_name());
      scheduled_cycles += report.horizon;
      lower_bounds += report.lower_bound;
      ++phases;
      transfers += step.exchange.transfers.size();
    }
    state.estimates.scheduled_exchange_cycles = scheduled_cycles;
    state.estimates.exchange_lower_bound = lower_bounds;
    context.info("lowered exchanges phases={} transfers={} scheduled_exchange_cycles={} exchange_lower_bound={}",
                 phases, transfers, scheduled_cycles, lower_bounds);
    return Status::success();
  }

private:
  /// One transfer per group of copies (see group_copies), with byte addresses.
  static Status build_phase(const tessera::Program& program, tessera::Superstep& step,
                            const tessera::Target& target, std::size_t index) {
    const auto& buffers = program.buffers;
    auto address = [&](const tessera::BufferRef& ref, std::uint32_t& out) {
      const std::uint64_t byte = static_cast<std::uint64_t>(buffers[ref.buffer].offset) + kWordBytes * ref.word_offset;
      if (byte > std::numeric_limits<std::uint32_t>::max()) return false;
      out = static_cast<std::uint32_t>(byte);
      return true;
    };
    for (const tessera::passes::CopyGroup& group :
         tessera::passes::group_copies(buffers, step.copies, target.multicast)) {
      const tessera::Copy& first = step.copies[group.copies.front()];
      tessera::Transfer transfer;
      transfer.source = buffers[first.source.buffer].tile;
      transfer.words = first.words;
      if (!address(first.source, transfer.source_address))
        return Status::failure(fmt::format("superstep {}: copy source in '{}' lies beyond a 32-bit address",
                                           index, buffers[first.source.buffer].name));
      for (std::uint32_t copy_index : group.copies) {
        const tessera::Copy& copy = step.copies[copy_index];
        const tessera::Buffer& destination = buffers[copy.destination.buffer];
        // The planner must route same-tile moves through copy codelets: the fabric cannot loop back.
        if (destination.tile == transfer.source)
          return Status::failure(fmt::format("superstep {} copy {}: '{}' and '{}' are both on tile {}; a plan "
                                             "must move data within a tile with a copy codelet",
                                             index, copy_index, buffers[copy.source.buffer].name,
                                             destination.name, destination.tile));
        std::uint32_t destination_address = 0;
        if (!address(copy.destination, destination_address))
          return Status::failure(fmt::format("superstep {}: copy destination in '{}' lies beyond a 32-bit address",
                                             index, destination.name));
        transfer.destinations.push_back(destination.tile);
        transfer.destination_addresses.push_back(destination_address);
      }
      step.exchange.transfers.push_back(std::move(transfer));
    }
    return Status::success();
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* lower_exchanges_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "lower-exchanges", "0.1.0",
      "builds addressed exchange phases from copies (multicast merged) and schedules them",
      tessera::facts::storage, tessera::facts::exchange, &tessera::create_plugin_object<LowerExchanges>);
  return &manifest;
}
TESSERA_PLUGIN(lower_exchanges_manifest)
