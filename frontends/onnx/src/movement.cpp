// Data movement in ONNX's index arithmetic: each output element's source, per operator, as ONNX defines it.
#include "movement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "tessera/diagnostic.hpp"

namespace tessera::onnx_import {

namespace {

std::string dims_text(const Dims& dims) { return fmt::format("[{}]", fmt::join(dims, ", ")); }

[[noreturn]] void refuse(const std::string& where, const std::string& why) {
  throw Error(fmt::format("{}: not supported: {}", where, why));
}

/// The row-major index of `at` in `dims`.
std::int64_t flat(const Dims& dims, const std::vector<std::int64_t>& at) {
  std::int64_t index = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) index = index * dims[i] + at[i];
  return index;
}

/// Every output element of `dims` in row-major order, its source given by `source(index)`.
template <typename Source>
Movement map_elements(Dims dims, const std::string& where, Source&& source) {
  const std::int64_t count = element_count(dims, where);
  if (count == 0) refuse(where, fmt::format("an empty output {}", dims_text(dims)));
  if (count > kMaxFoldedElements)
    refuse(where, fmt::format("moving the {} elements of {} in one node (at most {})", count, dims_text(dims),
                              kMaxFoldedElements));
  Movement movement{std::move(dims), {}};
  movement.sources.reserve(static_cast<std::size_t>(count));
  std::vector<std::int64_t> at(movement.dims.size(), 0);
  for (std::int64_t i = 0; i < count; ++i) {
    movement.sources.push_back(source(at));
    for (std::size_t axis = at.size(); axis-- > 0;) {
      if (++at[axis] < movement.dims[axis]) break;
      at[axis] = 0;
    }
  }
  return movement;
}

}  // namespace

Movement axis_range_movement(const Dims& in, std::int64_t axis, std::int64_t begin, std::int64_t count,
                             const std::string& where) {
  Dims dims = in;
  const auto a = static_cast<std::size_t>(axis);
  dims.at(a) = count;
  return map_elements(dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from = at;
    from[a] += begin;
    return source_of(0, flat(in, from));
  });
}

Movement broadcast_movement(const Dims& in, const Dims& out, const std::string& where) {
  if (in.size() > out.size()) refuse(where, fmt::format("broadcasting {} to {}", dims_text(in), dims_text(out)));
  const std::size_t lead = out.size() - in.size();
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] != 1 && in[i] != out[lead + i])
      refuse(where, fmt::format("broadcasting {} to {}", dims_text(in), dims_text(out)));
  return map_elements(out, where, [&](const std::vector<std::int64_t>& at) {
    std::int64_t index = 0;
    for (std::size_t i = 0; i < in.size(); ++i) index = index * in[i] + (in[i] == 1 ? 0 : at[lead + i]);
    return source_of(0, index);
  });
}

OneHotSpread one_hot_spread(const Dims& data, const Dims& indices, std::int64_t axis, bool elements,
                            const std::string& where) {
  const auto a = static_cast<std::size_t>(axis), index_rank = indices.size();
  Dims out;  // the output's dims: GatherElements' are the indices'; Gather's replace the axis by them
  if (elements) {
    out = indices;
  } else {
    out.assign(data.begin(), data.begin() + axis);
    out.insert(out.end(), indices.begin(), indices.end());
    out.insert(out.end(), data.begin() + axis + 1, data.end());
  }
  OneHotSpread spread;
  spread.position = elements ? axis + 1 : axis + static_cast<std::int64_t>(index_rank);
  const auto k = static_cast<std::size_t>(spread.position);
  Dims spread_dims = out;
  spread_dims.insert(spread_dims.begin() + spread.position, data[a]);
  // `at` walks the spread dims; the output element is `at` without position k, c is at[k].
  spread.data = map_elements(spread_dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(data.size());
    for (std::size_t d = 0; d < data.size(); ++d) {
      std::size_t o = elements || d < a ? d : d + index_rank - 1;  // the output axis of data axis d
      from[d] = d == a ? at[k] : at[o < k ? o : o + 1];
    }
    return source_of(0, flat(data, from));
  });
  spread.indices = map_elements(spread_dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(index_rank);
    for (std::size_t d = 0; d < index_rank; ++d) {
      const std::size_t o = elements ? d : a + d;
      from[d] = at[o < k ? o : o + 1];
    }
    return source_of(0, flat(indices, from));
  });
  return spread;
}

