// Candidate splits of a dense op, their screening figure, and the fragment each one builds.
#include "dense_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace tessera::select_finalist {

namespace {

Lifetime lifetime_of(const Tensor& tensor) {
  return tensor.kind == TensorKind::weight ? Lifetime::whole_program : Lifetime::from_start;
}

StreamKind stream_kind_of(const Tensor& tensor) {
  return tensor.kind == TensorKind::weight ? StreamKind::weight : StreamKind::input;
}

std::uint32_t ceil_div(std::uint32_t a, std::uint32_t b) { return (a + b - 1) / b; }

// reduce_bias reads its bias as float32 words; a float16 bias takes reduce_add + bias_add_half.
bool fused_reduction(const DenseOp& op) { return op.bias && op.bias->dtype == DType::float32; }

/// A reduce-scatter gives each depth group whole rows when every one can have some in every
/// row group of every chunk (the smallest has op.m / serial_row_splits / row_groups rows): all
/// row groups then split the same way, and the op's output pieces share their column ranges
/// (gather_x relies on it).
bool owns_rows(const DenseOp& op, DenseCandidate candidate) {
  return op.m / candidate.serial_row_splits / candidate.row_groups >= candidate.depth_groups;
}

// float16 weights and biases are read by the half-weight codelets.
bool half_weights(const DenseOp& op) { return op.w->dtype == DType::float16; }
Codelet bias_codelet(const DenseOp& op) {
  return op.bias && op.bias->dtype == DType::float16 ? Codelet::bias_add_half : Codelet::bias_add;
}

std::uint64_t epilogue_cycles(const DenseOp& op, std::uint32_t rows, std::uint32_t cols, const Target& target) {
  if (op.bias) return codelet_cycles(bias_codelet(op), std::vector<std::uint32_t>{rows, cols, op.relu}, target);
  if (op.relu) return codelet_cycles(Codelet::relu, std::vector<std::uint32_t>{rows * cols}, target);
  return 0;
}

}  // namespace

const char* input_source_name(InputSource source) {
  switch (source) {
    case InputSource::distributed:
      return "distributed";
    case InputSource::host_slices:
      return "host_slices";
    case InputSource::host_scatter:
      return "host_scatter";
  }
  return "?";
}

std::vector<Piece> scatter_layout(std::uint32_t columns, std::uint32_t tiles) {
  std::vector<Piece> pieces;
  const std::vector<Range> ranges = balanced_split(columns, std::min(columns, tiles));
  for (std::uint32_t i = 0; i < ranges.size(); ++i) pieces.push_back({i, ranges[i].begin, ranges[i].size, 0});
  return pieces;
}

std::vector<Piece> host_scatter_layout(const DenseOp& op, DenseCandidate candidate, std::uint32_t tiles) {
  const std::uint32_t depth_groups = candidate.depth_groups, chunks = candidate.serial_row_splits;
  if (depth_groups <= 1 || std::uint64_t{depth_groups} * chunks > tiles) return op.scatter_layout;
  std::vector<Piece> pieces;
  const std::vector<Range> depths = balanced_split(op.k, depth_groups), rows = balanced_split(op.m, chunks);
  const std::uint32_t spacing = tiles / (depth_groups * chunks);
  for (std::uint32_t chunk = 0; chunk < chunks; ++chunk)
    for (std::uint32_t g = 0; g < depth_groups; ++g) {
      const std::uint32_t tile = (chunk * depth_groups + g) * spacing;
      if (chunks == 1) {
        pieces.push_back({tile, depths[g].begin, depths[g].size, 0});
        continue;
      }
      // Serial row chunks (a large batch): each chunk's rows of the depth group spread over the
      // `spacing` tiles that follow, so that no tile holds much of x.
      const std::vector<Range> parts = balanced_split(rows[chunk].size, std::min(spacing, rows[chunk].size));
      for (std::uint32_t p = 0; p < parts.size(); ++p)
        pieces.push_back(
            {tile + p, depths[g].begin, depths[g].size, 0, rows[chunk].begin + parts[p].begin, parts[p].size});
    }
  // Sorted by column (then row), as gather_x expects.
  std::stable_sort(pieces.begin(), pieces.end(),
                   [](const Piece& a, const Piece& b) { return a.col_begin < b.col_begin; });
  return pieces;
}

