// lower-exchanges: turns each superstep's copies into an addressed exchange phase and has the scheduler plugin schedule
// it.
#include <algorithm>
#include <chrono>
#include <cstdint>

#include <fmt/format.h>

#include "tessera/lowering.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Status;

class LowerExchanges final : public tessera::Pass {
protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    const tessera::Target& target = context.target;
    tessera::Program& program = state.program;
    for (const tessera::Buffer& buffer : program.buffers)
      if (buffer.offset == tessera::kUnplaced)
        return Status::failure(
            fmt::format("buffer '{}' on tile {} has no offset; run place-storage first", buffer.name, buffer.tile));

    std::uint64_t scheduled_cycles = 0, lower_bounds = 0;
    std::size_t phases = 0, transfers = 0;
    for (std::size_t index = 0; index < program.supersteps.size(); ++index) {
      context.progress(index, program.supersteps.size(), "supersteps");
      tessera::Superstep& step = program.supersteps[index];
      step.exchange = tessera::ExchangePhase{target.tiles, {}};
      step.schedule = {};
      if (step.copies.empty()) continue;
      if (Status status = build_phase(program, step, target, index); !status.ok) return status;

      tessera::ScheduleRemark remark;
      remark.phase = static_cast<std::uint32_t>(index);
      remark.scheduler = context.scheduler.plugin_name();
      remark.transfers = step.exchange.transfers.size();
      for (const tessera::Transfer& transfer : step.exchange.transfers) {
        remark.words += transfer.words;
        remark.widest_multicast = std::max<std::uint64_t>(remark.widest_multicast, transfer.destinations.size());
      }
      // Logged before the scheduler runs, so a phase it hangs on is named.
      context.info("prepared physical exchange phase phase={} transfers={} words={} widest_multicast={}", index,
                   remark.transfers, remark.words, remark.widest_multicast);
      tessera::ScheduleReport report;
      const auto started = std::chrono::steady_clock::now();
      step.schedule = context.scheduler.schedule(step.exchange, target, context.schedule_budget_ms, &report);
      remark.elapsed_ms = static_cast<std::uint64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
      remark.segments = step.schedule.segments.size();
      remark.horizon = report.horizon;
      remark.endpoint_lower_bound = report.endpoint_lower_bound;
      remark.lower_bound = report.lower_bound;
      context.remark(remark);
      scheduled_cycles += report.horizon;
      lower_bounds += report.lower_bound;
      ++phases;
      transfers += step.exchange.transfers.size();
    }
    state.estimates.scheduled_exchange_cycles = scheduled_cycles;
    state.estimates.exchange_lower_bound = lower_bounds;
    context.statistic("phases", static_cast<double>(phases));
    context.statistic("transfers", static_cast<double>(transfers));
    context.statistic("scheduled_exchange_cycles", static_cast<double>(scheduled_cycles));
    context.statistic("exchange_lower_bound", static_cast<double>(lower_bounds));
    context.info("lowered exchanges phases={} transfers={} scheduled_exchange_cycles={} exchange_lower_bound={}",
                 phases, transfers, scheduled_cycles, lower_bounds);
    return Status::success();
  }

private:
  /// The SDK's physical phase, after refusing a copy within a tile: it would be left out, not moved.
  static Status build_phase(const tessera::Program& program, tessera::Superstep& step, const tessera::Target& target,
                            std::size_t index) {
    for (std::size_t copy_index = 0; copy_index < step.copies.size(); ++copy_index) {
      const tessera::Copy& copy = step.copies[copy_index];
      const tessera::Buffer& source = program.buffers.at(copy.source.buffer);
      const tessera::Buffer& destination = program.buffers.at(copy.destination.buffer);
      // The planner must route same-tile moves through copy codelets: the fabric cannot loop back.
      if (destination.tile == source.tile)
        return Status::failure(
            fmt::format("superstep {} copy {}: '{}' and '{}' are both on tile {}; a plan "
                        "must move data within a tile with a copy codelet",
                        index, copy_index, source.name, destination.name, destination.tile));
    }
    step.exchange = tessera::physical_phase(program, step, target);
    return Status::success();
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* lower_exchanges_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "lower-exchanges", "0.1.0",
      "builds addressed exchange phases from copies (multicast merged) and schedules them", tessera::facts::storage,
      tessera::facts::exchange, &tessera::create_plugin_object<LowerExchanges>);
  return &manifest;
}
TESSERA_PLUGIN(lower_exchanges_manifest)
