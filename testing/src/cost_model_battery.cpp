// The cost-model battery (`tessera check-plugin` on a cost model): finite estimates that never
// fall as the work grows, a peak memory covering live buffers, and repeatable estimates.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "battery_runner.hpp"
#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/exchange.hpp"
#include "tessera/program.hpp"
#include "tessera/testing/battery.hpp"
#include "tessera/testing/phases.hpp"
#include "tessera/testing/targets.hpp"

namespace tessera::testing {
namespace {

using detail::Clock;
using detail::milliseconds_since;

constexpr std::uint64_t kPlausibleCycles = std::uint64_t{1} << 62;

// A NaN or infinity cast to an integer shows up as a huge (or wrapped) number.
std::string implausible(const CostEstimate& estimate) {
  const std::pair<const char*, std::uint64_t> fields[] = {{"compute_cycles", estimate.compute_cycles},
                                                          {"exchange_cycles", estimate.exchange_cycles},
                                                          {"sync_cycles", estimate.sync_cycles},
                                                          {"peak_tile_bytes", estimate.peak_tile_bytes}};
  for (const auto& [name, value] : fields)
    if (value >= kPlausibleCycles)
      return fmt::format(
          "{}={} is not a finite estimate (a NaN or infinity converted to an integer, or an "
          "underflow?)",
          name, value);
  return "";
}

// Adds a call of `codelet` on `tile` in `superstep`, with one buffer per operand sized to what
// the codelet reads or writes, live in that superstep only.
void add_call(Program& program, std::uint32_t superstep, std::uint32_t tile, Codelet codelet,
              std::vector<std::uint32_t> params) {
  if (program.supersteps.size() <= superstep) program.supersteps.resize(superstep + 1);
  for (std::size_t s = 0; s < program.supersteps.size(); ++s)
    if (program.supersteps[s].label.empty()) program.supersteps[s].label = fmt::format("check-{}", s);
  CodeletCall call;
  call.tile = tile;
  call.codelet = codelet;
  call.params = std::move(params);
  for (std::uint32_t operand = 0; operand < codelet_operand_count(codelet); ++operand) {
    Buffer buffer;
    buffer.name = fmt::format("{}-{}-{}", codelet_name(codelet), program.buffers.size(), operand);
    buffer.tile = tile;
    buffer.bytes = static_cast<std::uint32_t>(codelet_operand_words(codelet, call.params, operand) * 4);
    buffer.first_use = buffer.last_use = superstep;
    call.operands.push_back({static_cast<std::uint32_t>(program.buffers.size()), 0});
    program.buffers.push_back(buffer);
  }
  program.supersteps[superstep].compute.push_back(std::move(call));
}

// Adds a copy of `words` words from a buffer on `source` to one on `destination`.
void add_copy(Program& program, std::uint32_t superstep, std::uint32_t source, std::uint32_t destination,
              std::uint32_t words) {
  if (program.supersteps.size() <= superstep) program.supersteps.resize(superstep + 1);
  program.supersteps[superstep].label = fmt::format("check-{}", superstep);
  for (std::uint32_t tile : {source, destination}) {
    Buffer buffer;
    buffer.name = fmt::format("copy-{}", program.buffers.size());
    buffer.tile = tile;
    buffer.bytes = words * 4;
    buffer.first_use = buffer.last_use = superstep;
    program.buffers.push_back(buffer);
  }
  const auto first = static_cast<std::uint32_t>(program.buffers.size() - 2);
  program.supersteps[superstep].copies.push_back({{first, 0}, {first + 1, 0}, words});
}

// The check's own programs must be well formed, or a failure would blame the plugin wrongly.
const Program& well_formed(const Program& program, const Target& target) {
  if (std::string problem = verify_program(program, target); !problem.empty())
    throw std::logic_error("check-plugin built an ill-formed program (a bug in tessera): " + problem);
  return program;
}

struct Step {
  std::string label;
  CostEstimate estimate;
};

// Each step is more work than the one before: its total must not be smaller.
CheckOutcome monotone(const std::vector<Step>& steps, const char* field = "total") {
  std::vector<std::string> figures;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (std::string problem = implausible(steps[i].estimate); !problem.empty())
      return CheckOutcome::fail(steps[i].label + ": " + problem);
    const std::uint64_t cycles = steps[i].estimate.total();
    if (i > 0 && cycles < steps[i - 1].estimate.total())
      return CheckOutcome::fail(
          fmt::format("{} is estimated at {} cycles, fewer than {} at {}: more work must not cost "
                      "fewer cycles",
                      steps[i].label, cycles, steps[i - 1].label, steps[i - 1].estimate.total()));
    figures.push_back(fmt::format("{}={}", steps[i].label, cycles));
  }
  return CheckOutcome::pass(fmt::format("{}: {}", field, fmt::join(figures, " ")));
}

// A target the battery runs on, and what its checks' names end with.
struct CheckedTarget {
  Target target;
  std::string suffix;
};

}  // namespace