std::vector<DenseCandidate> enumerate_dense_candidates(const DenseOp& op, std::uint32_t tiles) {
  const std::uint32_t k = op.k, n = op.n;
  auto divisors_up_to = [](std::uint32_t value, std::uint32_t limit) {
    std::set<std::uint32_t> found;
    for (std::uint32_t d = 1; std::uint64_t{d} * d <= value; ++d) {
      if (value % d != 0) continue;
      if (d <= limit) found.insert(d);
      if (value / d <= limit) found.insert(value / d);
    }
    return found;
  };
  auto powers_of_two_up_to = [](std::uint32_t limit) {
    std::set<std::uint32_t> found;
    for (std::uint64_t p = 1; p <= limit; p *= 2) found.insert(static_cast<std::uint32_t>(p));
    return found;
  };

  std::set<DenseCandidate> candidates;
  for (std::uint32_t rows : powers_of_two_up_to(std::min(op.m, tiles))) {
    const std::uint32_t share = tiles / rows;  // each row group's tiles
    const std::uint32_t max_columns = std::min(n, share);
    const std::uint32_t max_depth = std::min(k, share);
    std::set<std::uint32_t> column_options = powers_of_two_up_to(max_columns);
    column_options.merge(divisors_up_to(n, max_columns));
    const auto root = static_cast<std::uint32_t>(std::sqrt(static_cast<double>(share)));
    for (std::uint32_t near : {root, root + 1})
      if (near >= 1 && near <= max_columns) column_options.insert(near);
    // Column counts that fill the tiles for the usual depth counts.
    std::set<std::uint32_t> depth_options = powers_of_two_up_to(max_depth);
    depth_options.merge(divisors_up_to(k, max_depth));
    for (std::uint32_t depth : depth_options) column_options.insert(std::min(max_columns, share / depth));
    column_options.insert(max_columns);

    const std::set<std::uint32_t> depth_divisors = divisors_up_to(k, max_depth);
    for (std::uint32_t columns : column_options) {
      if (columns == 0) continue;
      const std::uint32_t deepest = std::max(1u, std::min(k, share / columns));
      // The deepest split uses every tile; an even divisor of k balances the chunks
      // exactly; shallower splits trade reduction traffic for matmul time.
      auto divisor = depth_divisors.upper_bound(deepest);
      std::uint32_t power = 1;
      while (power * 2 <= deepest) power *= 2;
      for (std::uint32_t depth : {deepest, *std::prev(divisor), power, std::max(1u, deepest / 2), 1u}) {
        // One-stage reductions, and two-stage ones in about sqrt(depth) blocks and in a few
        // powers of two (clamped: duplicates and single blocks fold into the one-stage plan).
        const auto root_blocks = static_cast<std::uint32_t>(std::lround(std::sqrt(static_cast<double>(depth))));
        for (std::uint32_t blocks : {1u, root_blocks, 2u, 4u, 8u, 16u}) {
          DenseCandidate candidate{columns, depth};
          candidate.row_groups = rows;
          candidate.reduction_blocks = clamp_reduction_blocks(candidate, blocks);
          if (blocks != 1 && candidate.reduction_blocks == 1) continue;
          for (InputSource input : op.x_pieces.empty()
                                       ? std::vector{InputSource::host_slices, InputSource::host_scatter}
                                       : std::vector{InputSource::distributed}) {
            candidate.input = input;
            candidates.insert(candidate);
          }
        }
      }
    }
  }
  return {candidates.begin(), candidates.end()};
}

std::vector<DenseCandidate> pin_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                           std::uint32_t tiles, DensePins pins) {
  std::set<DenseCandidate> pinned;
  for (DenseCandidate candidate : candidates) {
    // Pinned rows come first (columns and depth share their tiles); otherwise a candidate's
    // own row groups give way to pinned columns and depth.
    if (pins.row_groups != 0) candidate.row_groups = std::min({pins.row_groups, op.m, tiles});
    if (pins.column_groups != 0)
      candidate.column_groups =
          std::min({pins.column_groups, op.n, pins.row_groups != 0 ? tiles / candidate.row_groups : tiles});
    if (pins.depth_groups != 0) candidate.depth_groups = pins.depth_groups;
    if (pins.row_groups == 0) {
      const std::uint32_t depth =
          std::min(candidate.depth_groups, std::max(1u, std::min(op.k, tiles / candidate.column_groups)));
      candidate.row_groups = std::max(1u, std::min(candidate.row_groups, tiles / (candidate.column_groups * depth)));
    }
    candidate.column_groups = std::min(candidate.column_groups, tiles / candidate.row_groups);
    const std::uint32_t share = tiles / candidate.row_groups;
    const std::uint32_t deepest = std::max(1u, std::min(op.k, share / candidate.column_groups));
    candidate.depth_groups = std::min(candidate.depth_groups, deepest);
    candidate.serial_splits =
        clamp_serial_splits(op, candidate, pins.serial_splits != 0 ? pins.serial_splits : candidate.serial_splits);
    // Pinned serial row splits take a one-stage reduction unless the reduction is pinned too.
    if (pins.serial_row_splits > 1 && pins.reduction_blocks == 0) candidate.reduction_blocks = 1;
    candidate.reduction_blocks = clamp_reduction_blocks(
        candidate, pins.reduction_blocks != 0 ? pins.reduction_blocks : candidate.reduction_blocks);
    candidate.serial_row_splits = clamp_serial_row_splits(
        op, candidate, pins.serial_row_splits != 0 ? pins.serial_row_splits : candidate.serial_row_splits);
    pinned.insert(candidate);
  }
  return {pinned.begin(), pinned.end()};
}

std::uint32_t clamp_serial_splits(const DenseOp& op, DenseCandidate candidate, std::uint32_t serial_splits) {
  if (candidate.depth_groups <= 1 || candidate.column_groups == 0) return 1;
  const std::uint32_t narrowest = op.n / candidate.column_groups;  // balanced_split's smallest group
  return std::max(1u, std::min(serial_splits, narrowest));
}

std::uint32_t clamp_reduction_blocks(DenseCandidate candidate, std::uint32_t reduction_blocks) {
  if (candidate.serial_splits > 1 || candidate.serial_row_splits > 1 || candidate.depth_groups < 4) return 1;
  return std::max(1u, std::min(reduction_blocks, candidate.depth_groups / 2));
}

std::uint32_t clamp_serial_row_splits(const DenseOp& op, DenseCandidate candidate, std::uint32_t splits) {
  if (candidate.depth_groups <= 1 || candidate.reduction_blocks > 1 || candidate.serial_splits > 1 ||
      candidate.input == InputSource::host_slices)
    return 1;
  return std::max(1u, std::min(splits, op.m / std::max(1u, candidate.row_groups)));
}

std::vector<DenseCandidate> serial_row_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                                  const std::vector<std::uint32_t>& splits) {
  std::set<DenseCandidate> serial;
  for (DenseCandidate candidate : candidates)
    for (std::uint32_t split : splits) {
      candidate.serial_row_splits = clamp_serial_row_splits(op, candidate, split);
      if (candidate.serial_row_splits > 1) serial.insert(candidate);
    }
  return {serial.begin(), serial.end()};
}

