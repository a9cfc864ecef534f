// Block plans: ops on whole rows (softmax, layer_norm), products of activations, adds of differently spread
// activations.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "distribution.hpp"
#include "fragment.hpp"
#include "tessera/pass.hpp"

namespace tessera::select_finalist {

/// What a block plan reads from the planner.
struct BlockPlanContext {
  const Graph& graph;
  const Op& op;
  std::uint32_t op_index = 0;
  const Program& program;
  const Target& target;
  PassContext& context;
  const std::vector<std::optional<Distribution>>& distributions;  ///< per tensor, once computed
  /// Whether a candidate's new buffers fit beside what is already resident.
  std::function<bool(const std::vector<TileBytes>&)> fits;
  OrientationChoice orientation = OrientationChoice::automatic;
  /// The tile a block op's first piece goes to; advanced past the tiles it used, so that
  /// consecutive layers' weights, vertex states and exchange descriptors (held for the whole
  /// program) land on different tiles instead of piling onto the first ones.
  std::uint32_t tile_cursor = 0;
  /// Ops no plan fitted, each planned with its smallest: the planner names them once it knows
  /// the pass is final (a re-plan may fit them).
  std::vector<std::uint32_t>* unfit_ops = nullptr;
};

/// softmax, layer_norm, row reductions, and matmul by an activation or with transpose_b: the
/// ops plan_block_op plans (binary and unary ops reach it when their operands are spread
/// differently or come from the host).
bool is_block_op(const Graph& graph, const Op& op);

/// A rows x cols block of a 2-D tensor (1-D tensors are one row).
struct Block {
  std::uint32_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;
};

/// A new buffer on `tile` holding `block` of tensor `index` packed row-major (column-major,
/// i.e. the block transposed, when `column_major`): written by the host when the tensor has
/// no distribution (an input or weight; row-major only), else gathered from the tensor's
/// blocks in `superstep`'s exchange (on-tile parts by copy codelets).
std::uint32_t gather_block(FragmentBuilder& builder, std::uint32_t superstep, const Graph& graph,
                           const std::vector<std::optional<Distribution>>& distributions, std::uint32_t index,
                           Block block, std::uint32_t tile, Region region, std::uint32_t alignment,
                           bool column_major = false);

/// gather_block's copies of `block` (row-major) into a buffer the caller made, from word `to` on;
/// the host writes it when the tensor has no distribution.
void gather_block_into(FragmentBuilder& builder, std::uint32_t superstep, const Graph& graph,
                       const std::vector<std::optional<Distribution>>& distributions, std::uint32_t index, Block block,
                       BufferRef to);

/// out = a op b over `count` elements for a binary op (add, sub, mul, div, a comparison or logic)
/// whose operands are of type `operands`: add's codelet or binary's with the function for that type.
void call_binary(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind, DType operands,
                 std::uint32_t a, std::uint32_t b, std::uint32_t out, std::uint32_t count);
/// values[r, c] op= row[c] for a binary op: bias_add (float16 rows too) or binary_row.
void call_binary_row(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind,
                     DType row_dtype, std::uint32_t values, std::uint32_t row, std::uint32_t rows, std::uint32_t cols);
/// values[r, c] op= column[r] for a binary op of `operands` (binary_column).
void call_binary_column(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind,
                        DType operands, std::uint32_t values, std::uint32_t column, std::uint32_t rows,
                        std::uint32_t cols);
/// out = f(in) over `count` elements for a unary op other than relu (exact in place allowed); a
/// cast reads its types from the graph.
void call_unary(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, const Graph& graph, const Op& op,
                std::uint32_t in, std::uint32_t out, std::uint32_t count);

/// How many copies gather_block makes for `block` from `distribution` in either layout.
std::uint64_t gather_copies(const Distribution& distribution, Block block, bool column_major);

/// Plans one op into `fragment`: enumerates its splits over the tiles, costs each fitting
/// one with the cost model, keeps the cheapest and logs the choice.
Status plan_block_op(BlockPlanContext& plan, std::optional<Fragment>& fragment);

}  // namespace tessera::select_finalist
