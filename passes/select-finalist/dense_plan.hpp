// Operator plans of one dense op: candidate splits, their cheap screening figure and their fragments.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "distribution.hpp"
#include "fragment.hpp"

namespace tessera::select_finalist {

/// Where a dense op's x chunks come from.
enum class InputSource : std::uint8_t {
  distributed,   ///< gathered over the exchange from x's pieces (x was computed or spread)
  host_slices,   ///< written by the host straight into every x chunk (replicated per column group)
  host_scatter,  ///< written by the host once, spread over the tiles, then gathered like a value
};
const char* input_source_name(InputSource source);

/// out[m,n] = act(x[m,k] * w[k,n] + bias), with where its operands come from.
struct DenseOp {
  std::string name;  ///< "dense0": superstep labels and buffer names
  std::uint32_t m = 0, k = 0, n = 0;
  std::uint32_t x_index = 0, output_index = 0;  ///< tensor indices
  const Tensor* x = nullptr;
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;  ///< null: no bias
  bool relu = false;
  /// Pieces of x sorted by column when x already has a distribution; otherwise empty and x
  /// comes from the host.
  std::vector<Piece> x_pieces;
  /// Where host_scatter would put x: pieces sorted by column (buffers not yet made).
  std::vector<Piece> scatter_layout;
  /// The program has no superstep yet, so a gather needs a superstep of its own.
  bool first_superstep = false;
  OrientationChoice orientation = OrientationChoice::automatic;
};

/// n split into column_groups groups, k into depth_groups groups; group (c, g) runs on
/// tile (c * depth_groups + g + tile_offset) mod tiles, so a column group's reduction stays
/// among neighbours; the offset (the tile mapping) moves groups off the tiles that hold
/// their own x, whose on-tile copies cost compute.
struct DenseCandidate {
  std::uint32_t column_groups = 1;
  std::uint32_t depth_groups = 1;
  InputSource input = InputSource::distributed;
  /// Each column group's columns in this many slices, multiplied and reduced one after
  /// another (slice s+1's matmul beside slice s's reduction) so the partial-sum and reduce
  /// buffers hold one slice: the plan when memory is short. Only with depth_groups > 1.
  std::uint32_t serial_splits = 1;
  /// Two-stage reduction when > 1: the depth groups reduce in this many blocks of
  /// neighbours first, then the blocks' sums are reduced across the blocks, so no reduction
  /// adds more than ~depth_groups / reduction_blocks parts. Only without serial splits.
  std::uint32_t reduction_blocks = 1;
  std::uint32_t tile_offset = 0;
  /// Rotates each column group's depth groups over its tiles so that no group lands on a
  /// tile holding x it needs (see TileMapping).
  bool rotated = false;
  /// Group (c, g) on tile g * column_groups + c (+ offset): depth groups in blocks, so a
  /// whole block can be moved off the tiles holding its x (the reduction spreads out).
  bool transposed = false;
  /// m split into this many row groups, each with the whole column x depth grid of groups
  /// on its own tiles: x chunks, partials and outputs shrink by the factor, the weights are
  /// held once per row group. (Last, so that plans without it order as before.)
  std::uint32_t row_groups = 1;
  /// m in this many chunks of rows, multiplied and reduced one after another on the same
  /// tiles with the same weights, x chunk, partial and reduce buffers: the plan for a batch
  /// whose x and partials do not fit at once. Only with a one-stage depth split and no
  /// column serial splits.
  std::uint32_t serial_row_splits = 1;
  auto operator<=>(const DenseCandidate&) const = default;
};

/// Which tile runs group (r, c, g) of row group r: tile (r * C * D + c * D + (g + rotation[r, c])
/// mod D + offset) mod tiles (transposed: r * C * D + g * C + c + offset).
class TileMapping {
public:
  TileMapping(const DenseOp& op, DenseCandidate candidate, const Target& target);
  std::uint32_t tile(std::uint32_t r, std::uint32_t c, std::uint32_t g) const {
    const std::uint64_t depth = candidate_.depth_groups, grid = depth * candidate_.column_groups;
    if (candidate_.transposed)
      return static_cast<std::uint32_t>(
          (r * grid + std::uint64_t{g} * candidate_.column_groups + c + candidate_.tile_offset) % tiles_);
    const std::uint64_t slot =
        rotation_.empty() ? g : (g + rotation_[std::uint64_t{r} * candidate_.column_groups + c]) % depth;
    return static_cast<std::uint32_t>((r * grid + c * depth + slot + candidate_.tile_offset) % tiles_);
  }

private:
  DenseCandidate candidate_;
  std::uint32_t tiles_;
  std::vector<std::uint32_t> rotation_;  ///< per row and column group; empty when not rotated
};

/// How a tile mapping loads the gather of x: the most words a tile sends or receives over
/// the exchange, the longest latency of a gather copy, and the busiest tile's on-tile copy
/// cycles (x it already holds, which the exchange cannot send to itself).
struct MappingLoad {
  std::uint64_t exchange_load = 0;
  std::uint64_t latency = 0;
  std::uint64_t on_tile_cycles = 0;
  std::uint64_t figure() const { return exchange_load + latency + on_tile_cycles; }
};
MappingLoad mapping_load(const DenseOp& op, DenseCandidate candidate, const Target& target);

/// How host_scatter spreads x: balanced column pieces, piece i on tile i.
std::vector<Piece> scatter_layout(std::uint32_t columns, std::uint32_t tiles);

/// Where a host_scatter candidate has the host write x: one piece per depth group (its x
/// chunk) on tiles spread evenly, so each receiver listens to one sender, which multicasts
/// the chunk to every column group; op.scatter_layout when x is not split in depth.
std::vector<Piece> host_scatter_layout(const DenseOp& op, DenseCandidate candidate, std::uint32_t tiles);

/// Row-group counts from powers of two up to m; for each, over its share of the tiles,
/// column-group counts from powers of two, divisors of n, values near sqrt(tiles) and
/// tiles / (depth-group counts); for each, the deepest split that fits the tiles and a few
/// shallower ones; each with one- and two-stage reductions and every input source the op
/// allows. Sorted, without duplicates.
std::vector<DenseCandidate> enumerate_dense_candidates(const DenseOp& op, std::uint32_t tiles);

/// A dense op's pins (0: not pinned).
struct DensePins {
  std::uint32_t column_groups = 0, depth_groups = 0, serial_splits = 0, reduction_blocks = 0, row_groups = 0;
  std::uint32_t serial_row_splits = 0;
  bool any() const {
    return column_groups != 0 || depth_groups != 0 || serial_splits != 0 || reduction_blocks != 0 || row_groups != 0 ||
           serial_row_splits != 0;
  }
};

/// The candidates with their fields replaced by the pinned ones, clamped so they fit the op
/// and the tiles (see clamp_serial_splits, clamp_reduction_blocks). Sorted, without duplicates.
std::vector<DenseCandidate> pin_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                           std::uint32_t tiles, DensePins pins);