Movement folded_movement(const Constant& folded) {
  Movement movement{folded.dims, {}};
  movement.sources.reserve(folded.values.size());
  for (double value : folded.values) movement.sources.push_back(static_cast<std::int64_t>(value));
  return movement;
}

std::vector<GatherRun> compress_runs(const std::vector<std::int64_t>& sources) {
  // Lines: consecutive output elements whose sources are in arithmetic progression in one input.
  std::vector<GatherRun> lines;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const auto input = static_cast<std::uint32_t>(sources[i] >> kSourceShift);
    const std::int64_t index = sources[i] & kSourceIndexMask;
    if (!lines.empty()) {
      GatherRun& line = lines.back();
      const bool same_input = line.input == input;
      if (same_input && line.length == 1) {
        line.input_stride = index - line.input_begin;
        ++line.length;
        continue;
      }
      if (same_input && index == line.input_begin + static_cast<std::int64_t>(line.length) * line.input_stride) {
        ++line.length;
        continue;
      }
    }
    GatherRun line;
    line.output_begin = i;
    line.input = input;
    line.input_begin = index;
    line.length = 1;
    lines.push_back(line);
  }
  // Lines of one input, length and stride at constant distances become one run repeated; a few
  // runs stay open at a time (a Concat's inputs alternate row by row).
  constexpr std::size_t kOpenRuns = 16;
  std::vector<GatherRun> runs, open;
  for (const GatherRun& line : lines) {
    bool joined = false;
    for (auto run = open.rbegin(); run != open.rend() && !joined; ++run) {
      if (run->input != line.input || run->length != line.length || run->input_stride != line.input_stride) continue;
      if (run->repeat == 1) {
        run->output_step = line.output_begin - run->output_begin;
        run->input_step = line.input_begin - run->input_begin;
        run->repeat = 2;
        joined = true;
      } else if (line.output_begin == run->output_begin + run->repeat * run->output_step &&
                 line.input_begin == run->input_begin + static_cast<std::int64_t>(run->repeat) * run->input_step) {
        ++run->repeat;
        joined = true;
      }
    }
    if (joined) continue;
    open.push_back(line);
    if (open.size() > kOpenRuns) {
      runs.push_back(open.front());
      open.erase(open.begin());
    }
  }
  runs.insert(runs.end(), open.begin(), open.end());
  return runs;
}

Movement pad_movement(const Dims& in, const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& end,
                      PadMode mode, const std::string& where) {
  Dims dims;
  for (std::size_t d = 0; d < in.size(); ++d) {
    dims.push_back(in[d] + begin[d] + end[d]);
    if (dims.back() <= 0)
      refuse(where, fmt::format("Pad of {} by [{}] and [{}] leaves no elements", dims_text(in), fmt::join(begin, ", "),
                                fmt::join(end, ", ")));
    if (mode == PadMode::reflect && (begin[d] >= in[d] || end[d] >= in[d]) && (begin[d] > 0 || end[d] > 0))
      refuse(where, fmt::format("reflect Pad of axis {} (size {}) by {} and {}: a reflection must be shorter than the "
                                "axis",
                                d, in[d], begin[d], end[d]));
  }
  return map_elements(dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(at.size());
    for (std::size_t d = 0; d < at.size(); ++d) {
      std::int64_t i = at[d] - begin[d];
      const std::int64_t size = in[d];
      if (i < 0 || i >= size) {
        if (mode == PadMode::constant) return kPadded;
        if (mode == PadMode::edge) i = std::clamp<std::int64_t>(i, 0, size - 1);
        else if (size == 1) i = 0;
        else i = i < 0 ? -i : 2 * (size - 1) - i;  // reflect about the edge element, which is not repeated
      }
      from[d] = i;
    }
    return source_of(0, flat(in, from));
  });
}

Movement tile_movement(const Dims& in, const std::vector<std::int64_t>& repeats, const std::string& where) {
  if (repeats.size() != in.size())
    throw Error(fmt::format("{}: Tile has {} repeats for a rank-{} input", where, repeats.size(), in.size()));
  Dims dims;
  for (std::size_t d = 0; d < in.size(); ++d) {
    if (repeats[d] < 0) throw Error(fmt::format("{}: Tile repeat {} is negative", where, repeats[d]));
    dims.push_back(in[d] * repeats[d]);
  }
  return map_elements(dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(at.size());
    for (std::size_t d = 0; d < at.size(); ++d) from[d] = at[d] % in[d];
    return source_of(0, flat(in, from));
  });
}

