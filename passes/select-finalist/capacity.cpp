// The capacity check: weight and live activation bytes against each region across the target.
#include "capacity.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace tessera::select_finalist {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::uint64_t tensor_bytes(const Tensor& tensor) {
  return packed_words(static_cast<std::uint64_t>(tensor.elements()), tensor.dtype) * 4;
}

/// Matmul right operands and conv weights: block_plans.cpp makes their buffers in the
/// interleaved region (the AMP's operands). Dense weights are standard data place-storage
/// moves to the interleaved region when need be, and every other read may be standard.
bool interleaved_operand(const Op& op, std::size_t slot) {
  return slot == 1 && (op.kind == OpKind::matmul || op.kind == OpKind::conv);
}

std::string bytes_text(std::uint64_t bytes) {
  return fmt::format("{} bytes ({:.1f} MiB)", bytes, static_cast<double>(bytes) / kMiB);
}

double ratio(std::uint64_t need, std::uint64_t capacity) {
  if (capacity == 0) return need == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(need) / static_cast<double>(capacity);
}

/// The binding ratio of a need with `weights` bytes of weights, `interleaved` of them for the
/// interleaved region only, and `live` bytes of activations.
double need_ratio_of(const CapacityNeed& need, std::uint64_t weights, std::uint64_t interleaved, std::uint64_t live) {
  return std::max(ratio(interleaved, need.interleaved_capacity), ratio(weights + live, need.capacity()));
}

}  // namespace

double CapacityNeed::need_ratio() const {
  return need_ratio_of(*this, weight_bytes, interleaved_weight_bytes, live_activation_bytes);
}

CapacityNeed capacity_need(const Graph& graph, const Target& target) {
  CapacityNeed need;
  // region_for: a target without one region puts everything in the other.
  const std::uint64_t standard_per_tile = std::min(target.interleaved_start, target.memory_bytes);
  const std::uint64_t interleaved_per_tile = target.memory_bytes - standard_per_tile;
  need.standard_capacity = std::uint64_t{target.tiles} * standard_per_tile;
  need.interleaved_capacity = std::uint64_t{target.tiles} * interleaved_per_tile;

  const std::size_t tensors = graph.tensors.size(), ops = graph.ops.size();
  std::vector<bool> any_slot(tensors, false), only_interleaved(tensors, true), only_float16(tensors, true);
  constexpr std::uint32_t kNever = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> last_reader(tensors, kNever);
  for (std::uint32_t i = 0; i < ops; ++i) {
    const Op& op = graph.ops[i];
    for (std::size_t slot = 0; slot < op.inputs.size(); ++slot) {
      const std::uint32_t input = op.inputs[slot];
      any_slot[input] = true;
      only_interleaved[input] = only_interleaved[input] && interleaved_operand(op, slot);
      only_float16[input] = only_float16[input] && may_be_float16(graph, op, slot);
      last_reader[input] = i;
    }
  }
  const auto end_of_run = static_cast<std::uint32_t>(ops);
  for (std::uint32_t output : graph.outputs) last_reader[output] = end_of_run;  // read back after the last op

  for (std::size_t t = 0; t < tensors; ++t) {
    const Tensor& tensor = graph.tensors[t];
    if (tensor.kind != TensorKind::weight || !any_slot[t]) continue;
    const std::uint64_t bytes = tensor_bytes(tensor);
    need.weight_bytes += bytes;
    if (only_interleaved[t] && interleaved_per_tile > 0) need.interleaved_weight_bytes += bytes;
    const bool halved = only_float16[t] && tensor.dtype == DType::float32;
    const std::uint64_t bytes16 =
        halved ? packed_words(static_cast<std::uint64_t>(tensor.elements()), DType::float16) * 4 : bytes;
    need.float16_weight_bytes += bytes16;
    if (only_interleaved[t] && interleaved_per_tile > 0) need.float16_interleaved_weight_bytes += bytes16;
  }

  // Inputs are written before the first superstep and held until their last reader; an op's
  // result from the op until its last reader (graph outputs: the end). While op i runs, what
  // lives past it is held, and so are its own operands (at its start) or its result (at its end);
  // a product holds both: no matmul runs in place, and the dense and product plans multiply
  // every operand block in one superstep into partials or results covering the whole result.
  std::uint64_t alive = 0;
  for (std::size_t t = 0; t < tensors; ++t)
    if (graph.tensors[t].kind == TensorKind::input && last_reader[t] != kNever) alive += tensor_bytes(graph.tensors[t]);
  std::vector<std::uint32_t> own;
  for (std::uint32_t i = 0; i < ops; ++i) {
    const Op& op = graph.ops[i];
    own.clear();
    for (std::uint32_t input : op.inputs)
      if (graph.tensors[input].kind != TensorKind::weight && last_reader[input] == i &&
          std::find(own.begin(), own.end(), input) == own.end())
        own.push_back(input);
    std::uint64_t own_bytes = 0;
    for (std::uint32_t input : own) own_bytes += tensor_bytes(graph.tensors[input]);
    const std::uint64_t result_bytes = tensor_bytes(graph.tensors[op.output]);
    const bool product = op.kind == OpKind::dense || op.kind == OpKind::matmul;
    const std::uint64_t live =
        alive - own_bytes + (product ? own_bytes + result_bytes : std::max(own_bytes, result_bytes));
    if (live > need.live_activation_bytes) need.live_activation_bytes = live, need.peak_op = i;
    alive -= own_bytes;
    if (last_reader[op.output] != kNever) alive += result_bytes;
  }
  return need;
}