std::vector<DenseCandidate> serial_candidates(const std::vector<DenseCandidate>& candidates, const DenseOp& op,
                                              const std::vector<std::uint32_t>& splits) {
  std::set<DenseCandidate> serial;
  for (DenseCandidate candidate : candidates) {
    if (candidate.reduction_blocks > 1) continue;  // two-stage plans take no serial splits
    for (std::uint32_t split : splits) {
      candidate.serial_splits = clamp_serial_splits(op, candidate, split);
      if (candidate.serial_splits > 1) serial.insert(candidate);
    }
  }
  return {serial.begin(), serial.end()};
}

BusiestMatmul busiest_matmul(const DenseOp& op, DenseCandidate candidate, const Target& target) {
  BusiestMatmul busiest;
  busiest.half_weights = half_weights(op);
  busiest.m = ceil_div(ceil_div(op.m, candidate.serial_row_splits), candidate.row_groups);
  busiest.k = ceil_div(op.k, candidate.depth_groups);
  busiest.n = ceil_div(ceil_div(op.n, candidate.column_groups), candidate.serial_splits);
  busiest.orientation =
      weight_matmul(busiest.half_weights, busiest.m, busiest.k, busiest.n, target, op.orientation).orientation;
  return busiest;
}

std::uint64_t BusiestMatmul::cycles(std::uint32_t in_orientation, const Target& target) const {
  return matmul_product_cycles(constant_weight_matmul(half_weights, static_cast<MatmulOrientation>(in_orientation)),
                               std::vector<std::uint32_t>{m, k, n, in_orientation}, target);
}

const char* reduce_scatter_name(const DenseOp& op, DenseCandidate candidate) {
  if (candidate.depth_groups <= 1) return "none";
  return candidate.reduction_blocks <= 1 && owns_rows(op, candidate) ? "rows" : "columns";
}

std::uint64_t screening_cycles(const DenseOp& op, DenseCandidate candidate, const Target& target) {
  if (candidate.serial_row_splits > 1) {  // chunks one after another: the largest chunk's figure each time
    DenseOp chunk = op;
    chunk.m = ceil_div(op.m, candidate.serial_row_splits);
    const std::uint32_t chunks = candidate.serial_row_splits;
    candidate.serial_row_splits = 1;
    return chunks * screening_cycles(chunk, candidate, target);
  }
  const std::uint32_t column_groups = candidate.column_groups, depth_groups = candidate.depth_groups;
  const std::uint32_t widest = ceil_div(op.n, column_groups), deepest = ceil_div(op.k, depth_groups);
  const std::uint32_t m = ceil_div(op.m, candidate.row_groups);  // the busiest tile's rows
  // Serial slices run one after another: every per-slice figure counts serial_splits times.
  const std::uint32_t slices = candidate.serial_splits, slice = ceil_div(widest, slices);
  const BusiestMatmul busiest = busiest_matmul(op, candidate, target);
  std::uint64_t compute = slices * busiest.cycles(busiest.orientation, target);
  std::uint64_t exchange = 0;
  std::uint32_t phases = 0, supersteps = 1;

  const std::uint64_t x_bytes = std::uint64_t{op.m} * op.k * 4;  // all rows
  const double host_rate = target.host_bytes_per_cycle > 0 ? target.host_bytes_per_cycle : 1.0;
  const bool host_input = op.x->kind == TensorKind::input;
  const std::vector<Piece> sources =
      candidate.input == InputSource::host_scatter ? host_scatter_layout(op, candidate, target.tiles) : op.x_pieces;
  if (candidate.input == InputSource::host_slices) {
    // Every column group's x chunks cross the host link at every run.
    if (host_input) compute += static_cast<std::uint64_t>(double(x_bytes) * column_groups / host_rate);
  } else {
    if (candidate.input == InputSource::host_scatter) {
      if (host_input) compute += static_cast<std::uint64_t>(double(x_bytes) / host_rate);
      if (op.first_superstep) ++supersteps;
    }
    // Each consumer receives its whole x chunk; each source piece goes once to every
    // depth group it overlaps (once per column group without multicast).
    std::uint64_t send = 0;
    for (const Piece& piece : sources) {
      const std::uint32_t first = balanced_part_of(op.k, depth_groups, piece.col_begin);
      const std::uint32_t last = balanced_part_of(op.k, depth_groups, piece.col_begin + piece.cols - 1);
      const std::uint64_t copies = std::uint64_t{last - first + 1} * (target.multicast ? 1 : column_groups);
      send = std::max<std::uint64_t>(send, copies * piece.row_count(op.m) * piece.cols);
    }
    exchange += std::max<std::uint64_t>(send, std::uint64_t{m} * deepest);
    ++phases;
  }
  if (candidate.reduction_blocks > 1) {
    // Stage one: each block's partials of a stage piece summed on a holder in the next
    // block; stage two: the holders of a piece reduce-scatter its sums (docs/planning.md).
    const std::uint32_t blocks = candidate.reduction_blocks;
    const std::uint32_t members = ceil_div(depth_groups, blocks), pieces = depth_groups / blocks;
    const std::uint32_t piece = ceil_div(widest, pieces), sub = ceil_div(piece, blocks);
    exchange += std::max(std::uint64_t{m} * widest, std::uint64_t{m} * piece * members);
    exchange += std::max(std::uint64_t{m} * (piece - piece / blocks), std::uint64_t{m} * sub * (blocks - 1));
    phases += 2;
    supersteps += 3;
    compute += codelet_cycles(Codelet::reduce_add, std::vector<std::uint32_t>{members, m * piece}, target);
    if (fused_reduction(op)) {
      compute +=
          codelet_cycles(Codelet::reduce_bias, std::vector<std::uint32_t>{blocks - 1, m, sub, sub, op.relu}, target);
    } else {
      compute += codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{m * sub}, target);
      compute += codelet_cycles(Codelet::reduce_add, std::vector<std::uint32_t>{blocks, m * sub}, target);
      compute += epilogue_cycles(op, m, sub, target);
    }
  } else if (depth_groups > 1) {
    // The owner's part: whole rows or a piece of the columns (lay_out_buffers).
    const bool by_rows = owns_rows(op, candidate);
    const std::uint32_t rows = by_rows ? ceil_div(m, depth_groups) : m;
    const std::uint32_t piece = by_rows ? slice : ceil_div(slice, depth_groups);
    const std::uint64_t send = std::uint64_t{m} * slice -
                               std::uint64_t{by_rows ? m / depth_groups : m} * (by_rows ? slice : slice / depth_groups);
    const std::uint64_t receive = std::uint64_t{rows} * piece * (depth_groups - 1);
    exchange += slices * std::max(send, receive);
    phases += slices;
    supersteps += slices;
    if (fused_reduction(op)) {
      compute +=
          slices * codelet_cycles(Codelet::reduce_bias,
                                  std::vector<std::uint32_t>{depth_groups - 1, rows, piece, slice, op.relu}, target);
    } else {
      compute +=
          slices * codelet_cycles(Codelet::reduce_add, std::vector<std::uint32_t>{depth_groups, rows * piece}, target);
      compute += slices * epilogue_cycles(op, rows, piece, target);
    }
  } else {
    compute += epilogue_cycles(op, m, widest, target);
  }
  exchange += std::uint64_t{phases} * (target.exchange_phase_overhead + target.exchange_base_latency);
  return compute + exchange + std::uint64_t{supersteps} * target.sync_cycles;
}