BatteryResult cost_model_battery(const CostModelFactory& make_cost_model, const BatteryOptions& options) {
  detail::Battery battery(options);
  std::vector<CheckedTarget> targets;
  if (options.builtin_targets) {
    Target realistic = latency_target("check-latency-1472", 1472, 64);
    realistic.source_file = "(built into tessera check-plugin)";
    targets.push_back({realistic, ""});
  }
  if (options.extra_target) targets.push_back({*options.extra_target, "@" + options.extra_target->name});
  for (const CheckedTarget& checked : targets) {
    const Target& target = checked.target;
    const std::string& at = checked.suffix;
    const std::uint32_t last_tile = target.tiles - 1;

    battery.run("empty-program" + at, [&] {
      auto model = make_cost_model();
      const CostEstimate empty = model->estimate(Program{}, target);
      if (std::string problem = implausible(empty); !problem.empty()) return CheckOutcome::fail(problem);
      if (empty.peak_tile_bytes != 0)
        return CheckOutcome::fail(
            fmt::format("peak_tile_bytes={} for a program without buffers", empty.peak_tile_bytes));
      Program smallest;
      add_call(smallest, 0, 0, Codelet::copy, {1});
      const CostEstimate one = model->estimate(well_formed(smallest, target), target);
      if (empty.total() > one.total())
        return CheckOutcome::fail(fmt::format("the empty program costs {} cycles, more than one 1-word copy ({})",
                                              empty.total(), one.total()));
      return CheckOutcome::pass(fmt::format("total={} (one 1-word copy: {})", empty.total(), one.total()));
    });

    battery.run("empty-exchange-phase" + at, [&] {
      auto model = make_cost_model();
      const std::uint64_t empty = model->estimate_exchange(empty_phase(target.tiles), target);
      if (empty >= kPlausibleCycles)
        return CheckOutcome::fail(fmt::format("{} cycles is not a finite estimate", empty));
      if (target.tiles < 2) return CheckOutcome::pass(fmt::format("cycles={}", empty));
      const std::uint64_t one = model->estimate_exchange(single_transfer_phase(target.tiles, 0, 1, 1), target);
      if (empty > one)
        return CheckOutcome::fail(
            fmt::format("an empty phase costs {} cycles, more than a 1-word phase ({})", empty, one));
      return CheckOutcome::pass(fmt::format("cycles={} (one word: {})", empty, one));
    });

    battery.run("monotone-matmul-macs" + at, [&] {
      auto model = make_cost_model();
      std::vector<Step> steps;
      for (std::uint32_t size : {1u, 4u, 8u, 16u, 32u, 64u, 128u}) {
        Program program;
        add_call(program, 0, last_tile, Codelet::matmul, {size, size, size, 0});
        steps.push_back({fmt::format("{}^3", size), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    battery.run("monotone-elementwise" + at, [&] {
      auto model = make_cost_model();
      const std::pair<Codelet, std::vector<std::uint32_t>> shapes[] = {
          {Codelet::copy, {0}},          {Codelet::relu, {0}},           {Codelet::add, {0}},
          {Codelet::reduce_add, {4, 0}}, {Codelet::bias_add, {0, 4, 1}}, {Codelet::reduce_bias, {4, 1, 0, 16384, 1}}};
      std::vector<std::string> figures;
      for (const auto& [codelet, shape] : shapes) {
        std::vector<Step> steps;
        // Up to 16384 elements: every operand still fits one tile's memory.
        for (std::uint32_t count : {1u, 16u, 256u, 4096u, 16384u}) {
          std::vector<std::uint32_t> params = shape;
          // The element count is the first zero in the shape.
          *std::find(params.begin(), params.end(), 0u) = count;
          Program program;
          add_call(program, 0, 0, codelet, params);
          steps.push_back({fmt::format("{}({})", codelet_name(codelet), count),
                           model->estimate(well_formed(program, target), target)});
        }
        CheckOutcome outcome = monotone(steps);
        if (!outcome.passed) return outcome;
        figures.push_back(fmt::format("{} {}..{}", codelet_name(codelet), steps.front().estimate.total(),
                                      steps.back().estimate.total()));
      }
      return CheckOutcome::pass(fmt::format("total: {}", fmt::join(figures, ", ")));
    });

    battery.run("monotone-calls-per-tile" + at, [&] {
      auto model = make_cost_model();
      std::vector<Step> steps;
      for (std::uint32_t calls : {1u, 2u, 4u, 8u}) {
        Program program;
        for (std::uint32_t i = 0; i < calls; ++i) add_call(program, 0, 0, Codelet::matmul, {16, 16, 16, 0});
        steps.push_back({fmt::format("{}-calls", calls), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    battery.run("monotone-supersteps" + at, [&] {
      auto model = make_cost_model();
      std::vector<Step> steps;
      for (std::uint32_t supersteps : {1u, 2u, 4u}) {
        Program program;
        for (std::uint32_t s = 0; s < supersteps; ++s) add_call(program, s, 0, Codelet::matmul, {16, 16, 16, 0});
        steps.push_back(
            {fmt::format("{}-supersteps", supersteps), model->estimate(well_formed(program, target), target)});
      }
      return monotone(steps);
    });

    if (target.tiles >= 2) {
      battery.run("monotone-copy-words" + at, [&] {
        auto model = make_cost_model();
        std::vector<Step> steps;
        for (std::uint32_t words : {1u, 16u, 256u, 4096u, 65536u}) {
          Program program;
          add_copy(program, 0, 0, last_tile, words);
          steps.push_back({fmt::format("{}-words", words), model->estimate(well_formed(program, target), target)});
        }
        return monotone(steps);
      });

      battery.run("monotone-exchange-words" + at, [&] {
        auto model = make_cost_model();
        std::vector<Step> steps;
        for (std::uint32_t words : {1u, 16u, 256u, 4096u, 1u << 20}) {
          CostEstimate estimate;
          estimate.exchange_cycles =
              model->estimate_exchange(single_transfer_phase(target.tiles, 0, last_tile, words), target);
          steps.push_back({fmt::format("{}-words", words), estimate});
        }
        return monotone(steps, "exchange cycles");
      });

      battery.run("monotone-exchange-fan-in" + at, [&] {
        auto model = make_cost_model();
        std::vector<Step> steps;
        for (std::uint32_t senders : {1u, 2u, 8u, 64u}) {
          ExchangePhase phase = empty_phase(target.tiles);
          for (std::uint32_t s = 1; s <= std::min(senders, target.tiles - 1); ++s)
            phase.transfers.push_back(transfer(s, {0}, 256));
          CostEstimate estimate;
          estimate.exchange_cycles = model->estimate_exchange(phase, target);
          steps.push_back({fmt::format("{}-senders", phase.transfers.size()), estimate});
        }
        return monotone(steps, "exchange cycles");
      });
    }

    battery.run("peak-memory" + at, [&] {
      auto model = make_cost_model();
      std::uint64_t previous = 0;
      std::vector<std::string> figures;
      for (std::uint32_t size : {8u, 32u, 128u}) {
        Program program;
        add_call(program, 0, 0, Codelet::matmul, {size, size, size, 0});
        std::uint64_t largest = 0;
        for (const Buffer& buffer : program.buffers) largest = std::max<std::uint64_t>(largest, buffer.bytes);
        const CostEstimate estimate = model->estimate(well_formed(program, target), target);
        if (std::string problem = implausible(estimate); !problem.empty()) return CheckOutcome::fail(problem);
        if (estimate.peak_tile_bytes < largest)
          return CheckOutcome::fail(fmt::format("peak_tile_bytes={} is below the {}-byte buffer live on tile 0",
                                                estimate.peak_tile_bytes, largest));
        if (estimate.peak_tile_bytes < previous)
          return CheckOutcome::fail(fmt::format("peak_tile_bytes fell from {} to {} as the buffers grew", previous,
                                                estimate.peak_tile_bytes));
        previous = estimate.peak_tile_bytes;
        figures.push_back(fmt::format("{}^3={}", size, estimate.peak_tile_bytes));
      }
      return CheckOutcome::pass(fmt::format("peak_tile_bytes: {}", fmt::join(figures, " ")));
    });

    battery.run("large-program" + at, [&] {
      // Every tile computes and sends to its neighbour: select-finalist costs programs like
      // this once per candidate, so the figure printed is worth watching.
      Program program;
      for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
        add_call(program, 0, tile, Codelet::matmul, {32, 32, 32, 0});
        if (target.tiles >= 2) add_copy(program, 0, tile, (tile + 1) % target.tiles, 1024);
      }
      well_formed(program, target);
      auto model = make_cost_model();
      const auto started = Clock::now();
      const CostEstimate first = model->estimate(program, target);
      const std::int64_t elapsed_ms = milliseconds_since(started);
      if (std::string problem = implausible(first); !problem.empty()) return CheckOutcome::fail(problem);
      const CostEstimate again = model->estimate(program, target);
      if (again.compute_cycles != first.compute_cycles || again.exchange_cycles != first.exchange_cycles ||
          again.sync_cycles != first.sync_cycles || again.peak_tile_bytes != first.peak_tile_bytes)
        return CheckOutcome::fail(
            fmt::format("two estimates of the same program differ (total {} then {})", first.total(), again.total()));
      return CheckOutcome::pass(fmt::format("tiles={} compute={} exchange={} sync={} peak_tile_bytes={} elapsed_ms={}",
                                            target.tiles, first.compute_cycles, first.exchange_cycles,
                                            first.sync_cycles, first.peak_tile_bytes, elapsed_ms));
    });
  }
  return battery.take();
}

}  // namespace tessera::testing
