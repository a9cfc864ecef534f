// The `analytic` cost model: closed-form estimates of compute, exchange, sync and memory.
//
// Deliberately its own formulas, not tessera::codelet_cycles: a cost model is the part a
// team replaces or calibrates against measured profiles, so it must not be the simulator's
// ground truth by construction. Everything is linear in the program's size (1,472 tiles and
// ~100k copies estimate in milliseconds), because select-finalist calls it per candidate.
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdint>
#include <span>
#include <string>
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

// The machine model's shape (docs/targets.md), as smooth closed forms: work split evenly
// over the workers without rounding to whole vectors, a fixed cost per call.
// Launching a codelet: the supervisor starts the workers, each sets up its loop.
constexpr double kCallOverheadCycles = 170;
// Tile cycles per element of an elementwise codelet (6 workers each issuing every 6th cycle,
// 64-bit vectors of two floats): copy and relu one instruction a pair, add and bias_add a
// pair of loads, the add and the store in three.
constexpr double kCopyCyclesPerElement = 0.5;
constexpr double kReluCyclesPerElement = 0.5;
constexpr double kAddCyclesPerElement = 1.5;
constexpr double kBiasAddCyclesPerElement = 1.5;
constexpr double kHalfBiasCyclesPerElement = 0.5;
// Reductions: per output float, 0.75 a part plus 1.75 of loop overhead (loops of four floats).
constexpr double kReduceCyclesPerPartElement = 0.75;
constexpr double kReduceCyclesPerElement = 1.75;
// Preparing the AMP's operands: transposing b, casting a to half.
constexpr double kTransposeCyclesPerElement = 1.0;
constexpr double kToHalfCyclesPerElement = 0.5;
// A fused codelet runs its steps one after another (bias then relu; reduce then bias; softmax's
// five, layer_norm's six), each step a call's overhead of its own.
// Row steps per element and per row (per worker: rows go to the workers whole), and the
// steps split evenly over the elements (softmax's exp, layer_norm's gamma and beta).
constexpr double kSoftmaxSteps = 5, kSoftmaxCyclesPerElement = 7.5, kSoftmaxCyclesPerRow = 80;
constexpr double kExpCyclesPerElement = 3;
constexpr double kLayerNormSteps = 6, kLayerNormCyclesPerElement = 4.5, kLayerNormCyclesPerRow = 90;
constexpr double kReduceRowCyclesPerElement = 0.5;
constexpr double kRowScalarCyclesPerRow = 28;  // binary_column: a row's scalar and pointers
constexpr double kReduceRowCyclesPerRow = 13;
// unary, binary, binary_row: the core's worker cycles per vector of two floats for the
// function (tessera::function_cycles_per_vector) are tile cycles per element over two.
constexpr double kFunctionCyclesPerVectorCycle = 0.5;
// The AMP: per pass its weights load at load_bytes_per_cycle, a fixed cost, and each worker
// streams its field rows (an accumulator-pipeline fill of ~46 worker cycles at least).
constexpr double kAmpPassCycles = 25;
constexpr double kAmpWorkerFillCycles = 46;
constexpr double kAmpWorkerBaseCycles = 22;
// Worker MAC: a dot product per output, one worker cycle per two floats (four halves after a
// cast of a), 14 per output, 51 a worker.
constexpr double kMacPerOutputCycles = 14;
// An embedding lookup: per index, loading it, checking it against the tile's rows and pointing at
// the row, about 19 worker cycles (3 tile cycles over the 6 workers); then the row as a copy.
constexpr double kMultiSliceCyclesPerIndex = 3;
constexpr double kMacWorkerCycles = 51;

// Saturates: a cast of a double past 2^64 (or NaN) to an integer is undefined.
std::uint64_t ceil_cycles(double cycles) {
  if (!(cycles > 0)) return 0;
  if (cycles >= 1.8e19) return std::numeric_limits<std::uint64_t>::max();
  return static_cast<std::uint64_t>(std::ceil(cycles));
}

double threads_of(const Target& target) { return std::max<std::uint32_t>(target.worker_threads, 1); }