namespace {

/// The x sources a candidate gathers from (none for host_slices).
std::vector<Piece> gather_sources(const DenseOp& op, DenseCandidate candidate, std::uint32_t tiles) {
  if (candidate.input == InputSource::host_slices) return {};
  return candidate.input == InputSource::host_scatter ? host_scatter_layout(op, candidate, tiles) : op.x_pieces;
}

/// The rows of x a piece holds.
Range rows_of(const Piece& piece, std::uint32_t all_rows) { return {piece.row_begin, piece.row_count(all_rows)}; }

/// How many of [a) and [b) overlap.
std::uint32_t overlap(Range a, Range b) {
  const std::uint32_t low = std::max(a.begin, b.begin), high = std::min(a.end(), b.end());
  return high > low ? high - low : 0;
}

}  // namespace

TileMapping::TileMapping(const DenseOp& op, DenseCandidate candidate, const Target& target)
    : candidate_(candidate), tiles_(target.tiles) {
  if (!candidate.rotated || candidate.transposed) return;
  const std::uint32_t depth = candidate.depth_groups, columns = candidate.column_groups;
  const std::vector<Range> depths = balanced_split(op.k, depth), rows = balanced_split(op.m, candidate.row_groups);
  // The blocks of x (columns, rows) each tile already holds.
  std::vector<std::vector<std::pair<Range, Range>>> held(target.tiles);
  for (const Piece& piece : gather_sources(op, candidate, target.tiles))
    held[piece.tile].push_back({{piece.col_begin, piece.cols}, rows_of(piece, op.m)});
  // Per row and column group, the first rotation (of at most 64 tried) with the fewest held words.
  rotation_.assign(std::size_t{candidate.row_groups} * columns, 0);
  const std::uint32_t tries = std::min(depth, 64u);
  const std::uint64_t grid = std::uint64_t{columns} * depth;
  for (std::uint32_t r = 0; r < candidate.row_groups; ++r) {
    for (std::uint32_t c = 0; c < columns; ++c) {
      std::uint64_t fewest = std::numeric_limits<std::uint64_t>::max();
      for (std::uint32_t s = 0; s < tries && fewest != 0; ++s) {
        std::uint64_t words = 0;
        for (std::uint32_t g = 0; g < depth; ++g) {
          const auto t = static_cast<std::uint32_t>(
              (r * grid + std::uint64_t{c} * depth + (g + s) % depth + candidate.tile_offset) % tiles_);
          for (const auto& [cols, held_rows] : held[t])
            words += std::uint64_t{overlap(cols, depths[g])} * overlap(held_rows, rows[r]);
        }
        if (words < fewest) fewest = words, rotation_[std::size_t{r} * columns + c] = s;
      }
    }
  }
}

MappingLoad mapping_load(const DenseOp& op, DenseCandidate candidate, const Target& target) {
  MappingLoad load;
  const TileMapping mapping(op, candidate, target);
  if (candidate.input == InputSource::host_slices) return load;
  const std::vector<Piece> sources = gather_sources(op, candidate, target.tiles);
  const std::vector<Range> depths = balanced_split(op.k, candidate.depth_groups);
  const std::vector<Range> rows = balanced_split(op.m, candidate.row_groups);
  std::vector<std::uint64_t> received(target.tiles, 0), sent_by(target.tiles, 0), on_tile(target.tiles, 0);
  for (const Piece& piece : sources) {
    std::uint64_t sent = 0;
    const Range piece_rows = rows_of(piece, op.m);
    const std::uint32_t first = balanced_part_of(op.k, candidate.depth_groups, piece.col_begin);
    const std::uint32_t last = balanced_part_of(op.k, candidate.depth_groups, piece.col_begin + piece.cols - 1);
    for (std::uint32_t g = first; g <= last; ++g) {
      const std::uint32_t width = overlap({piece.col_begin, piece.cols}, depths[g]);
      for (std::uint32_t r = 0; r < candidate.row_groups; ++r) {
        const std::uint32_t row_count = overlap(piece_rows, rows[r]);
        if (row_count == 0 || width == 0) continue;
        const std::uint64_t words = std::uint64_t{row_count} * width;
        bool sends = false;
        for (std::uint32_t c = 0; c < candidate.column_groups; ++c) {
          const std::uint32_t tile = mapping.tile(r, c, g);
          if (tile == piece.tile) {
            // Rows move as one block only when contiguous on both sides.
            const bool block = row_count == 1 || (width == piece.cols && width == depths[g].size);
            on_tile[tile] +=
                (block ? 1 : row_count) *
                codelet_cycles(Codelet::copy, std::vector<std::uint32_t>{block ? row_count * width : width}, target);
            continue;
          }
          sends = true;
          received[tile] += words;
          load.latency = std::max<std::uint64_t>(load.latency, target.latency(piece.tile, tile));
        }
        if (sends) sent += target.multicast ? words : words * candidate.column_groups;
      }
    }
    sent_by[piece.tile] += sent;
  }
  load.exchange_load =
      std::max(*std::max_element(sent_by.begin(), sent_by.end()), *std::max_element(received.begin(), received.end()));
  load.on_tile_cycles = *std::max_element(on_tile.begin(), on_tile.end());
  return load;
}