Movement expand_movement(const Dims& in, const Dims& shape, const std::string& where) {
  const Dims dims = broadcast_dims(in, shape, where);
  const std::size_t lead = dims.size() - in.size();
  return map_elements(dims, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(in.size());
    for (std::size_t d = 0; d < in.size(); ++d) from[d] = in[d] == 1 ? 0 : at[lead + d];
    return source_of(0, flat(in, from));
  });
}

Movement depth_to_space_movement(const Dims& in, std::int64_t block, bool column_row_depth, const std::string& where) {
  if (in.size() != 4 || block <= 0 || in[1] % (block * block) != 0)
    throw Error(fmt::format("{}: DepthToSpace by {} needs [N, C, H, W] with C a multiple of {}, got {}", where, block,
                            block * block, dims_text(in)));
  const std::int64_t channels = in[1] / (block * block);
  return map_elements({in[0], channels, in[2] * block, in[3] * block}, where, [&](const std::vector<std::int64_t>& at) {
    const std::int64_t h = at[2] / block, bh = at[2] % block, w = at[3] / block, bw = at[3] % block;
    // DCR: depth is (block row, block column, channel); CRD: (channel, block row, block column).
    const std::int64_t depth =
        column_row_depth ? (at[1] * block + bh) * block + bw : (bh * block + bw) * channels + at[1];
    return source_of(0, flat(in, {at[0], depth, h, w}));
  });
}

Movement space_to_depth_movement(const Dims& in, std::int64_t block, const std::string& where) {
  if (in.size() != 4 || block <= 0 || in[2] % block != 0 || in[3] % block != 0)
    throw Error(fmt::format("{}: SpaceToDepth by {} needs [N, C, H, W] with H and W multiples of it, got {}", where,
                            block, dims_text(in)));
  const std::int64_t channels = in[1];
  return map_elements({in[0], channels * block * block, in[2] / block, in[3] / block}, where,
                      [&](const std::vector<std::int64_t>& at) {
                        const std::int64_t c = at[1] % channels, offset = at[1] / channels;
                        const std::int64_t bh = offset / block, bw = offset % block;
                        return source_of(0, flat(in, {at[0], c, at[2] * block + bh, at[3] * block + bw}));
                      });
}

Movement resize_nearest_movement(const Dims& in, const Dims& out, const std::vector<double>& scales,
                                 const std::string& transformation, const std::string& nearest_mode,
                                 const std::string& where) {
  static const std::vector<std::string> transformations = {
      "half_pixel",           "asymmetric",          "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nearest",
      "tf_half_pixel_for_nn", "half_pixel_symmetric"};
  static const std::vector<std::string> modes = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (std::find(transformations.begin(), transformations.end(), transformation) == transformations.end())
    refuse(where, fmt::format("Resize with coordinate_transformation_mode '{}' (supported: {})", transformation,
                              fmt::join(transformations, ", ")));
  if (std::find(modes.begin(), modes.end(), nearest_mode) == modes.end())
    refuse(where, fmt::format("Resize with nearest_mode '{}' (supported: {})", nearest_mode, fmt::join(modes, ", ")));
  // Per axis, the input coordinate of each output coordinate.
  std::vector<std::vector<std::int64_t>> picked(in.size());
  for (std::size_t d = 0; d < in.size(); ++d) {
    const double scale = scales[d], length = static_cast<double>(in[d]), resized = static_cast<double>(out[d]);
    for (std::int64_t x = 0; x < out[d]; ++x) {
      const double at = static_cast<double>(x);
      double original = 0.0;
      if (transformation == "half_pixel") original = (at + 0.5) / scale - 0.5;
      else if (transformation == "pytorch_half_pixel") original = resized > 1 ? (at + 0.5) / scale - 0.5 : 0.0;
      else if (transformation == "align_corners") original = resized == 1 ? 0.0 : at * (length - 1) / (resized - 1);
      else if (transformation == "asymmetric") original = at / scale;
      else if (transformation == "tf_half_pixel_for_nearest" || transformation == "tf_half_pixel_for_nn")
        original = (at + 0.5) / scale;  // tf_half_pixel_for_nn: its name in ONNX 1.12's own test data
      else {                            // half_pixel_symmetric
        const double adjustment = resized / (scale * length), centre = length / 2;
        original = centre * (1 - adjustment) + (at + 0.5) / scale - 0.5;
      }
      double nearest = 0.0;
      const bool half_way = original == std::floor(original) + 0.5;
      if (nearest_mode == "floor") nearest = std::floor(original);
      else if (nearest_mode == "ceil") nearest = std::ceil(original);
      else if (half_way) nearest = nearest_mode == "round_prefer_floor" ? std::floor(original) : std::ceil(original);
      else nearest = std::round(original);
      picked[d].push_back(std::clamp<std::int64_t>(static_cast<std::int64_t>(nearest), 0, in[d] - 1));
    }
  }
  return map_elements(out, where, [&](const std::vector<std::int64_t>& at) {
    std::vector<std::int64_t> from(at.size());
    for (std::size_t d = 0; d < at.size(); ++d) from[d] = picked[d][static_cast<std::size_t>(at[d])];
    return source_of(0, flat(in, from));
  });
}