// Row codelets give each worker whole rows: the busiest worker has ceil(rows / threads).
double row_cycles(double rows, double cols, double per_element, double per_row, const Target& target) {
  const double threads = threads_of(target);
  return std::ceil(rows / threads) * (cols * per_element + per_row) * threads;
}

// The faster of the AMP in the call's orientation and the worker MAC path.
double matmul_cycles(Codelet codelet, double m, double k, double n, bool swapped, const Target& target) {
  const bool half = codelet == Codelet::matmul_half;
  const double in = half ? target.amp_fp16_input_channels : target.amp_fp32_input_channels;
  const double out = half ? target.amp_fp16_output_channels : target.amp_fp32_output_channels;
  const double macs = std::max<std::uint32_t>(half ? target.fp16_macs_per_cycle : target.fp32_macs_per_cycle, 1);
  const double threads = threads_of(target);
  const double field = swapped ? n : m, outputs = swapped ? m : n;
  const double passes = std::ceil(k / in) * std::ceil(outputs / out);
  const double weight_load = in * out * (half ? 2 : 4) / std::max<std::uint32_t>(target.load_bytes_per_cycle, 1);
  const double worker =
      std::max(kAmpWorkerFillCycles, kAmpWorkerBaseCycles + in * out / macs * std::ceil(field / threads));
  double amp = passes * (kAmpPassCycles + weight_load + threads * worker);
  // b's k values must be contiguous for the field: b [k, n] swapped and b [n, k] as_is transpose it.
  if (tessera::matmul_transposes_b(codelet, swapped ? 1 : 0)) amp += k * n * kTransposeCyclesPerElement;
  if (half) amp += m * k * kToHalfCyclesPerElement;
  // A dot product reads pairs (fours of halves) of b's k values only where they are contiguous.
  const bool contiguous = tessera::matmul_b_is_n_by_k(codelet, swapped ? 1 : 0) || n == 1;
  const double dot = contiguous ? k / (half ? 4 : 2) : 2 * k;
  const double workers = threads * (kMacWorkerCycles + std::ceil(m * n / threads) * (kMacPerOutputCycles + dot)) +
                         (half ? m * k * kToHalfCyclesPerElement : 0);
  return std::min(amp, workers);
}

// A convolution: per conv group the call spans and kernel position, a product of the output
// field by the group's input channels (matmul_cycles); a pool reads every tap of every output
// element once, as add reads its pairs.
double conv_cycles(const std::vector<std::uint32_t>& p, const Target& target) {
  using namespace tessera;
  const double pixels = double(p[kConvOutRows]) * p[kConvOutWidth], outs = p[kConvOutChannels];
  const double group_out = std::max<std::uint32_t>(p[kConvGroupOutChannels], 1);
  const double groups = outs == 0 ? 0 : std::floor((outs - 1 + p[kConvFirstOutChannel]) / group_out) + 1;
  const double positions = double(p[kConvKernelH]) * p[kConvKernelW];
  const double product =
      matmul_cycles(Codelet::matmul, pixels, p[kConvGroupInChannels], std::min(outs, group_out), false, target);
  const double epilogue =
      (p[kConvFlags] & (kConvHasBias | kConvRelu)) != 0 ? pixels * outs * kBiasAddCyclesPerElement : 0;
  return groups * positions * product + epilogue;
}

double pool_cycles(const std::vector<std::uint32_t>& p) {
  using namespace tessera;
  return double(p[kPoolOutRows]) * p[kPoolOutWidth] * p[kPoolChannels] * p[kPoolKernelH] * p[kPoolKernelW] *
         kAddCyclesPerElement;
}