DenseFragment::DenseFragment(const DenseOp& op, DenseCandidate candidate, const Program& program, const Target& target)
    : op_(op),
      candidate_(candidate),
      target_(target),
      mapping_(op, candidate, target),
      builder_(program, candidate.depth_groups <= 1       ? 1
                        : candidate.reduction_blocks > 1  ? 3
                        : candidate.serial_row_splits > 1 ? 2 * candidate.serial_row_splits
                                                          : 1 + candidate.serial_splits),
      columns_(balanced_split(op.n, candidate.column_groups)),
      depths_(balanced_split(op.k, candidate.depth_groups)),
      chunks_(balanced_split(op.m, candidate.serial_row_splits)) {
  for (const Range& chunk : chunks_) chunk_groups_.push_back(balanced_split(chunk.size, candidate.row_groups));
  rows_ = chunk_groups_.front();  // balanced_split makes the first chunk the largest: buffers fit every chunk
  for (const Range& columns : columns_) slices_.push_back(balanced_split(columns.size, candidate.serial_splits));
  lay_out_buffers();
}

Piece DenseFragment::output_piece(Range rows, std::uint32_t tile, std::uint32_t col_begin, std::uint32_t cols,
                                  std::uint32_t buffer) const {
  if (rows.size == op_.m) return {tile, col_begin, cols, buffer};
  return {tile, col_begin, cols, buffer, rows.begin, rows.size};
}

void DenseFragment::lay_out_buffers() {
  const std::uint32_t depth_groups = candidate_.depth_groups;
  // Matmul operands feed the AMP's 128-bit loads; the rest need the target's minimum.
  const std::uint32_t matmul_alignment = std::max(target_.alignment, 16u);
  const std::uint32_t alignment = std::max(target_.alignment, 8u);
  const Region fast = region_for(Region::interleaved, target_);
  const Region standard = region_for(Region::standard, target_);

  if (candidate_.input == InputSource::distributed) {
    for (Piece piece : op_.x_pieces) {
      piece.buffer = builder_.existing(piece.buffer);
      x_pieces_.push_back(piece);
    }
  } else if (candidate_.input == InputSource::host_scatter) {
    for (Piece piece : host_scatter_layout(op_, candidate_, target_.tiles)) {
      const std::uint32_t rows = piece.row_count(op_.m);
      piece.buffer = builder_.create(op_.x->name + ".scatter", piece.tile, std::uint64_t{rows} * piece.cols, standard,
                                     alignment, lifetime_of(*op_.x));
      builder_.host_slice(*op_.x, stream_kind_of(*op_.x), piece.buffer, piece.row_begin, rows, piece.col_begin,
                          piece.cols);
      x_pieces_.push_back(piece);
    }
  }

  groups_.reserve(rows_.size() * columns_.size() * depths_.size());
  for (std::uint32_t r = 0; r < rows_.size(); ++r) {
    const std::uint32_t m = rows_[r].size;
    for (std::uint32_t c = 0; c < columns_.size(); ++c) {
      for (std::uint32_t g = 0; g < depth_groups; ++g) {
        const std::uint32_t tile = mapping_.tile(r, c, g);
        const Range cols = columns_[c], depth = depths_[g];
        GroupBuffers group{r, tile, 0, kNoBuffer, {}, {0, 0}};
        // The AMP reads its weights with 64-bit loads, which any region serves (poplin
        // ConvPartial1x1Out wants them interleaved only for 128-bit loads): standard data,
        // which place-storage moves to the interleaved region when the standard one is full.
        for (const Range& slice : slices_[c])
          group.weights.push_back(builder_.create(op_.name + ".w", tile,
                                                  packed_words(std::uint64_t{depth.size} * slice.size, op_.w->dtype),
                                                  standard, matmul_alignment, lifetime_of(*op_.w)));
        group.x_chunk =
            builder_.create(op_.name + ".x", tile, std::uint64_t{m} * depth.size, fast, matmul_alignment,
                            candidate_.input == InputSource::host_slices ? lifetime_of(*op_.x) : Lifetime::transient);
        // balanced_split makes the first slice the widest.
        const std::uint32_t widest_slice = slices_[c].front().size;
        group.partials[0] = builder_.create(op_.name + ".partial", tile, std::uint64_t{m} * widest_slice, fast,
                                            matmul_alignment, Lifetime::transient);
        group.partials[1] = slices_[c].size() == 1
                                ? group.partials[0]
                                : builder_.create(op_.name + ".partial", tile, std::uint64_t{m} * widest_slice, fast,
                                                  matmul_alignment, Lifetime::transient);
        if (depth_groups == 1 && op_.bias)
          group.bias = builder_.create(op_.name + ".bias", tile, packed_words(cols.size, op_.bias->dtype), standard,
                                       alignment, lifetime_of(*op_.bias));
        groups_.push_back(group);
      }
    }
  }
  if (depth_groups == 1) return;
  if (candidate_.reduction_blocks > 1) return lay_out_two_stage();
  // Reduce-scatter: depth group g' of column group c owns part g' of each slice: its rows
  // when there are as many rows as depth groups (each sender's part is then one contiguous
  // copy), else its columns (a copy per row). With a bias the fused reduce_bias reads the
  // owner's own partial in place.
  const std::uint32_t slots = fused_reduction(op_) ? depth_groups - 1 : depth_groups;
  const bool by_rows = owns_rows(op_, candidate_);
  // Later chunks reuse the first chunk's reduce and bias buffers (the first is the largest).
  std::map<std::array<std::uint32_t, 4>, std::pair<std::uint32_t, std::uint32_t>> first_chunk;
  for (std::uint32_t chunk = 0; chunk < chunks_.size(); ++chunk)
    for (std::uint32_t r = 0; r < rows_.size(); ++r) {
      const std::uint32_t m = chunk_groups_[chunk][r].size;
      const std::vector<Range> owner_rows = balanced_split(m, depth_groups);
      for (std::uint32_t c = 0; c < columns_.size(); ++c) {
        std::vector<std::vector<Range>> pieces;  // per slice
        for (const Range& slice : slices_[c])
          pieces.push_back(by_rows ? std::vector<Range>(depth_groups, Range{0, slice.size})
                                   : balanced_split(slice.size, depth_groups));
        for (std::uint32_t owner = 0; owner < depth_groups; ++owner) {
          const Range rows = by_rows ? owner_rows[owner] : Range{0, m};
          // One reduce buffer serves every slice: slice s+1's partials arrive after slice s is reduced.
          const std::uint32_t widest_piece = pieces.front()[owner].size;
          if (widest_piece == 0) continue;  // fewer columns than depth groups
          const GroupBuffers& own = group(r, c, owner);
          const std::uint32_t reduce = chunk == 0 ? builder_.create(op_.name + ".reduce", own.tile,
                                                                    std::uint64_t{slots} * rows.size * widest_piece,
                                                                    standard, alignment, Lifetime::transient)
                                                  : first_chunk.at({r, c, owner, 0}).first;
          for (std::uint32_t s = 0; s < pieces.size(); ++s) {
            const Range piece = pieces[s][owner];
            if (piece.size == 0) continue;
            OwnedPiece owned{chunk,
                             r,
                             c,
                             owner,
                             own.tile,
                             s,
                             piece,
                             reduce,
                             0,
                             kNoBuffer,
                             chunk_base(chunk) + matmul_superstep(s) + 1,
                             depth_groups,
                             {own.partials[s % 2], rows.begin * slices_[c][s].size + piece.begin},
                             slices_[c][s].size,
                             0,
                             0,
                             rows,
                             chunk == 0};
            owned.out = builder_.create(op_.name + ".out", own.tile, std::uint64_t{rows.size} * piece.size, standard,
                                        alignment, Lifetime::transient);
            if (op_.bias)
              owned.bias =
                  chunk == 0 ? builder_.create(op_.name + ".bias", own.tile, packed_words(piece.size, op_.bias->dtype),
                                               standard, alignment, lifetime_of(*op_.bias))
                             : first_chunk.at({r, c, owner, s}).second;
            if (chunk == 0 && chunks_.size() > 1) first_chunk[{r, c, owner, s}] = {reduce, owned.bias};
            pieces_.push_back(owned);
          }
        }
      }
    }
}