Status check_capacity(const Graph& graph, const Target& target, PassContext& context) {
  const CapacityNeed need = capacity_need(graph, target);
  const double need_ratio = need.need_ratio();
  if (need_ratio <= 1.0) {
    context.info(
        "capacity check passed weight_bytes={} interleaved_weight_bytes={} live_activation_bytes={} "
        "standard_capacity={} interleaved_capacity={} need_ratio={:.3f}",
        need.weight_bytes, need.interleaved_weight_bytes, need.live_activation_bytes, need.standard_capacity,
        need.interleaved_capacity, need_ratio);
    return Status::success();
  }

  const std::uint64_t tiles = target.tiles;
  const std::uint64_t interleaved_per_tile = tiles ? need.interleaved_capacity / tiles : 0;
  const std::uint64_t standard_per_tile = tiles ? need.standard_capacity / tiles : 0;
  const Op& peak = graph.ops[need.peak_op];
  const std::string file = graph.source_file.empty() ? graph.name : graph.source_file;

  std::string full;
  const double interleaved_ratio = ratio(need.interleaved_weight_bytes, need.interleaved_capacity);
  const std::uint64_t total_need = need.weight_bytes + need.live_activation_bytes;
  if (interleaved_ratio > 1.0)
    full = fmt::format("the interleaved region: the matmul and conv weights need {:.2f}x what it holds",
                       interleaved_ratio);
  else
    full = fmt::format(
        "the whole memory (both regions): the weights and the live activations need {} bytes, {:.2f}x "
        "what it holds",
        total_need, ratio(total_need, need.capacity()));

  // What would fit: float16 weights, more chips, a smaller batch.
  std::vector<std::string> would;
  if (need.float16_weight_bytes < need.weight_bytes) {
    const double ratio16 = need_ratio_of(need, need.float16_weight_bytes, need.float16_interleaved_weight_bytes,
                                         need.live_activation_bytes);
    would.push_back(
        fmt::format("float16 storage of the float32 matmul weights and biases would make the weights {}: {}",
                    bytes_text(need.float16_weight_bytes),
                    ratio16 <= 1.0 ? "that would fit (tessera compile --float16-weights)"
                                   : fmt::format("still {:.2f}x what fits, not enough", ratio16)));
  } else {
    would.push_back("float16 storage would not help: every weight that may be float16 is already");
  }
  const auto chips = static_cast<std::uint64_t>(std::ceil(need_ratio));
  would.push_back(fmt::format("the model needs {:.2f}x one chip's memory: {} chips' worth of '{}' ({} tiles each)",
                              need_ratio, chips, target.name, target.tiles));
  const bool weights_fit = need.weight_bytes < need.capacity() && interleaved_ratio <= 1.0;
  const Tensor* batch_input = nullptr;
  for (const Tensor& tensor : graph.tensors)
    if (tensor.kind == TensorKind::input && (!batch_input || tensor.rows() > batch_input->rows()))
      batch_input = &tensor;
  if (!weights_fit) {
    would.push_back("a smaller batch would not: the weights alone do not fit");
  } else if (need.live_activation_bytes > 0 && batch_input) {
    // Activations grow with the batch (the inputs' rows): scale them down to the room the weights leave.
    const double share =
        static_cast<double>(need.capacity() - need.weight_bytes) / static_cast<double>(need.live_activation_bytes);
    const auto rows = static_cast<std::uint64_t>(std::floor(static_cast<double>(batch_input->rows()) * share));
    would.push_back(
        rows == 0 ? fmt::format("no smaller batch would: the weights leave {} for activations, less than one row "
                                "of input '{}' needs",
                                bytes_text(need.capacity() - need.weight_bytes), batch_input->name)
                  : fmt::format("a batch about {:.2f}x this one would, the activations growing with it: input '{}' "
                                "with at most about {} of its {} rows",
                                share, batch_input->name, rows, batch_input->rows()));
  }

  std::string message = fmt::format(
      "{}: model does not fit on target '{}' ('{}'), even with every weight held once and only the activations that "
      "must coexist live (checked before planning):\n"
      "  weights: {}{}\n"
      "  activations: at least {} live at once, at op {} ({} '{}')\n"
      "  capacity across the {} tiles: interleaved region {} x {} = {}, standard region {} x {} = {}, {} in all\n"
      "  full: {}\n",
      file, target.name, graph.name, bytes_text(need.weight_bytes),
      need.interleaved_weight_bytes == 0
          ? ""
          : fmt::format(", of which {} are matmul and conv weights, which only the interleaved region holds",
                        bytes_text(need.interleaved_weight_bytes)),
      bytes_text(need.live_activation_bytes), need.peak_op, op_kind_name(peak.kind), graph.tensors[peak.output].name,
      tiles, tiles, interleaved_per_tile, bytes_text(need.interleaved_capacity), tiles, standard_per_tile,
      bytes_text(need.standard_capacity), bytes_text(need.capacity()), full);
  for (const std::string& line : would) message += "  what would fit: " + line + "\n";
  message += fmt::format(
      "  fix: declare the weights float16 (docs/models.md), shrink the model or its batch, or use a target with more "
      "tiles or memory per tile than '{}'",
      target.name);
  return Status::failure(std::move(message));
}

}  // namespace tessera::select_finalist