std::uint64_t estimate_call(const CodeletCall& call, const Target& target) {
  const std::vector<std::uint32_t>& p = call.params;
  if (p.size() != tessera::codelet_param_count(call.codelet))
    throw tessera::Error(fmt::format("codelet call on tile {}: {} takes {} params, got {}", call.tile,
                                     tessera::codelet_name(call.codelet), tessera::codelet_param_count(call.codelet),
                                     p.size()));
  double cycles = kCallOverheadCycles;
  // A fused relu over `count` elements: one more step.
  auto relu = [](bool fused, double count) {
    return fused ? kCallOverheadCycles + count * kReluCyclesPerElement : 0.0;
  };
  switch (call.codelet) {
    case Codelet::matmul:
    case Codelet::matmul_transposed:
    case Codelet::matmul_half:
      cycles += matmul_cycles(
          call.codelet, p[0], p[1], p[2],
          p[tessera::kMatmulOrientationParam] == static_cast<std::uint32_t>(tessera::MatmulOrientation::swapped),
          target);
      break;
    case Codelet::bias_add_half:
      cycles += double(p[0]) * p[1] * (kBiasAddCyclesPerElement + kHalfBiasCyclesPerElement) +
                relu(p[2] != 0, double(p[0]) * p[1]);
      break;
    case Codelet::softmax:
      cycles += (kSoftmaxSteps - 1) * kCallOverheadCycles +
                row_cycles(p[0], p[1], kSoftmaxCyclesPerElement, kSoftmaxCyclesPerRow, target) +
                double(p[0]) * p[1] * kExpCyclesPerElement;
      break;
    case Codelet::layer_norm:
      cycles += (kLayerNormSteps - 1) * kCallOverheadCycles +
                row_cycles(p[0], p[1], kLayerNormCyclesPerElement, kLayerNormCyclesPerRow, target) +
                2 * double(p[0]) * p[1] * kBiasAddCyclesPerElement;
      break;
    case Codelet::reduce_add:
      cycles += double(p[1]) * (kReduceCyclesPerPartElement * p[0] + kReduceCyclesPerElement);
      break;
    case Codelet::bias_add:
      cycles += double(p[0]) * p[1] * kBiasAddCyclesPerElement + relu(p[2] != 0, double(p[0]) * p[1]);
      break;
    case Codelet::relu:
      cycles += p[0] * kReluCyclesPerElement;
      break;
    case Codelet::add:
      cycles += p[0] * kAddCyclesPerElement;
      break;
    case Codelet::copy:
      cycles += p[0] * kCopyCyclesPerElement;
      break;
    case Codelet::unary:
    case Codelet::binary:
      cycles += p[0] * kFunctionCyclesPerVectorCycle * double(tessera::function_cycles_per_vector(call.codelet, p));
      break;
    case Codelet::binary_row:
      cycles += double(p[0]) * p[1] * kFunctionCyclesPerVectorCycle *
                double(tessera::function_cycles_per_vector(call.codelet, p));
      break;
    case Codelet::reduce_rows:
      cycles += row_cycles(p[0], p[1], kReduceRowCyclesPerElement, kReduceRowCyclesPerRow, target);
      break;
    case Codelet::transpose:
      cycles += double(p[0]) * p[1] * kTransposeCyclesPerElement;
      break;
    case Codelet::binary_column:
      cycles += row_cycles(p[0], p[1],
                           kFunctionCyclesPerVectorCycle * double(tessera::function_cycles_per_vector(call.codelet, p)),
                           kRowScalarCyclesPerRow, target);
      break;
    case Codelet::reduce_bias:
      // parts + the own partial (rows walked separately), then the bias step (and relu).
      cycles += double(p[1]) * p[2] * (kReduceCyclesPerPartElement * (double(p[0]) + 1) + kReduceCyclesPerElement) +
                kCallOverheadCycles + double(p[1]) * p[2] * kBiasAddCyclesPerElement +
                relu(p[4] != 0, double(p[1]) * p[2]);
      break;
    case Codelet::conv:
      cycles += conv_cycles(p, target);
      break;
    case Codelet::pool:
      cycles += pool_cycles(p);
      break;
    case Codelet::clip:
      cycles += p[0] * kAddCyclesPerElement;
      break;
    case Codelet::cast:  // a conversion a value, as a copy walks it
      cycles += p[0] * kCopyCyclesPerElement;
      break;
    case Codelet::select:  // three loads and a store a value, about two adds' worth
      cycles += 2 * p[0] * kAddCyclesPerElement;
      break;
    case Codelet::multi_slice:  // per index a row's offset and bounds check, then its row copied
      cycles += p[2] * (kMultiSliceCyclesPerIndex + p[1] * kCopyCyclesPerElement);
      break;
  }
  return ceil_cycles(cycles);
}