/// Serial splits a candidate can take: 1 without a depth split (its partial sums are its
/// output), else at most the narrowest column group's width.
std::uint32_t clamp_serial_splits(const DenseOp& op, DenseCandidate candidate, std::uint32_t serial_splits);

/// Reduction blocks a candidate can take: 1 (one stage) with serial (row) splits or fewer than 4
/// depth groups, else at most depth_groups / 2 (every block has two depth groups or more).
std::uint32_t clamp_reduction_blocks(DenseCandidate candidate, std::uint32_t reduction_blocks);

/// Serial row splits a candidate can take: 1 without a one-stage depth split, with column
/// serial splits or from host slices (whose x chunks the host writes at the start, all of
/// them), else at most the rows that give every chunk's row groups a row each.
std::uint32_t clamp_serial_row_splits(const DenseOp& op, DenseCandidate candidate, std::uint32_t splits);

/// The candidates again with each of `splits` serial row splits (those that clamp to 1
/// dropped): what the planner tries when nothing else fits. Sorted, without duplicates.
std::vector<DenseCandidate> serial_row_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                                  const std::vector<std::uint32_t>& splits);

/// The candidates again with each of `splits` serial splits (those that clamp to 1 dropped):
/// what the planner tries when no plan without serial splits fits. Sorted, without duplicates.
std::vector<DenseCandidate> serial_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                              const std::vector<std::uint32_t>& splits);

/// A cheap figure to order candidates before building them: the busiest tile's codelet
/// cycles plus the exchange resource load (the most words any tile sends or receives, one
/// word per cycle) of the gather and the reduce-scatter, barriers, and the per-run host
/// input cycles. Not a cost model; it only decides which candidates are worth costing.
std::uint64_t screening_cycles(const DenseOp& op, DenseCandidate candidate, const Target& target);

/// How a candidate's depth groups share its reduction: "rows" or "columns" of each slice per
/// owner, or "none" without a depth split (two-stage reductions split columns).
const char* reduce_scatter_name(const DenseOp& op, DenseCandidate candidate);

/// The matmul call of a candidate's busiest tile and its chosen orientation, for screening
/// and for the log line that says why the orientation was chosen. Each orientation is
/// charged with the weights laid out as it streams them (constant_weight_matmul).
struct BusiestMatmul {
  bool half_weights = false;
  std::uint32_t m = 0, k = 0, n = 0, orientation = 0;
  std::uint64_t cycles(std::uint32_t in_orientation, const Target& target) const;
};
BusiestMatmul busiest_matmul(const DenseOp& op, DenseCandidate candidate, const Target& target);