AxisTaps resize_axis_taps(std::int64_t in, std::int64_t out, double scale, const std::string& transformation,
                          const std::string& mode, double cubic_a, bool exclude_outside, const std::string& where) {
  static const std::vector<std::string> transformations = {"half_pixel", "asymmetric", "align_corners",
                                                           "pytorch_half_pixel", "half_pixel_symmetric"};
  if (std::find(transformations.begin(), transformations.end(), transformation) == transformations.end())
    refuse(where, fmt::format("Resize {} with coordinate_transformation_mode '{}' (supported: {})", mode,
                              transformation, fmt::join(transformations, ", ")));
  const std::size_t taps = mode == "cubic" ? 4 : 2;
  const auto pad = static_cast<std::int64_t>((taps + 1) / 2);
  // ONNX's reference scales by the float output width scale * in, not the rounded size.
  const double length = static_cast<double>(in), width = scale * length;
  AxisTaps result;
  for (std::int64_t o = 0; o < out; ++o) {
    const double x = static_cast<double>(o);
    double original = 0.0;
    if (transformation == "half_pixel") original = (x + 0.5) / scale - 0.5;
    else if (transformation == "pytorch_half_pixel") original = width == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    else if (transformation == "align_corners") original = width == 1 ? 0.0 : x * (length - 1) / (width - 1);
    else if (transformation == "asymmetric") original = x / scale;
    else original = length / 2 * (1 - width / (scale * length)) + (x + 0.5) / scale - 0.5;  // half_pixel_symmetric
    const double below = std::floor(original);
    const double ratio = original == below ? 1.0 : original - below;  // the left pixel preferred
    std::vector<double> weight;
    if (taps == 2) {
      weight = {1 - ratio, ratio};
    } else {
      const double a = cubic_a, r = ratio, s = 1 - ratio;
      weight = {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
                ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
    }
    // The n coordinates nearest the original (ties to the lower), among the edge-padded ones.
    std::vector<std::int64_t> candidates;
    const auto near = static_cast<std::int64_t>(below);
    for (std::int64_t i = std::max(-pad, near - pad - 1); i < std::min(in + pad, near + pad + 2); ++i)
      candidates.push_back(i);
    std::stable_sort(candidates.begin(), candidates.end(), [&](std::int64_t p, std::int64_t q) {
      return std::abs(original - static_cast<double>(p)) < std::abs(original - static_cast<double>(q));
    });
    candidates.resize(std::min(taps, candidates.size()));
    std::sort(candidates.begin(), candidates.end());
    if (exclude_outside) {
      double kept = 0.0;
      for (std::size_t t = 0; t < candidates.size(); ++t)
        if (candidates[t] < 0 || candidates[t] >= in) weight[t] = 0.0;
        else kept += weight[t];
      for (double& w : weight) w = kept == 0.0 ? 0.0 : w / kept;
    }
    for (std::int64_t& c : candidates) c = std::clamp<std::int64_t>(c, 0, in - 1);  // edge padding
    result.at.push_back(std::move(candidates));
    result.weight.push_back(std::move(weight));
  }
  return result;
}

}  // namespace tessera::onnx_import