void check_tile(std::uint32_t tile, const Target& target, const std::string& what) {
  if (tile >= target.tiles)
    throw tessera::Error(
        fmt::format("{} is on tile {} but target '{}' has {} tiles", what, tile, target.name, target.tiles));
}

class AnalyticCostModel final : public tessera::CostModel {
public:
  static const tessera::OptionTable<AnalyticCostModel>& option_table() {
    static const tessera::OptionTable<AnalyticCostModel> table{
        tessera::option("exchange_efficiency", &AnalyticCostModel::exchange_efficiency_, 1.0,
                        "fraction of the fabric's peak a schedule reaches; exchange words are divided by it")
            .at_least(0.001)  // smaller would make any phase cost more cycles than 64 bits count
            .at_most(1.0),
    };
    return table;
  }
  tessera::Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    for (std::size_t index = 0; index < program.buffers.size(); ++index)
      check_tile(program.buffers[index].tile, target,
                 fmt::format("buffer {} ('{}')", index, program.buffers[index].name));
    CostEstimate estimate;
    std::vector<std::uint64_t> tile_compute(target.tiles, 0);
    std::vector<std::uint32_t> busy_tiles;
    for (const tessera::Superstep& step : program.supersteps) {
      // Compute: the slowest tile holds everyone at the barrier.
      std::uint64_t slowest = 0;
      for (const CodeletCall& call : step.compute) {
        check_tile(call.tile, target,
                   fmt::format("a {} call of superstep '{}'", tessera::codelet_name(call.codelet), step.label));
        if (tile_compute[call.tile] == 0) busy_tiles.push_back(call.tile);
        tile_compute[call.tile] += estimate_call(call, target);
        slowest = std::max(slowest, tile_compute[call.tile]);
      }
      for (std::uint32_t tile : busy_tiles) tile_compute[tile] = 0;
      busy_tiles.clear();
      estimate.compute_cycles += slowest;

      // Before lower-exchanges, the phase its copies will become.
      if (!step.exchange.transfers.empty()) estimate.exchange_cycles += estimate_exchange_impl(step.exchange, target);
      else if (!step.copies.empty())
        estimate.exchange_cycles += estimate_exchange_impl(tessera::physical_phase(program, step, target), target);
      estimate.sync_cycles += target.sync_cycles;
    }
    estimate.peak_tile_bytes = tessera::peak_live_bytes(program);
    return estimate;
  }

  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase, const Target& target) override {
    const std::uint64_t bound = tessera::endpoint_lower_bound(phase);
    if (bound == 0) return 0;
    double latency_sum = 0;
    std::uint64_t pairs = 0;
    for (const tessera::Transfer& transfer : phase.transfers)
      for (std::uint32_t destination : transfer.destinations) {
        latency_sum += target.latency(transfer.source, destination);
        ++pairs;
      }
    const std::uint64_t mean_latency =
        pairs == 0 ? 0 : static_cast<std::uint64_t>(std::llround(latency_sum / double(pairs)));
    return exchange_cycles(bound, mean_latency, target);
  }

private:
  std::uint64_t exchange_cycles(std::uint64_t endpoint_words, std::uint64_t mean_latency, const Target& target) const {
    return ceil_cycles(double(endpoint_words) / exchange_efficiency_) + mean_latency + target.exchange_phase_overhead;
  }

  double exchange_efficiency_ = 0;  // set by configure from option_table()
};

}  // namespace

extern "C" const TesseraPluginManifest* analytic_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_COST_MODEL, "analytic", "0.1.0",
      "closed-form compute, exchange (endpoint bound), sync and peak memory estimates",
      AnalyticCostModel::option_table(), "", "", &tessera::create_plugin_object<AnalyticCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(analytic_manifest)