// Two-stage reduction of a column group over blocks B_0..B_{R-1} of its depth groups. Its
// columns are cut into P stage pieces (P: the smallest block's size). Stage one: holder
// (b, j), depth group B_b.begin + j, receives block b-1's partials of piece j (mod R: a
// holder never sums its own partial, which the exchange could not send it) and sums them.
// Stage two: the R holders of piece j reduce-scatter it, holder b owning sub-piece b. Stage
// buffers are laid out sub-piece by sub-piece, so each sub-piece's sum is contiguous.
void DenseFragment::lay_out_two_stage() {
  const std::uint32_t blocks = candidate_.reduction_blocks;
  const std::uint32_t alignment = std::max(target_.alignment, 8u);
  const Region standard = region_for(Region::standard, target_);
  const bool fused = fused_reduction(op_);
  blocks_ = balanced_split(candidate_.depth_groups, blocks);
  const std::uint32_t stage_pieces = stage_piece_count();
  for (std::uint32_t r = 0; r < rows_.size(); ++r) {
    const std::uint32_t m = rows_[r].size;
    for (std::uint32_t c = 0; c < columns_.size(); ++c) {
      const std::vector<Range> pieces = balanced_split(columns_[c].size, stage_pieces);
      for (std::uint32_t b = 0; b < blocks; ++b) {
        const std::uint32_t summed = blocks_[(b + blocks - 1) % blocks].size;
        for (std::uint32_t j = 0; j < stage_pieces; ++j) {
          StagePiece stage{r, c, b, j, group(r, c, blocks_[b].begin + j).tile, pieces[j], kNoBuffer, kNoBuffer};
          if (pieces[j].size != 0) {
            stage.reduce = builder_.create(op_.name + ".reduce", stage.tile, std::uint64_t{summed} * m * pieces[j].size,
                                           standard, alignment, Lifetime::transient);
            stage.sum = builder_.create(op_.name + ".sum", stage.tile, std::uint64_t{m} * pieces[j].size, standard,
                                        alignment, Lifetime::transient);
          }
          stage_pieces_.push_back(stage);
        }
      }
      for (std::uint32_t j = 0; j < stage_pieces; ++j) {
        const std::vector<Range> subs = balanced_split(pieces[j].size, blocks);
        for (std::uint32_t b = 0; b < blocks; ++b) {
          if (subs[b].size == 0) continue;  // a piece narrower than the blocks
          const StagePiece& holder = stage_piece(r, c, b, j);
          const std::uint32_t slots = fused ? blocks - 1 : blocks;
          OwnedPiece owned{0,
                           r,
                           c,
                           blocks_[b].begin + j,
                           holder.tile,
                           0,
                           {pieces[j].begin + subs[b].begin, subs[b].size},
                           0,
                           0,
                           kNoBuffer,
                           3,
                           blocks,
                           {holder.sum, m * subs[b].begin},
                           subs[b].size,
                           b,
                           j,
                           {0, m}};
          owned.reduce = builder_.create(op_.name + ".reduce", holder.tile, std::uint64_t{slots} * m * subs[b].size,
                                         standard, alignment, Lifetime::transient);
          owned.out = builder_.create(op_.name + ".out", holder.tile, std::uint64_t{m} * subs[b].size, standard,
                                      alignment, Lifetime::transient);
          if (op_.bias)
            owned.bias = builder_.create(op_.name + ".bias", holder.tile, packed_words(subs[b].size, op_.bias->dtype),
                                         standard, alignment, lifetime_of(*op_.bias));
          pieces_.push_back(owned);
        }
      }
    }
  }
}

