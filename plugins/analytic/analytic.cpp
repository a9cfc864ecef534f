// The `analytic` cost model: closed-form estimates of compute, exchange, sync and memory.
//
// Deliberately its own formulas, not tessera::codelet_cycles: a cost model is the part a
// team replaces or calibrates against measured profiles, so it must not be the simulator's
// ground truth by construction. Everything is linear in the program's size (1,472 tiles and
// ~100k copies estimate in milliseconds), because select-finalist calls it per candidate.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/codelets.hpp"
#include "tessera/cost_model.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
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

// Launching a codelet (supervisor spawns the workers, they fetch their operands' addresses).
constexpr double kCallOverheadCycles = 40;
// The matmul unit's pipeline fills and drains once per call.
constexpr double kMatmulPipelineCycles = 60;

// Worker-thread instructions per element of an elementwise codelet, with 64-bit loads and
// stores moving two float32 at once: copy = load + store per pair; relu adds a max; add
// loads two operands; bias_add reuses its bias row, relu fused in costs one more op.
constexpr double kCopyInstructionsPerElement = 1.0;
constexpr double kReluInstructionsPerElement = 1.5;
constexpr double kAddInstructionsPerElement = 2.0;
constexpr double kBiasAddInstructionsPerElement = 2.0;
constexpr double kFusedReluInstructionsPerElement = 0.5;
// reduce_add: each partial element is one load and one add per float pair.
constexpr double kReduceInstructionsPerPartialElement = 1.0;
// Transposing b for the AMP (strided loads), converting a to half, widening a half bias.
constexpr double kTransposeInstructionsPerElement = 1.0;
constexpr double kToHalfInstructionsPerElement = 0.5;
constexpr double kHalfBiasInstructionsPerElement = 0.5;
// Row codelets, per element: softmax = max + exp (a software sequence of ~6 instructions
// per pair) + sum + normalise; layer_norm = mean + variance + normalise. Per row: the lane
// folds, a reciprocal (and a square root) as Newton sequences.
constexpr double kSoftmaxInstructionsPerElement = 5.5;
constexpr double kSoftmaxInstructionsPerRow = 16;
constexpr double kLayerNormInstructionsPerElement = 3.5;
constexpr double kLayerNormInstructionsPerRow = 26;

std::uint64_t ceil_cycles(double cycles) {
  return cycles <= 0 ? 0 : static_cast<std::uint64_t>(std::ceil(cycles));
}

// Elementwise work is split evenly over the worker threads. The tile issues round-robin
// over its threads, so each thread gets one issue slot every `worker_threads` cycles: the
// slowest thread's share times that interval is the call's length.
double elementwise_cycles(double elements, double instructions_per_element, const Target& target) {
  const double threads = std::max<std::uint32_t>(target.worker_threads, 1);
  const double per_thread = std::ceil(elements / threads);
  return per_thread * instructions_per_element * threads;
}

// Row codelets give each worker whole rows: the busiest worker has ceil(rows / threads).
double row_cycles(double rows, double cols, double per_element, double per_row, const Target& target) {
  const double threads = std::max<std::uint32_t>(target.worker_threads, 1);
  return std::ceil(rows / threads) * (cols * per_element + per_row) * threads;
}

double matmul_cycles(double m, double k, double n, std::uint32_t macs_per_cycle) {
  return kMatmulPipelineCycles + m * k * n / std::max<std::uint32_t>(macs_per_cycle, 1);
}

