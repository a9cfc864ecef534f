// lower-mid: canonicalises the graph — checks every shape, fuses matmul/add/relu into dense, drops dead ops.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/pass.hpp"

namespace {

using tessera::Graph;
using tessera::Op;
using tessera::OpKind;
using tessera::Status;
using tessera::Tensor;
using tessera::TensorKind;

std::string shape_text(const std::vector<std::int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

std::string place_text(const Graph& graph, const Op& op) {
  return fmt::format("{}:{}:{}", graph.source_file.empty() ? graph.name : graph.source_file, op.place.line,
                     op.place.column);
}

/// Checks that every op reads tensors that exist by the time it runs, infers its output
/// shape and compares it with the shape already recorded (a model or an earlier pass may
/// have written one). Fills in shapes that are missing.
Status infer_and_check_shapes(Graph& graph) {
  std::vector<bool> available(graph.tensors.size(), false);
  for (std::size_t t = 0; t < graph.tensors.size(); ++t)
    available[t] = graph.tensors[t].kind != TensorKind::intermediate;
  for (const Op& op : graph.ops) {
    const std::string place = place_text(graph, op);
    if (op.output >= graph.tensors.size())
      return Status::failure(
          fmt::format("{}: {} writes tensor {} which does not exist", place, op_kind_name(op.kind), op.output));
    for (std::uint32_t input : op.inputs) {
      if (input >= graph.tensors.size())
        return Status::failure(
            fmt::format("{}: {} reads tensor {} which does not exist", place, op_kind_name(op.kind), input));
      if (!available[input])
        return Status::failure(
            fmt::format("{}: {} reads '{}' before any op produces it; order the ops so producers come first", place,
                        op_kind_name(op.kind), graph.tensors[input].name));
    }
    Tensor& output = graph.tensors[op.output];
    std::vector<std::int64_t> inferred;
    if (std::string problem = tessera::infer_shape(graph, op, inferred); !problem.empty()) {
      std::vector<std::string> inputs;
      for (std::uint32_t input : op.inputs)
        inputs.push_back(fmt::format("'{}' {}", graph.tensors[input].name, shape_text(graph.tensors[input].shape)));
      return Status::failure(fmt::format("{}: {} '{}' cannot take inputs {}: {}; fix the shapes in the model", place,
                                         op_kind_name(op.kind), output.name, fmt::join(inputs, " and "), problem));
    }
    if (!output.shape.empty() && output.shape != inferred)
      return Status::failure(
          fmt::format("{}: {} output '{}' has shape {} but its inputs give {}; fix the shapes in the model", place,
                      op_kind_name(op.kind), output.name, shape_text(output.shape), shape_text(inferred)));
    output.shape = std::move(inferred);
    available[op.output] = true;
  }
  for (std::uint32_t output : graph.outputs)
    if (output >= graph.tensors.size() || !available[output])
      return Status::failure(fmt::format("{}: graph output {} is never produced", graph.source_file, output));
  return Status::success();
}

/// For each tensor, the ops reading it (an op reading it twice appears twice).
std::vector<std::vector<std::uint32_t>> readers_of(const Graph& graph) {
  std::vector<std::vector<std::uint32_t>> readers(graph.tensors.size());
  for (std::uint32_t i = 0; i < graph.ops.size(); ++i)
    for (std::uint32_t input : graph.ops[i].inputs) readers[input].push_back(i);
  return readers;
}

struct FusionCounts {
  std::size_t dense = 0;     ///< dense ops made from matmuls
  std::size_t absorbed = 0;  ///< add and relu ops folded into them
};

/// Rewrites every matmul by a weight or input into a dense op and folds a following bias add and/or relu into
/// it when the intermediate tensor has no other reader and is not a graph output (so no one
/// can observe the value the fusion stops materialising). The dense op takes the matmul's
/// position: its other inputs are weights, which are always available.
FusionCounts fuse_dense_chains(Graph& graph) {
  const auto readers = readers_of(graph);
  std::vector<bool> is_output(graph.tensors.size(), false);
  for (std::uint32_t output : graph.outputs) is_output[output] = true;
  // The single op reading `tensor`, when fusing it away is invisible to everyone else.
  auto sole_reader = [&](std::uint32_t tensor) -> const Op* {
    if (is_output[tensor] || readers[tensor].size() != 1) return nullptr;
    return &graph.ops[readers[tensor][0]];
  };

  FusionCounts counts;
  std::vector<bool> absorbed(graph.ops.size(), false);
  for (std::uint32_t i = 0; i < graph.ops.size(); ++i) {
    Op& op = graph.ops[i];
    if (op.kind != OpKind::matmul) continue;
    // A product of two activations (or with b transposed, or batched) is planned as a matmul of its own.
    if (op.transpose_b || op.batch > 1 || graph.tensors[op.inputs[1]].kind == TensorKind::intermediate) continue;
    const std::int64_t columns = graph.tensors[op.output].cols();
    op.kind = OpKind::dense;
    ++counts.dense;
    const Op* next = sole_reader(op.output);
    if (next && next->kind == OpKind::add && next->inputs.size() == 2 && next->inputs[0] == op.output) {
      const Tensor& bias = graph.tensors[next->inputs[1]];
      // The dense epilogue adds a row vector held as weights; other adds stay separate.
      if (bias.kind == TensorKind::weight && bias.shape.size() == 1 && bias.shape[0] == columns) {
        op.inputs.push_back(next->inputs[1]);
        op.output = next->output;
        absorbed[static_cast<std::size_t>(next - graph.ops.data())] = true;
        ++counts.absorbed;
        next = sole_reader(op.output);
      }
    }
    if (next && next->kind == OpKind::relu && next->inputs.size() == 1) {
      op.relu = true;
      op.output = next->output;
      absorbed[static_cast<std::size_t>(next - graph.ops.data())] = true;
      ++counts.absorbed;
    }
  }
  std::vector<Op> kept;
  kept.reserve(graph.ops.size());
  for (std::uint32_t i = 0; i < graph.ops.size(); ++i)
    if (!absorbed[i]) kept.push_back(std::move(graph.ops[i]));
  graph.ops = std::move(kept);
  return counts;
}

/// Removes ops whose results reach no graph output, walking backwards from the outputs.
std::size_t remove_dead_ops(Graph& graph) {
  std::vector<bool> needed(graph.tensors.size(), false);
  for (std::uint32_t output : graph.outputs) needed[output] = true;
  std::vector<bool> live(graph.ops.size(), false);
  for (std::size_t i = graph.ops.size(); i-- > 0;) {
    if (!needed[graph.ops[i].output]) continue;
    live[i] = true;
    for (std::uint32_t input : graph.ops[i].inputs) needed[input] = true;
  }
  std::vector<Op> kept;
  for (std::size_t i = 0; i < graph.ops.size(); ++i)
    if (live[i]) kept.push_back(std::move(graph.ops[i]));
  const std::size_t removed = graph.ops.size() - kept.size();
  graph.ops = std::move(kept);
  return removed;
}

/// Drops intermediate tensors no op touches any more (fused-away or dead values) and
/// renumbers the rest. Inputs and weights stay: they are the model's interface.
std::size_t drop_unused_intermediates(Graph& graph) {
  std::vector<bool> used(graph.tensors.size(), false);
  for (const Op& op : graph.ops) {
    used[op.output] = true;
    for (std::uint32_t input : op.inputs) used[input] = true;
  }
  for (std::uint32_t output : graph.outputs) used[output] = true;
  std::vector<std::uint32_t> new_index(graph.tensors.size(), 0);
  std::vector<Tensor> kept;
  for (std::size_t t = 0; t < graph.tensors.size(); ++t) {
    if (!used[t] && graph.tensors[t].kind == TensorKind::intermediate) continue;
    new_index[t] = static_cast<std::uint32_t>(kept.size());
    kept.push_back(std::move(graph.tensors[t]));
  }
  const std::size_t dropped = graph.tensors.size() - kept.size();
  graph.tensors = std::move(kept);
  for (Op& op : graph.ops) {
    op.output = new_index[op.output];
    for (std::uint32_t& input : op.inputs) input = new_index[input];
  }
  for (std::uint32_t& output : graph.outputs) output = new_index[output];
  return dropped;
}

class LowerMid final : public tessera::Pass {
protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    if (state.graph.ops.empty() && state.graph.tensors.empty()) state.graph = state.model;
    Graph& graph = state.graph;
    const std::size_t operations_before = graph.ops.size();
    if (Status status = infer_and_check_shapes(graph); !status.ok) return status;
    // Dead readers go first: they would otherwise keep an intermediate from being fused.
    const std::size_t removed = remove_dead_ops(graph);
    const FusionCounts fused = fuse_dense_chains(graph);
    const std::size_t dropped = drop_unused_intermediates(graph);
    // The fused ops must still type-check; a failure here is a fusion bug, reported as such.
    if (Status status = infer_and_check_shapes(graph); !status.ok)
      return Status::failure("internal error after fusing dense ops: " + status.message);
    context.info(
        "lowered graph operations_before={} operations_after={} dense_ops={} "
        "absorbed_ops={} dead_ops_removed={} tensors_dropped={}",
        operations_before, graph.ops.size(), fused.dense, fused.absorbed, removed, dropped);
    return Status::success();
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* lower_mid_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "lower-mid", "0.1.0",
      "infers and checks shapes, fuses matmul+bias+relu into dense ops, removes dead ops", tessera::facts::graph,
      tessera::facts::canonical, &tessera::create_plugin_object<LowerMid>);
  return &manifest;
}
TESSERA_PLUGIN(lower_mid_manifest)