void DenseFragment::gather_x(const GroupBuffers& group, Range depth, Range rows, std::uint32_t superstep) {
  if (candidate_.input == InputSource::host_slices) {
    builder_.host_slice(*op_.x, stream_kind_of(*op_.x), group.x_chunk, rows.begin, rows.size, depth.begin, depth.size);
    return;
  }
  // Pieces are sorted by column: start at the first one ending after depth.begin.
  auto piece = std::partition_point(x_pieces_.begin(), x_pieces_.end(),
                                    [&](const Piece& p) { return p.col_begin + p.cols <= depth.begin; });
  for (; piece != x_pieces_.end() && piece->col_begin < depth.end(); ++piece) {
    const std::uint32_t low = std::max(piece->col_begin, depth.begin);
    const std::uint32_t high = std::min(piece->col_begin + piece->cols, depth.end());
    // The piece's rows in this row group (a column piece holds every row, a 2-D block its own).
    const Range held = rows_of(*piece, op_.m);
    const std::uint32_t row_low = std::max(held.begin, rows.begin), row_high = std::min(held.end(), rows.end());
    if (low >= high || row_low >= row_high) continue;  // a block of other rows, or of a later column range
    builder_.move_rows(superstep, {piece->buffer, (row_low - held.begin) * piece->cols + low - piece->col_begin},
                       piece->cols, {group.x_chunk, (row_low - rows.begin) * depth.size + low - depth.begin},
                       depth.size, row_high - row_low, high - low);
  }
}

void DenseFragment::epilogue(std::uint32_t superstep, std::uint32_t tile, std::uint32_t rows, std::uint32_t values,
                             std::uint32_t bias_buffer, std::uint32_t col_begin, std::uint32_t cols, bool stream_bias) {
  if (op_.bias) {
    if (stream_bias) builder_.host_slice(*op_.bias, stream_kind_of(*op_.bias), bias_buffer, 0, 1, col_begin, cols);
    builder_.call(superstep, tile, bias_codelet(op_), {{values, 0}, {bias_buffer, 0}},
                  {rows, cols, op_.relu ? 1u : 0u});
  } else if (op_.relu) {
    builder_.call(superstep, tile, Codelet::relu, {{values, 0}}, {rows * cols});
  }
}

Fragment DenseFragment::build() && {
  const std::uint32_t depth_groups = candidate_.depth_groups;
  const std::uint32_t slices = candidate_.serial_splits;
  const auto chunks = static_cast<std::uint32_t>(chunks_.size());
  if (chunks > 1) {
    for (std::uint32_t chunk = 0; chunk < chunks; ++chunk) {
      builder_.label(chunk_base(chunk), chunk == 0 ? op_.name + ".gather0"
                                                   : fmt::format("{}.reduce{}+gather{}", op_.name, chunk - 1, chunk));
      builder_.label(chunk_base(chunk) + 1, fmt::format("{}.matmul{}", op_.name, chunk));
    }
    builder_.label(chunk_base(chunks), fmt::format("{}.reduce{}", op_.name, chunks - 1));
  } else if (slices == 1) {
    builder_.label(0, op_.name + ".gather");
    builder_.label(1, op_.name + ".matmul");
    if (depth_groups > 1) builder_.label(2, op_.name + ".reduce");
  } else {
    builder_.label(0, op_.name + ".gather");
    for (std::uint32_t s = 0; s < slices; ++s)
      builder_.label(matmul_superstep(s),
                     s == 0 ? op_.name + ".matmul0" : fmt::format("{}.reduce{}+matmul{}", op_.name, s - 1, s));
    builder_.label(matmul_superstep(slices), fmt::format("{}.reduce{}", op_.name, slices - 1));
  }
  Distribution output{op_.m, {}};

  for (std::uint32_t chunk = 0; chunk < chunks; ++chunk)
    for (std::uint32_t r = 0; r < rows_.size(); ++r)
      for (std::uint32_t c = 0; c < columns_.size(); ++c)
        for (std::uint32_t g = 0; g < depth_groups; ++g) {
          const GroupBuffers& buffers = group(r, c, g);
          const Range rows = chunk_rows(chunk, r);
          const std::uint32_t m = rows.size, base = chunk_base(chunk);
          const Range cols = columns_[c], depth = depths_[g];
          gather_x(buffers, depth, rows, base);
          for (std::uint32_t s = 0; s < slices_[c].size(); ++s) {
            const Range slice = slices_[c][s];
            // The weights are laid out as the chosen orientation streams them: no transpose on the
            // tile. Every chunk reads them as the first (the largest) chose.
            const WeightMatmul matmul =
                weight_matmul(half_weights(op_), rows_[r].size, depth.size, slice.size, target_, op_.orientation);
            if (chunk == 0)
              builder_.host_slice(*op_.w, stream_kind_of(*op_.w), buffers.weights[s], depth.begin, depth.size,
                                  cols.begin + slice.begin, slice.size,
                                  matmul_b_is_n_by_k(matmul.codelet, matmul.orientation));
            builder_.call_matmul(base + matmul_superstep(s), buffers.tile, matmul.codelet, {buffers.x_chunk, 0},
                                 {buffers.weights[s], 0}, {buffers.partials[s % 2], 0},
                                 {m, depth.size, slice.size, matmul.orientation});
          }
          if (depth_groups == 1) {  // no serial splits: the partials are the output
            epilogue(1, buffers.tile, m, buffers.partials[0], buffers.bias, cols.begin, cols.size);
            output.pieces.push_back(output_piece(rows, buffers.tile, cols.begin, cols.size, buffers.partials[0]));
          }
        }

  if (candidate_.reduction_blocks > 1) {
    build_two_stage();
  } else if (depth_groups > 1) {
    // Every depth group sends each owner its partial's rows of the owner's piece, into
    // slot [g][row] of the owner's reduce buffer, in the exchange after the slice's matmul.
    // (With a bias the owner's own partial stays in place: slots skip the owner.)
    for (const OwnedPiece& owned : pieces_) {
      const std::uint32_t width = slices_[owned.column_group][owned.slice].size, m = owned.rows.size;
      for (std::uint32_t g = 0; g < depth_groups; ++g) {
        if (fused_reduction(op_) && g == owned.owner_depth_group) continue;
        const std::uint32_t slot = fused_reduction(op_) && g > owned.owner_depth_group ? g - 1 : g;
        const GroupBuffers& sender = group(owned.row_group, owned.column_group, g);
        builder_.move_rows(chunk_base(owned.chunk) + matmul_superstep(owned.slice),
                           {sender.partials[owned.slice % 2], owned.rows.begin * width + owned.columns.begin}, width,
                           {owned.reduce, slot * m * owned.columns.size}, owned.columns.size, m, owned.columns.size);
      }
    }
  }
  if (depth_groups > 1) reduce_owned_pieces(output);
  std::vector<TensorDistribution> made;
  made.push_back({op_.output_index, std::move(output)});
  if (candidate_.input == InputSource::host_scatter) made.push_back({op_.x_index, Distribution{op_.m, x_pieces_}});
  return builder_.finish(std::move(made));
}