/// One candidate's fragment. Construction lays out the buffers only (cheap: the memory
/// check needs nothing more); build() adds the compute, copies and host slices.
class DenseFragment {
public:
  DenseFragment(const DenseOp& op, DenseCandidate candidate, const Program& program, const Target& target);
  bool oversized() const { return builder_.oversized(); }
  std::uint64_t peak_temporary_bytes() const { return builder_.peak_temporary_bytes(target_.tiles); }
  /// The fragment with its buffers laid out and nothing built yet (see FragmentBuilder::laid_out).
  const Fragment& laid_out() const { return builder_.laid_out(); }
  Fragment build() &&;

private:
  struct GroupBuffers {
    std::uint32_t row_group, tile, x_chunk, bias;
    std::vector<std::uint32_t> weights;  ///< per serial slice
    /// Slice s multiplies into partials[s % 2]: with serial splits the next slice's matmul
    /// runs while this one's reduction still reads the owner's partial in place.
    std::uint32_t partials[2];
  };
  /// A piece of the output: its owner receives the parts of it into `reduce` and reduces
  /// them (with the epilogue) into `out` in `superstep`.
  struct OwnedPiece {
    std::uint32_t chunk, row_group, column_group, owner_depth_group, tile, slice;
    Range columns;  ///< relative to the slice
    std::uint32_t reduce, out, bias;
    std::uint32_t superstep, parts;  ///< parts: received ones plus the owner's own
    BufferRef own;                   ///< the owner's own part, which reduce_bias reads in place
    std::uint32_t own_stride;
    std::uint32_t block, stage_piece;  ///< two-stage: the holder's block and stage piece
    Range rows;                        ///< relative to the row group
    bool streams_bias = true;          ///< false: an earlier chunk's piece streamed its (shared) bias
  };
  /// Two-stage reductions: holder (block r, piece j) of a column group, the depth group
  /// blocks[r].begin + j, first sums block (r - 1) mod R's partials of stage piece j.
  struct StagePiece {
    std::uint32_t row_group, column_group, block, piece, tile;
    Range columns;              ///< relative to the column group
    std::uint32_t reduce, sum;  ///< laid out sub-piece by sub-piece (see lay_out_two_stage)
  };
  /// The superstep slice s multiplies in (its reduce-scatter is that superstep's exchange);
  /// it reduces in the next.
  static std::uint32_t matmul_superstep(std::uint32_t slice) { return 1 + slice; }
  void lay_out_buffers();
  void lay_out_two_stage();
  void build_two_stage();
  void reduce_owned_pieces(Distribution& output);
  const StagePiece& stage_piece(std::uint32_t r, std::uint32_t c, std::uint32_t block, std::uint32_t piece) const {
    const std::uint64_t column_group = std::uint64_t{r} * columns_.size() + c;
    return stage_pieces_[(column_group * candidate_.reduction_blocks + block) * stage_piece_count() + piece];
  }
  /// Stage pieces per column group: the smallest block's size (balanced_split puts it last).
  std::uint32_t stage_piece_count() const { return blocks_.back().size; }
  const GroupBuffers& group(std::uint32_t r, std::uint32_t c, std::uint32_t g) const {
    return groups_[(std::uint64_t{r} * columns_.size() + c) * depths_.size() + g];
  }
  /// Chunk `chunk`'s row group r: its rows of the op.
  Range chunk_rows(std::uint32_t chunk, std::uint32_t r) const {
    return {chunks_[chunk].begin + chunk_groups_[chunk][r].begin, chunk_groups_[chunk][r].size};
  }
  /// The superstep chunk `chunk` gathers x in (its matmul is the next; chunks overlap a superstep).
  std::uint32_t chunk_base(std::uint32_t chunk) const { return 2 * chunk; }
  void gather_x(const GroupBuffers& group, Range depth, Range rows, std::uint32_t superstep);
  /// An output piece of the op's `rows` (no row range when it is every row of the op).
  Piece output_piece(Range rows, std::uint32_t tile, std::uint32_t col_begin, std::uint32_t cols,
                     std::uint32_t buffer) const;
  /// x's pieces in fragment buffers (existing or made for host_scatter), sorted by column.
  std::vector<Piece> x_pieces_;
  void epilogue(std::uint32_t superstep, std::uint32_t tile, std::uint32_t rows, std::uint32_t values,
                std::uint32_t bias_buffer, std::uint32_t col_begin, std::uint32_t cols, bool stream_bias = true);
  static constexpr std::uint32_t kNoBuffer = 0xffffffffu;

  const DenseOp& op_;
  DenseCandidate candidate_;
  const Target& target_;
  TileMapping mapping_;
  FragmentBuilder builder_;
  std::vector<Range> rows_, columns_, depths_;    ///< rows_: the first (largest) chunk's row groups
  std::vector<Range> chunks_;                     ///< serial row chunks (one without serial row splits)
  std::vector<std::vector<Range>> chunk_groups_;  ///< per chunk: its row groups, relative to it
  std::vector<std::vector<Range>> slices_;        ///< per column group: its serial slices, relative to it
  std::vector<GroupBuffers> groups_;              ///< index (r * column_groups + c) * depth_groups + g
  std::vector<OwnedPiece> pieces_;                ///< reduce-scatter owners (depth_groups > 1), final stage
  std::vector<Range> blocks_;                     ///< depth groups per reduction block (two-stage only)
  std::vector<StagePiece> stage_pieces_;          ///< index ((r * C + c) * blocks + block) * stage pieces + j
};

}  // namespace tessera::select_finalist
