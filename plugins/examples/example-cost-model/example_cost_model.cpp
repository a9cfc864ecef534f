// example-cost-model: a roofline cost model, an out-of-tree cost-model plugin.
//
// Built against the installed Tessera SDK (see docs/plugin-guide.md). Each codelet call costs
// a fixed launch overhead plus the larger of its arithmetic cycles (multiply-accumulates at the
// target's fp32 rate, other codelets one element per cycle) and its memory cycles (every
// operand word loaded or stored once, two words per cycle over the 64-bit load path). A
// superstep costs its slowest tile, then its exchange: the busiest tile's words sent or
// received, plus the longest latency and the phase overhead. Copies not yet lowered are
// estimated as the phase the SDK's physical_phase says lower-exchanges will build from them.
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/lowering.hpp"
#include "tessera/option_table.hpp"
#include "tessera/plugin.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace {

using tessera::Codelet;
using tessera::CodeletCall;
using tessera::CostEstimate;
using tessera::ExchangePhase;
using tessera::Program;
using tessera::Target;

// A tile moves 64 bits (two float32 words) between memory and registers per cycle.
constexpr std::uint64_t kWordsPerMemoryCycle = 2;

std::uint64_t ceil_div(std::uint64_t value, std::uint64_t divisor) { return (value + divisor - 1) / divisor; }

class ExampleCostModel final : public tessera::CostModel {
public:
  // An unsigned member makes the option at least 0; the host refuses -5 with the pipeline's place.
  static const tessera::OptionTable<ExampleCostModel>& option_table() {
    static const tessera::OptionTable<ExampleCostModel> table{
        tessera::option("call_overhead_cycles", &ExampleCostModel::call_overhead_cycles_, 40,
                        "cycles to launch one codelet call, added to its roofline time"),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    CostEstimate estimate;
    std::vector<std::uint64_t> tile_cycles(std::max<std::uint32_t>(target.tiles, 1), 0);
    for (const tessera::Superstep& step : program.supersteps) {
      std::fill(tile_cycles.begin(), tile_cycles.end(), 0);
      for (const CodeletCall& call : step.compute) {
        if (call.tile >= target.tiles)
          throw tessera::Error(fmt::format("superstep '{}': a {} call is on tile {} but target '{}' has {} tiles",
                                           step.label, tessera::codelet_name(call.codelet), call.tile, target.name,
                                           target.tiles));
        tile_cycles[call.tile] += call_cycles(call, target);
      }
      estimate.compute_cycles += *std::max_element(tile_cycles.begin(), tile_cycles.end());
      if (!step.exchange.transfers.empty()) estimate.exchange_cycles += estimate_exchange_impl(step.exchange, target);
      else if (!step.copies.empty())
        estimate.exchange_cycles += estimate_exchange_impl(tessera::physical_phase(program, step, target), target);
      estimate.sync_cycles += target.sync_cycles;
    }
    estimate.peak_tile_bytes = peak_tile_bytes(program, target);
    return estimate;
  }

  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) override {
    const std::uint64_t busiest = tessera::endpoint_lower_bound(phase);
    if (busiest == 0) return 0;  // nothing crosses the fabric: no exchange phase runs
    std::uint64_t longest_latency = 0;
    for (const tessera::Transfer& transfer : phase.transfers)
      for (std::uint32_t destination : transfer.destinations)
        longest_latency = std::max<std::uint64_t>(longest_latency, target.latency(transfer.source, destination));
    return busiest + longest_latency + target.exchange_phase_overhead;
  }

private:
  std::uint64_t call_cycles(const CodeletCall& call, const Target& target) const {
    const std::span<const std::uint32_t> params(call.params);
    if (params.size() != tessera::codelet_param_count(call.codelet))
      throw tessera::Error(fmt::format("a {} call on tile {} has {} params, the codelet takes {}",
                                       tessera::codelet_name(call.codelet), call.tile, params.size(),
                                       tessera::codelet_param_count(call.codelet)));
    std::uint64_t words = 0;
    for (std::uint32_t operand = 0; operand < tessera::codelet_operand_count(call.codelet); ++operand)
      words += tessera::codelet_operand_words(call.codelet, params, operand);
    std::uint64_t arithmetic = 0;
    switch (call.codelet) {
      case Codelet::matmul:
      case Codelet::matmul_transposed:
        arithmetic = ceil_div(std::uint64_t{params[0]} * params[1] * params[2],
                              std::max<std::uint32_t>(target.fp32_macs_per_cycle, 1));
        break;
      case Codelet::matmul_half:
        arithmetic = ceil_div(std::uint64_t{params[0]} * params[1] * params[2],
                              std::max<std::uint32_t>(target.fp16_macs_per_cycle, 1));
        break;
      case Codelet::bias_add_half:
        arithmetic = std::uint64_t{params[0]} * params[1] * (params[2] ? 2 : 1);
        break;
      case Codelet::softmax:
      case Codelet::layer_norm:
        arithmetic = std::uint64_t{params[0]} * params[1] * 4;
        break;
      case Codelet::reduce_add:
        arithmetic = std::uint64_t{params[0]} * params[1];
        break;
      case Codelet::bias_add:
        arithmetic = std::uint64_t{params[0]} * params[1] * (params[2] ? 2 : 1);
        break;
      case Codelet::relu:
      case Codelet::add:
      case Codelet::copy:
      case Codelet::unary:
      case Codelet::binary:
        arithmetic = params[0];
        break;
      case Codelet::binary_row:
      case Codelet::binary_column:
      case Codelet::reduce_rows:
      case Codelet::transpose:
        arithmetic = std::uint64_t{params[0]} * params[1];
        break;
      case Codelet::reduce_bias:
        arithmetic = (std::uint64_t{params[0]} + 2) * params[1] * params[2];
        break;
    }
    return call_overhead_cycles_ + std::max(arithmetic, ceil_div(words, kWordsPerMemoryCycle));
  }

  // The core's liveness peak (each buffer rounded up to its alignment), on tiles the target has.
  static std::uint64_t peak_tile_bytes(const Program& program, const Target& target) {
    for (const tessera::Buffer& buffer : program.buffers)
      if (buffer.tile >= target.tiles)
        throw tessera::Error(fmt::format("buffer '{}' is on tile {} but target '{}' has {} tiles", buffer.name,
                                         buffer.tile, target.name, target.tiles));
    return tessera::peak_live_bytes(program);
  }

  std::uint64_t call_overhead_cycles_ = 0;  // set by configure from option_table()
};

}  // namespace

extern "C" const TesseraPluginManifest* example_cost_model_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_COST_MODEL, "example-cost-model", "0.1.0",
      "roofline per codelet call, busiest-port exchange, liveness-aware peak memory (an out-of-tree example)",
      ExampleCostModel::option_table(), "", "", &tessera::create_plugin_object<ExampleCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(example_cost_model_manifest)