void DenseFragment::build_two_stage() {
  const std::uint32_t blocks = candidate_.reduction_blocks;
  const bool fused = fused_reduction(op_);
  builder_.label(2, op_.name + ".reduce.stage1");
  builder_.label(3, op_.name + ".reduce.stage2");
  // Stage one, in the matmul's exchange: block b-1's partials of piece j to holder (b, j),
  // slot by slot, sub-piece by sub-piece; summed in superstep 2.
  for (const StagePiece& stage : stage_pieces_) {
    if (stage.columns.size == 0) continue;
    const Range summed = blocks_[(stage.block + blocks - 1) % blocks];
    const std::uint32_t width = columns_[stage.column_group].size, piece = stage.columns.size;
    const std::uint32_t m = rows_[stage.row_group].size;
    for (std::uint32_t slot = 0; slot < summed.size; ++slot) {
      const GroupBuffers& sender = group(stage.row_group, stage.column_group, summed.begin + slot);
      for (const Range& sub : balanced_split(piece, blocks))
        if (sub.size != 0)
          builder_.move_rows(1, {sender.partials[0], stage.columns.begin + sub.begin}, width,
                             {stage.reduce, slot * m * piece + m * sub.begin}, sub.size, m, sub.size);
    }
    builder_.call(2, stage.tile, Codelet::reduce_add, {{stage.reduce, 0}, {stage.sum, 0}}, {summed.size, m * piece});
  }
  // Stage two, in superstep 2's exchange: every other holder of the piece sends its sum of
  // the owner's sub-piece (a contiguous block). With a bias the owner's own sum stays in
  // place; without, it is copied into slot b on the tile.
  for (const OwnedPiece& owned : pieces_) {
    const std::uint32_t words = owned.rows.size * owned.columns.size;
    for (std::uint32_t b = 0; b < blocks; ++b) {
      if (fused && b == owned.block) continue;
      const std::uint32_t slot = fused && b > owned.block ? b - 1 : b;
      const StagePiece& holder = stage_piece(owned.row_group, owned.column_group, b, owned.stage_piece);
      builder_.move_rows(2, {holder.sum, owned.own.word_offset}, words, {owned.reduce, slot * words}, words, 1, words);
    }
  }
}

void DenseFragment::reduce_owned_pieces(Distribution& output) {
  for (const OwnedPiece& owned : pieces_) {
    const std::uint32_t piece = owned.columns.size, m = owned.rows.size;
    const Range slice = slices_[owned.column_group][owned.slice];
    const std::uint32_t col_begin = columns_[owned.column_group].begin + slice.begin + owned.columns.begin;
    if (fused_reduction(op_)) {
      if (owned.streams_bias)
        builder_.host_slice(*op_.bias, stream_kind_of(*op_.bias), owned.bias, 0, 1, col_begin, piece);
      builder_.call(owned.superstep, owned.tile, Codelet::reduce_bias,
                    {{owned.reduce, 0}, owned.own, {owned.bias, 0}, {owned.out, 0}},
                    {owned.parts - 1, m, piece, owned.own_stride, op_.relu ? 1u : 0u});
    } else {
      builder_.call(owned.superstep, owned.tile, Codelet::reduce_add, {{owned.reduce, 0}, {owned.out, 0}},
                    {owned.parts, m * piece});
      epilogue(owned.superstep, owned.tile, m, owned.out, owned.bias, col_begin, piece, owned.streams_bias);
    }
    const Range group_rows = chunk_rows(owned.chunk, owned.row_group);
    output.pieces.push_back(
        output_piece({group_rows.begin + owned.rows.begin, owned.rows.size}, owned.tile, col_begin, piece, owned.out));
  }
}

}  // namespace tessera::select_finalist