std::uint64_t estimate_call(const CodeletCall& call, const Target& target) {
  const std::vector<std::uint32_t>& p = call.params;
  if (p.size() != tessera::codelet_param_count(call.codelet))
    throw tessera::Error(fmt::format("codelet call on tile {}: {} takes {} params, got {}",
                                     call.tile, tessera::codelet_name(call.codelet),
                                     tessera::codelet_param_count(call.codelet), p.size()));
  double cycles = kCallOverheadCycles;
  switch (call.codelet) {
    case Codelet::matmul:
      cycles += matmul_cycles(p[0], p[1], p[2], target.fp32_macs_per_cycle);
      break;
    case Codelet::matmul_transposed:
      cycles += matmul_cycles(p[0], p[1], p[2], target.fp32_macs_per_cycle) +
                elementwise_cycles(double(p[2]) * p[1], kTransposeInstructionsPerElement, target);
      break;
    case Codelet::matmul_half:
      cycles += matmul_cycles(p[0], p[1], p[2], target.fp16_macs_per_cycle) +
                elementwise_cycles(double(p[0]) * p[1], kToHalfInstructionsPerElement, target);
      break;
    case Codelet::bias_add_half:
      cycles += elementwise_cycles(double(p[0]) * double(p[1]),
                                   kBiasAddInstructionsPerElement + kHalfBiasInstructionsPerElement +
                                       (p[2] ? kFusedReluInstructionsPerElement : 0.0),
                                   target);
      break;
    case Codelet::softmax:
      cycles += row_cycles(p[0], p[1], kSoftmaxInstructionsPerElement, kSoftmaxInstructionsPerRow, target);
      break;
    case Codelet::layer_norm:
      cycles += row_cycles(p[0], p[1], kLayerNormInstructionsPerElement, kLayerNormInstructionsPerRow, target);
      break;
    case Codelet::reduce_add:
      cycles += elementwise_cycles(double(p[0]) * double(p[1]), kReduceInstructionsPerPartialElement,
                                   target);
      break;
    case Codelet::bias_add:
      cycles += elementwise_cycles(double(p[0]) * double(p[1]),
                                   kBiasAddInstructionsPerElement +
                                       (p[2] ? kFusedReluInstructionsPerElement : 0.0),
                                   target);
      break;
    case Codelet::relu:
      cycles += elementwise_cycles(p[0], kReluInstructionsPerElement, target);
      break;
    case Codelet::add:
      cycles += elementwise_cycles(p[0], kAddInstructionsPerElement, target);
      break;
    case Codelet::copy:
      cycles += elementwise_cycles(p[0], kCopyInstructionsPerElement, target);
      break;
    case Codelet::reduce_bias:
      // parts + the own partial, each a load-add per element, then the bias add (and relu).
      cycles += elementwise_cycles(double(p[1]) * double(p[2]),
                                   kReduceInstructionsPerPartialElement * (double(p[0]) + 1) +
                                       kBiasAddInstructionsPerElement +
                                       (p[4] ? kFusedReluInstructionsPerElement : 0.0),
                                   target);
      break;
  }
  return ceil_cycles(cycles);
}

void check_tile(std::uint32_t tile, const Target& target, const std::string& what) {
  if (tile >= target.tiles)
    throw tessera::Error(fmt::format("{} is on tile {} but target '{}' has {} tiles", what, tile,
                                     target.name, target.tiles));
}

// Words sent and received per tile, and the pairs they travel between, for one phase.
class ExchangeLoad {
public:
  explicit ExchangeLoad(const Target& target)
      : target_(target), sent_(target.tiles, 0), received_(target.tiles, 0) {}

  void add(std::uint32_t source, std::uint32_t destination, std::uint64_t words,
           bool count_send) {
    if (count_send) note(sent_, source, words);
    note(received_, destination, words);
    latency_sum_ += target_.latency(source, destination);
    ++pairs_;
  }

  bool empty() const { return pairs_ == 0; }
  std::uint64_t endpoint_words() const { return busiest_; }
  std::uint64_t mean_latency() const {
    return pairs_ == 0 ? 0 : static_cast<std::uint64_t>(std::llround(latency_sum_ / double(pairs_)));
  }

  void clear() {
    for (std::uint32_t tile : touched_) sent_[tile] = received_[tile] = 0;
    touched_.clear();
    busiest_ = 0;
    latency_sum_ = 0;
    pairs_ = 0;
  }

private:
  void note(std::vector<std::uint64_t>& load, std::uint32_t tile, std::uint64_t words) {
    if (sent_[tile] == 0 && received_[tile] == 0) touched_.push_back(tile);
    load[tile] += words;
    busiest_ = std::max(busiest_, load[tile]);
  }

  const Target& target_;
  std::vector<std::uint64_t> sent_, received_;
  std::vector<std::uint32_t> touched_;  ///< so clearing costs the phase, not the chip
  std::uint64_t busiest_ = 0;
  double latency_sum_ = 0;
  std::uint64_t pairs_ = 0;
};

