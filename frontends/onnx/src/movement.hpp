// Data movement in ONNX's index arithmetic: where each output element of Pad, Expand, Tile, Resize (nearest),
// DepthToSpace and SpaceToDepth comes from (Concat, Slice, Gather and Transpose fold stand-ins in constants.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "constants.hpp"
#include "tessera/graph.hpp"

namespace tessera::onnx_import {

/// A source: data input `source >> kSourceShift`, its element `source & kSourceIndexMask`
/// (row-major over its ONNX dims); kPadded for an element a constant Pad fills.
inline constexpr int kSourceShift = 40;
inline constexpr std::int64_t kSourceIndexMask = (std::int64_t{1} << kSourceShift) - 1;
inline constexpr std::int64_t kPadded = -1;
inline constexpr std::int64_t source_of(std::int64_t input, std::int64_t index) {
  return (input << kSourceShift) | index;
}

/// A node's output dims and, per output element (row-major), its source.
struct Movement {
  Dims dims;
  std::vector<std::int64_t> sources;
};

/// A range [begin, begin + count) of `axis` of `in` (a Split output).
Movement axis_range_movement(const Dims& in, std::int64_t axis, std::int64_t begin, std::int64_t count,
                             const std::string& where);
/// `in` broadcast to `out` as numpy broadcasts (dims aligned from the right; 1 repeats).
Movement broadcast_movement(const Dims& in, const Dims& out, const std::string& where);
/// Gather (`elements` false) or GatherElements along `axis` of data `data` at indices `indices`
/// made a one-hot pick: the output dims with an axis of the gathered dim's length C inserted at
/// `position` (after the gathered axis, or after the indices' axes), so runs stay contiguous.
struct OneHotSpread {
  std::int64_t position = 0;
  Movement data;     ///< element (.., c, ..): the data element at position c of the axis
  Movement indices;  ///< element (.., c, ..): the index element the output element reads
};
OneHotSpread one_hot_spread(const Dims& data, const Dims& indices, std::int64_t axis, bool elements,
                            const std::string& where);
/// Resize `linear` or `cubic` along one axis, as ONNX's reference interpolates: for each output
/// coordinate, the input coordinates of its taps (the n nearest, edge-clamped) and their weights.
struct AxisTaps {
  std::vector<std::vector<std::int64_t>> at;  ///< per output coordinate, n input coordinates
  std::vector<std::vector<double>> weight;    ///< their weights (summing to 1)
};
AxisTaps resize_axis_taps(std::int64_t in, std::int64_t out, double scale, const std::string& transformation,
                          const std::string& mode, double cubic_a, bool exclude_outside, const std::string& where);
/// The movement a stand-in folded through a node gives: its values are the sources.
Movement folded_movement(const Constant& folded);
/// A gather op's runs for `sources` (no kPadded): runs of elements in arithmetic progression,
/// those of equal length and stride at a constant distance gathered into one repeated run.
std::vector<GatherRun> compress_runs(const std::vector<std::int64_t>& sources);

enum class PadMode { constant, reflect, edge };
/// Pad of `in` by `begin` and `end` (per axis; negative crops), in `mode`.
Movement pad_movement(const Dims& in, const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& end,
                      PadMode mode, const std::string& where);
/// Tile of `in`, `repeats` times along each axis.
Movement tile_movement(const Dims& in, const std::vector<std::int64_t>& repeats, const std::string& where);
/// Expand of `in` to `shape` (numpy broadcasting both ways).
Movement expand_movement(const Dims& in, const Dims& shape, const std::string& where);
/// DepthToSpace of [N, C, H, W] by `block` (mode DCR, or CRD when `column_row_depth`).
Movement depth_to_space_movement(const Dims& in, std::int64_t block, bool column_row_depth, const std::string& where);
/// SpaceToDepth of [N, C, H, W] by `block`.
Movement space_to_depth_movement(const Dims& in, std::int64_t block, const std::string& where);
/// Resize by nearest neighbour to `out` dims with `scales` per axis, ONNX's coordinate
/// transformation (`half_pixel`, `asymmetric`, `align_corners`, `pytorch_half_pixel`,
/// `tf_half_pixel_for_nearest`) and nearest mode (`round_prefer_floor`, `round_prefer_ceil`, `floor`, `ceil`).
Movement resize_nearest_movement(const Dims& in, const Dims& out, const std::vector<double>& scales,
                                 const std::string& transformation, const std::string& nearest_mode,
                                 const std::string& where);

}  // namespace tessera::onnx_import
