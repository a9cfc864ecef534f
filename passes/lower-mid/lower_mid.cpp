// lower-mid: canonicalises the graph — checks every shape, fuses matmul/add/relu into dense, drops dead ops.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/option_table.hpp"
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

/// A global pool (its kernel the whole unpadded field) over more than `min_pixels` pixels becomes
/// two: one over each image row, then one over the column of row results. In one stage, a tile
/// reads the whole field of its channels (409,600 bytes for 80x80x16 floats); in two, the rows
/// spread over tiles as poplibs' pooling planner splits a kernel and reduces its parts. The mean
/// of row means is the mean, since every row has the same width.
std::size_t split_global_pools(Graph& graph, std::int64_t min_pixels) {
  std::size_t split = 0;
  for (std::size_t i = 0; i < graph.ops.size(); ++i) {
    const Op op = graph.ops[i];
    const tessera::Window& w = op.window;
    if (op.kind != OpKind::avg_pool && op.kind != OpKind::max_pool) continue;
    const bool global = w.kernel_h == w.height && w.kernel_w == w.width && w.dilation_h == 1 && w.dilation_w == 1 &&
                        w.pad_top == 0 && w.pad_left == 0 && w.pad_bottom == 0 && w.pad_right == 0;
    if (!global || w.height < 2 || w.width < 2 || std::int64_t{w.height} * w.width <= min_pixels) continue;
    const Tensor& output = graph.tensors[op.output];
    Tensor rows;
    rows.name = output.name + ".row_pool";
    rows.shape = {std::int64_t{op.batch} * w.height, output.cols()};
    rows.dtype = output.dtype;
    rows.place = output.place;
    graph.tensors.push_back(std::move(rows));
    Op by_row = op, by_column = op;
    by_row.window = tessera::Window{.height = w.height, .width = w.width, .kernel_w = w.width, .stride_w = w.width};
    by_row.output = static_cast<std::uint32_t>(graph.tensors.size() - 1);
    by_column.window = tessera::Window{.height = w.height, .width = 1, .kernel_h = w.height};
    by_column.inputs = {by_row.output};
    graph.ops[i] = by_column;
    graph.ops.insert(graph.ops.begin() + static_cast<std::ptrdiff_t>(i), by_row);
    ++i;
    ++split;
  }
  return split;
}

struct LowerMidOptions {
  std::int64_t two_stage_pool_pixels = 1024;
};

const tessera::OptionTable<LowerMidOptions>& option_table() {
  static const tessera::OptionTable<LowerMidOptions> table{
      tessera::option("two_stage_pool_pixels", &LowerMidOptions::two_stage_pool_pixels, std::int64_t{1024},
                      "a global pool over more pixels than this runs in two stages (each image row, then the "
                      "column of row results), so its field spreads over tiles; 0: every global pool of a field "
                      "at least 2x2")
          .range(0, std::int64_t{1} << 40),
  };
  return table;
}

class LowerMid final : public tessera::Pass {
public:
  Status configure(const tessera::Options& options) override { return option_table().assign(options, options_); }

protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    if (state.graph.ops.empty() && state.graph.tensors.empty()) state.graph = state.model;
    Graph& graph = state.graph;
    const std::size_t operations_before = graph.ops.size();
    if (Status status = infer_and_check_shapes(graph); !status.ok) return status;
    // Dead readers go first: they would otherwise keep an intermediate from being fused.
    const std::size_t removed = remove_dead_ops(graph);
    const FusionCounts fused = fuse_dense_chains(graph);
    const std::size_t pools_split = split_global_pools(graph, options_.two_stage_pool_pixels);
    const std::size_t dropped = drop_unused_intermediates(graph);
    // The fused ops must still type-check; a failure here is a fusion bug, reported as such.
    if (Status status = infer_and_check_shapes(graph); !status.ok)
      return Status::failure("internal error after fusing dense ops: " + status.message);
    context.info(
        "lowered graph operations_before={} operations_after={} dense_ops={} "
        "absorbed_ops={} dead_ops_removed={} tensors_dropped={} global_pools_split={}",
        operations_before, graph.ops.size(), fused.dense, fused.absorbed, removed, dropped, pools_split);
    return Status::success();
  }

private:
  LowerMidOptions options_;
};

}  // namespace

extern "C" const TesseraPluginManifest* lower_mid_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "lower-mid", "0.1.0",
      "infers and checks shapes, fuses matmul+bias+relu into dense ops, runs large global pools in two stages, "
      "removes dead ops",
      option_table(), tessera::facts::graph, tessera::facts::canonical, &tessera::create_plugin_object<LowerMid>);
  return &manifest;
}
TESSERA_PLUGIN(lower_mid_manifest)
