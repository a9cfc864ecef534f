// How an activation is spread over tiles: blocks of rows x columns (column pieces hold every row), and balanced splits.
#pragma once
#include <cstdint>
#include <vector>

namespace tessera::select_finalist {

/// Columns (or depth rows) [begin, begin + size).
struct Range {
  std::uint32_t begin = 0;
  std::uint32_t size = 0;
  std::uint32_t end() const { return begin + size; }
};

/// Splits [0, total) into `parts` consecutive ranges whose sizes differ by at most one,
/// the larger ones first. Ranges are empty when parts > total.
inline std::vector<Range> balanced_split(std::uint32_t total, std::uint32_t parts) {
  std::vector<Range> ranges(parts);
  const std::uint32_t base = total / parts, larger = total % parts;
  std::uint32_t begin = 0;
  for (std::uint32_t i = 0; i < parts; ++i) {
    ranges[i] = {begin, base + (i < larger ? 1u : 0u)};
    begin += ranges[i].size;
  }
  return ranges;
}

/// The index of the range of balanced_split(total, parts) that holds `position`.
inline std::uint32_t balanced_part_of(std::uint32_t total, std::uint32_t parts, std::uint32_t position) {
  const std::uint32_t base = total / parts, larger = total % parts;
  const std::uint64_t in_larger = std::uint64_t{larger} * (base + 1);
  if (position < in_larger) return position / (base + 1);
  return larger + static_cast<std::uint32_t>((position - in_larger) / base);
}

/// One tile's share of a [rows x cols] activation: the block of rows
/// [row_begin, row_begin + rows) and columns [col_begin, col_begin + cols), packed
/// row-major from word 0 of `buffer`. rows == 0 means every row (a column piece).
struct Piece {
  std::uint32_t tile = 0;
  std::uint32_t col_begin = 0;
  std::uint32_t cols = 0;
  std::uint32_t buffer = 0;  ///< program buffer index (fragment index inside a fragment)
  std::uint32_t row_begin = 0;
  std::uint32_t rows = 0;  ///< 0: all the distribution's rows
  std::uint32_t row_count(std::uint32_t all_rows) const { return rows == 0 ? all_rows : rows; }
};

struct Distribution {
  std::uint32_t rows = 0;
  std::vector<Piece> pieces;  ///< disjoint blocks, together covering every element once
};

}  // namespace tessera::select_finalist