class AnalyticCostModel final : public tessera::CostModel {
public:
  tessera::Status configure(const tessera::Options& options) override {
    exchange_efficiency_ = options.get_number("exchange_efficiency");
    if (!(exchange_efficiency_ > 0.0 && exchange_efficiency_ <= 1.0))
      return tessera::Status::failure(fmt::format(
          "option 'exchange_efficiency' is {}; it is the fraction of the fabric's peak a "
          "schedule reaches, so give a number in (0, 1], e.g. 0.8",
          exchange_efficiency_));
    return tessera::Status::success();
  }

protected:
  CostEstimate estimate_impl(const Program& program, const Target& target) override {
    for (std::size_t index = 0; index < program.buffers.size(); ++index)
      check_tile(program.buffers[index].tile, target, fmt::format("buffer {} ('{}')", index,
                                                                  program.buffers[index].name));
    CostEstimate estimate;
    std::vector<std::uint64_t> tile_compute(target.tiles, 0);
    std::vector<std::uint32_t> busy_tiles;
    ExchangeLoad load(target);
    for (const tessera::Superstep& step : program.supersteps) {
      // Compute: the slowest tile holds everyone at the barrier.
      std::uint64_t slowest = 0;
      for (const CodeletCall& call : step.compute) {
        check_tile(call.tile, target, fmt::format("a {} call of superstep '{}'",
                                                  tessera::codelet_name(call.codelet), step.label));
        if (tile_compute[call.tile] == 0) busy_tiles.push_back(call.tile);
        tile_compute[call.tile] += estimate_call(call, target);
        slowest = std::max(slowest, tile_compute[call.tile]);
      }
      for (std::uint32_t tile : busy_tiles) tile_compute[tile] = 0;
      busy_tiles.clear();
      estimate.compute_cycles += slowest;

      if (!step.exchange.transfers.empty())
        estimate.exchange_cycles += estimate_exchange_impl(step.exchange, target);
      else if (!step.copies.empty())
        estimate.exchange_cycles += estimate_copies(program, step, target, load);
      estimate.sync_cycles += target.sync_cycles;
    }
    estimate.peak_tile_bytes = tessera::peak_live_bytes(program);
    return estimate;
  }

  std::uint64_t estimate_exchange_impl(const ExchangePhase& phase,
                                       const Target& target) override {
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
  std::uint64_t exchange_cycles(std::uint64_t endpoint_words, std::uint64_t mean_latency,
                                const Target& target) const {
    return ceil_cycles(double(endpoint_words) / exchange_efficiency_) + mean_latency +
           target.exchange_phase_overhead;
  }

  // Before lower-exchanges, the phase is the superstep's copies between buffers.
  std::uint64_t estimate_copies(const Program& program, const tessera::Superstep& step,
                                const Target& target, ExchangeLoad& load) const {
    struct SentRange {
      std::uint32_t buffer, word_offset, words;
      auto operator<=>(const SentRange&) const = default;
    };
    // On a multicast target, copies of the same source words are one send heard by several
    // receivers; find the repeats by sorting instead of hashing (exact, and as fast).
    std::vector<SentRange> ranges;
    if (target.multicast) {
      ranges.reserve(step.copies.size());
      for (const tessera::Copy& copy : step.copies)
        ranges.push_back({copy.source.buffer, copy.source.word_offset, copy.words});
      std::sort(ranges.begin(), ranges.end());
    }
    std::vector<std::uint8_t> send_counted(ranges.size(), 0);
    load.clear();
    for (std::size_t index = 0; index < step.copies.size(); ++index) {
      const tessera::Copy& copy = step.copies[index];
      if (copy.source.buffer >= program.buffers.size() ||
          copy.destination.buffer >= program.buffers.size())
        throw tessera::Error(fmt::format("copy {} of superstep '{}' names buffer {} of {}",
                                         index, step.label,
                                         std::max(copy.source.buffer, copy.destination.buffer),
                                         program.buffers.size()));
      const std::uint32_t source = program.buffers[copy.source.buffer].tile;
      const std::uint32_t destination = program.buffers[copy.destination.buffer].tile;
      if (source == destination || copy.words == 0) continue;  // never crosses the fabric
      bool count_send = true;
      if (target.multicast) {
        const SentRange range{copy.source.buffer, copy.source.word_offset, copy.words};
        const auto found = std::lower_bound(ranges.begin(), ranges.end(), range);
        auto& counted = send_counted[static_cast<std::size_t>(found - ranges.begin())];
        count_send = !counted;
        counted = 1;
      }
      load.add(source, destination, copy.words, count_send);
    }
    if (load.empty()) return 0;
    return exchange_cycles(load.endpoint_words(), load.mean_latency(), target);
  }

  double exchange_efficiency_ = 1.0;
};

const TesseraOptionSpec kOptions[] = {
    {"exchange_efficiency", "float", "1.0",
     "fraction of the fabric's peak a schedule reaches; exchange words are divided by it"},
};

}  // namespace

extern "C" const TesseraPluginManifest* analytic_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_COST_MODEL, "analytic", "0.1.0",
      "closed-form compute, exchange (endpoint bound), sync and peak memory estimates",
      kOptions, "", "", &tessera::create_plugin_object<AnalyticCostModel>);
  return &manifest;
}
TESSERA_PLUGIN(analytic_manifest)
