// Block plans: row-block plans for softmax and layer_norm, output-block plans for products of activations, gathered
// adds.
#include "block_plans.hpp"

#include <algorithm>
#include <array>
#include <cassert>
#include <limits>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "tessera/window_calls.hpp"

namespace tessera::select_finalist {

namespace {

/// Operand alignments, as the dense plan uses them.
struct Layout {
  Region fast, standard;
  std::uint32_t matmul_alignment, alignment;
  explicit Layout(const Target& target)
      : fast(region_for(Region::interleaved, target)),
        standard(region_for(Region::standard, target)),
        matmul_alignment(std::max(target.alignment, 16u)),
        alignment(std::max(target.alignment, 8u)) {}
};

constexpr std::uint32_t kMinBlockColumns = 16;
/// Fitting splits of a window op built and costed by the cost model (in screening order).
constexpr std::size_t kWindowCostedSplits = 4;

/// The binary function of `kind` on operands of type `operands` (int32 and bool words take the
/// integer functions).
BinaryFunction binary_function(OpKind kind, DType operands) {
  const bool words = is_integer_word(operands);
  switch (kind) {
    case OpKind::sub:
      return words ? BinaryFunction::int_subtract : BinaryFunction::subtract;
    case OpKind::mul:
      return words ? BinaryFunction::int_multiply : BinaryFunction::multiply;
    case OpKind::add:
      return words ? BinaryFunction::int_add : BinaryFunction::add;
    case OpKind::equal:
      return words ? BinaryFunction::int_equal : BinaryFunction::equal;
    case OpKind::less:
      return words ? BinaryFunction::int_less : BinaryFunction::less;
    case OpKind::less_or_equal:
      return words ? BinaryFunction::int_less_or_equal : BinaryFunction::less_or_equal;
    case OpKind::greater:
      return words ? BinaryFunction::int_greater : BinaryFunction::greater;
    case OpKind::greater_or_equal:
      return words ? BinaryFunction::int_greater_or_equal : BinaryFunction::greater_or_equal;
    case OpKind::logical_and:
      return BinaryFunction::logical_and;
    case OpKind::logical_or:
      return BinaryFunction::logical_or;
    case OpKind::logical_xor:
      return BinaryFunction::logical_xor;
    case OpKind::max:
      return words ? BinaryFunction::int_max : BinaryFunction::max;
    case OpKind::min:
      return words ? BinaryFunction::int_min : BinaryFunction::min;
    case OpKind::power:
      return BinaryFunction::power;
    case OpKind::mod:
      return BinaryFunction::int_modulo;
    case OpKind::fmod:
      return words ? BinaryFunction::int_remainder : BinaryFunction::remainder;
    case OpKind::prelu:
      return BinaryFunction::prelu;
    default:
      return words ? BinaryFunction::int_divide : BinaryFunction::divide;
  }
}

UnaryFunction unary_function(const Op& op) {
  switch (op.kind) {
    case OpKind::unary:
      return static_cast<UnaryFunction>(op.function);
    case OpKind::sigmoid:
      return UnaryFunction::sigmoid;
    case OpKind::tanh:
      return UnaryFunction::tanh;
    case OpKind::erf:
      return UnaryFunction::erf;
    case OpKind::sqrt:
      return UnaryFunction::sqrt;
    case OpKind::logical_not:
      return UnaryFunction::logical_not;
    default:
      return UnaryFunction::pow;
  }
}

ReduceFunction reduce_function(const Op& op) {
  if (op.kind == OpKind::reduce) return static_cast<ReduceFunction>(op.function);
  return op.kind == OpKind::reduce_mean ? ReduceFunction::mean : ReduceFunction::sum;
}

/// One way to spread an op over the tiles: rows (and columns of the output) in groups.
struct Split {
  std::uint32_t row_groups = 1;
  std::uint32_t column_groups = 1;
  std::uint32_t depth_groups = 1;  ///< window ops only: input channels in groups, partials reduced
  std::uint32_t field_groups = 1;  ///< window ops only: each output image-row's columns in groups
};

/// Group counts worth trying for `total` things on at most `limit` groups: the most, then
/// halving down to one.
std::vector<std::uint32_t> group_counts(std::uint32_t total, std::uint32_t limit) {
  std::set<std::uint32_t> counts;
  for (std::uint32_t count = std::max(1u, std::min(total, limit)); count >= 1; count /= 2) counts.insert(count);
  return {counts.rbegin(), counts.rend()};
}

std::uint32_t rows_of(const Tensor& tensor) { return static_cast<std::uint32_t>(tensor.rows()); }
std::uint32_t cols_of(const Tensor& tensor) { return static_cast<std::uint32_t>(tensor.cols()); }

/// softmax, layer_norm, row reductions, and unary / binary ops on a graph input: row group g
/// holds rows split[g] of x whole, on tile cursor + g.
Fragment build_rows(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Tensor& x = plan.graph.tensors[op.inputs[0]];
  const std::uint32_t cols = cols_of(x);
  const Layout layout(plan.target);
  const std::string name = fmt::format("{}{}", op_kind_name(op.kind), plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  Distribution output{rows_of(x), {}};
  const std::vector<Range> groups = balanced_split(rows_of(x), split.row_groups);
  for (std::uint32_t g = 0; g < groups.size(); ++g) {
    const Range rows = groups[g];
    const std::uint32_t tile = (plan.tile_cursor + g) % plan.target.tiles;
    const std::uint32_t in = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[0],
                                          {rows.begin, rows.size, 0, cols}, tile, layout.standard, layout.alignment);
    if (is_unary(op.kind) || is_binary(op.kind)) {
      // An elementwise op on a graph input: its rows arrive from the host into `in`, a buffer of
      // this op's own, so the result overwrites them (unary, a row operand) or goes beside them.
      const Tensor& other = is_binary(op.kind) ? plan.graph.tensors[op.inputs[1]] : x;
      const Broadcast broadcast = is_binary(op.kind) ? binary_broadcast(x, other) : Broadcast::same;
      std::uint32_t result = in;
      if (x.kind == TensorKind::weight && is_unary(op.kind)) {
        // A weight's block lives for every run: the result goes beside it, never over it.
        result = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols, layout.standard, layout.alignment,
                                Lifetime::transient);
        if (op.kind == OpKind::relu) {
          builder.call(1, tile, Codelet::copy, {{in, 0}, {result, 0}}, {rows.size * cols});
          builder.call(1, tile, Codelet::relu, {{result, 0}}, {rows.size * cols});
        } else {
          call_unary(builder, 1, tile, plan.graph, op, in, result, rows.size * cols);
        }
      } else if (op.kind == OpKind::relu) {
        builder.call(1, tile, Codelet::relu, {{in, 0}}, {rows.size * cols});
      } else if (is_unary(op.kind)) {
        call_unary(builder, 1, tile, plan.graph, op, in, in, rows.size * cols);
      } else if (broadcast == Broadcast::row) {
        const std::uint32_t row = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1],
                                               {0, 1, 0, cols}, tile, layout.standard, layout.alignment);
        call_binary_row(builder, 1, tile, op.kind, other.dtype, in, row, rows.size, cols);
      } else if (broadcast == Broadcast::column) {
        const std::uint32_t column =
            gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1], {rows.begin, rows.size, 0, 1}, tile,
                         layout.standard, layout.alignment);
        call_binary_column(builder, 1, tile, op.kind, x.dtype, in, column, rows.size, cols);
      } else {
        const std::uint32_t b = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1],
                                             {rows.begin, rows.size, 0, cols}, tile, layout.standard, layout.alignment);
        result = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols, layout.standard, layout.alignment,
                                Lifetime::transient);
        call_binary(builder, 1, tile, op.kind, x.dtype, in, b, result, rows.size * cols);
      }
      output.pieces.push_back({tile, 0, cols, result, rows.begin, rows.size});
      continue;
    }
    if (op.kind == OpKind::where) {
      // The two values' rows meet the condition's on its tile; the select writes a new buffer.
      std::array<std::uint32_t, 2> values{};
      for (std::size_t v = 0; v < 2; ++v)
        values[v] = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[v + 1],
                                 {rows.begin, rows.size, 0, cols}, tile, layout.standard, layout.alignment);
      const std::uint32_t out = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols, layout.standard,
                                               layout.alignment, Lifetime::transient);
      builder.call(1, tile, Codelet::select, {{in, 0}, {values[0], 0}, {values[1], 0}, {out, 0}}, {rows.size * cols});
      output.pieces.push_back({tile, 0, cols, out, rows.begin, rows.size});
      continue;
    }
    if (is_row_reduction(op.kind)) {
      const std::uint32_t sums =
          builder.create(name + ".out", tile, rows.size, layout.standard, layout.alignment, Lifetime::transient);
      builder.call(1, tile, Codelet::reduce_rows, {{in, 0}, {sums, 0}},
                   {rows.size, cols, static_cast<std::uint32_t>(reduce_function(op))});
      output.pieces.push_back({tile, 0, 1, sums, rows.begin, rows.size});
      continue;
    }
    const std::uint32_t out = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols, layout.standard,
                                             layout.alignment, Lifetime::transient);
    if (op.kind == OpKind::softmax) {
      builder.call(1, tile, Codelet::softmax, {{in, 0}, {out, 0}},
                   {rows.size, cols, float_param(static_cast<float>(op.scale))});
    } else {
      const std::uint32_t gamma = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1],
                                               {0, 1, 0, cols}, tile, layout.standard, layout.alignment);
      const std::uint32_t beta = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[2], {0, 1, 0, cols},
                                              tile, layout.standard, layout.alignment);
      builder.call(1, tile, Codelet::layer_norm, {{in, 0}, {gamma, 0}, {beta, 0}, {out, 0}},
                   {rows.size, cols, float_param(static_cast<float>(op.epsilon))});
    }
    output.pieces.push_back({tile, 0, cols, out, rows.begin, rows.size});
  }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// A window op's tile share: output image-rows [q_begin, q_end) (q = image * OH + output row)
/// and output channels [col_begin, col_begin + cols), with the patch channels it reads.
struct WindowShare {
  std::uint32_t q_begin = 0, q_end = 0, col_begin = 0, cols = 0;
  std::uint32_t channel_begin = 0, channels = 0, first_out_channel = 0;
};

/// The params of a conv or pool call of output rows [a, b) of one image over `share`'s channels,
/// over the op's window or the part of it a field group covers (column_window).
std::vector<std::uint32_t> window_params(const Op& op, const Window& window, std::uint32_t group_in,
                                         std::uint32_t group_out, const WindowShare& share, std::uint32_t a,
                                         std::uint32_t b) {
  if (op.kind != OpKind::conv)
    return pool_call_params(window, a, b, share.channels,
                            op.kind == OpKind::max_pool   ? PoolMode::max
                            : op.window.count_include_pad ? PoolMode::average_with_padding
                                                          : PoolMode::average);
  const std::uint32_t flags = (op.relu ? kConvRelu : 0u) | (op.inputs.size() == 3 ? kConvHasBias : 0u);
  return conv_call_params(window, a, b, {share.channels, share.cols, group_in, group_out, share.first_out_channel},
                          flags);
}

/// Output columns [begin, end) of a window as a window of their own: the input columns their taps
/// read (first_column, the window's width), with padding only where the whole field has it. Null
/// when some output column reads only padding (then the field is not split by columns).
std::optional<Window> column_window(const Window& w, std::uint32_t begin, std::uint32_t end,
                                    std::uint32_t& first_column) {
  const std::int64_t span = std::int64_t{w.kernel_w - 1} * w.dilation_w + 1;
  const std::int64_t low = std::int64_t{begin} * w.stride_w - w.pad_left;  // the first tap's column
  const std::int64_t high = std::int64_t{end - 1} * w.stride_w - w.pad_left + span;
  const std::int64_t from = std::max<std::int64_t>(low, 0), to = std::min<std::int64_t>(high, w.width);
  const std::int64_t last_low = std::int64_t{end - 1} * w.stride_w - w.pad_left;
  if (to <= from || low + span <= 0 || last_low >= std::int64_t{w.width}) return std::nullopt;
  Window part = w;
  part.width = static_cast<std::uint32_t>(to - from);
  part.pad_left = static_cast<std::uint32_t>(from - low);
  part.pad_right = static_cast<std::uint32_t>(high - to);
  first_column = static_cast<std::uint32_t>(from);
  return part;
}

/// A window op's shape as its plans read it.
struct WindowShape {
  bool conv = false;
  std::uint32_t in_channels = 0, outs = 0, group_in = 1, group_out = 1, out_h = 0, out_w = 0, taps = 1;
  WindowShape(const Graph& graph, const Op& op)
      : conv(op.kind == OpKind::conv),
        in_channels(cols_of(graph.tensors[op.inputs[0]])),
        outs(cols_of(graph.tensors[op.output])),
        group_in(conv ? in_channels / op.window.groups : 1),
        group_out(conv ? outs / op.window.groups : 1),
        out_h(static_cast<std::uint32_t>(op.window.out_height())),
        out_w(static_cast<std::uint32_t>(op.window.out_width())),
        taps(static_cast<std::uint32_t>(op.window.kernel_positions())) {}
  /// The patch channels output channels `columns` read (a pool's are its own; with depth
  /// groups, `depth` of a conv's single group).
  WindowShare share(Range rows, Range columns, Range depth, bool by_depth) const {
    WindowShare share{rows.begin, rows.end(), columns.begin, columns.size, columns.begin, columns.size, 0};
    if (!conv) return share;
    if (by_depth) {
      share.channel_begin = depth.begin;
      share.channels = depth.size;
      return share;
    }
    const std::uint32_t first_group = columns.begin / group_out, last_group = (columns.end() - 1) / group_out;
    share.channel_begin = first_group * group_in;
    share.channels = (last_group - first_group + 1) * group_in;
    share.first_out_channel = columns.begin - first_group * group_out;
    return share;
  }
};

/// conv, max_pool, avg_pool: row group r holds output image-rows split[r] (q = image * OH +
/// row), field group f (with one image-row a row group) output columns split[f] of its row,
/// column group c output channels split[c], depth group d (convs of one group) input channels
/// split[d]; share (r, f, c, d) runs on tile cursor + ((r * F + f) * C + c) * D + d. It gathers
/// the input rows and columns its windows read (the halo included, once) over its channels, the
/// host writes it the weights of its channels, and it makes one call per image it touches. With
/// depth groups each share leaves partial sums; share d then owns pixels split[d] of the block
/// and reduces the others' partials of them with its own, the bias and the ReLU (reduce_bias).
Fragment build_window(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Graph& graph = plan.graph;
  const Window& w = op.window;
  const WindowShape shape(graph, op);
  const bool conv = shape.conv, by_depth = split.depth_groups > 1, by_field = split.field_groups > 1;
  const Layout layout(plan.target);
  const std::string name = fmt::format("{}{}", op_kind_name(op.kind), plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  if (by_depth) builder.label(2, name + ".reduce");
  Distribution output{rows_of(graph.tensors[op.output]), {}};
  const std::vector<Range> row_groups = balanced_split(op.batch * shape.out_h, split.row_groups);
  const std::vector<Range> field_groups = balanced_split(shape.out_w, split.field_groups);
  const std::vector<Range> column_groups = balanced_split(shape.outs, split.column_groups);
  const std::vector<Range> depth_groups = balanced_split(shape.in_channels, split.depth_groups);
  const bool has_bias = conv && op.inputs.size() == 3;
  const Tensor& input = graph.tensors[op.inputs[0]];
  const std::optional<Distribution>& input_distribution = plan.distributions.at(op.inputs[0]);
  for (std::uint32_t r = 0; r < row_groups.size(); ++r)
    for (std::uint32_t f = 0; f < field_groups.size(); ++f)
      for (std::uint32_t c = 0; c < column_groups.size(); ++c) {
        const Range rows = row_groups[r], field = field_groups[f], columns = column_groups[c];
        if (rows.size == 0 || field.size == 0 || columns.size == 0) continue;
        // A field group's own window: its output columns and the input columns they read.
        std::uint32_t first_column = 0;
        const Window part = by_field ? *column_window(w, field.begin, field.end(), first_column) : w;
        const std::uint64_t block_words = std::uint64_t{rows.size} * field.size * columns.size;
        std::vector<std::uint32_t> partial(depth_groups.size()), tile_of(depth_groups.size());
        for (std::uint32_t d = 0; d < depth_groups.size(); ++d) {
          const Range depth = depth_groups[d];
          const std::uint32_t share_index =
              ((r * split.field_groups + f) * split.column_groups + c) * split.depth_groups + d;
          const std::uint32_t tile = (plan.tile_cursor + share_index) % plan.target.tiles;
          tile_of[d] = tile;
          const WindowShare share = shape.share(rows, columns, depth, by_depth);
          partial[d] = builder.create(name + (by_depth ? ".partial" : ".out"), tile, block_words, layout.standard,
                                      layout.alignment, Lifetime::transient);
          std::uint32_t weights = 0, bias = 0;
          if (conv) {
            if (!by_depth) {
              weights = gather_block(builder, 0, graph, plan.distributions, op.inputs[1],
                                     {0, shape.taps * shape.group_in, columns.begin, columns.size}, tile, layout.fast,
                                     layout.matmul_alignment);
            } else {  // each tap's rows of this depth group, packed tap by tap
              const Tensor& tensor = graph.tensors[op.inputs[1]];
              weights =
                  builder.create(tensor.name + ".block", tile,
                                 packed_words(std::uint64_t{shape.taps} * depth.size * columns.size, tensor.dtype),
                                 layout.fast, layout.matmul_alignment, Lifetime::whole_program);
              for (std::uint32_t tap = 0; tap < shape.taps; ++tap)
                builder.host_slice(tensor, StreamKind::weight, weights, tap * shape.group_in + depth.begin, depth.size,
                                   columns.begin, columns.size, false, tap * depth.size * columns.size);
            }
            if (has_bias && !by_depth)
              bias = gather_block(builder, 0, graph, plan.distributions, op.inputs[2],
                                  {0, 1, columns.begin, columns.size}, tile, layout.standard, layout.alignment);
          }
          const std::uint32_t alignment = conv ? layout.matmul_alignment : layout.alignment;
          // One call per image: its output rows [a, b) read input rows [low, high) of that image.
          for (std::uint32_t q = rows.begin; q < rows.end();) {
            const std::uint32_t image = q / shape.out_h, a = q % shape.out_h;
            const std::uint32_t b = std::min(shape.out_h, a + (rows.end() - q));
            const auto [low, high] = window_input_rows(w, a, b);
            std::uint32_t patch = 0;
            if (!by_field) {
              patch = gather_block(
                  builder, 0, graph, plan.distributions, op.inputs[0],
                  {(image * w.height + low) * w.width, (high - low) * w.width, share.channel_begin, share.channels},
                  tile, layout.standard, alignment);
            } else {  // input rows [low, high) of the part's columns: a run of pixels each
              const std::uint64_t row_words = std::uint64_t{part.width} * share.channels;
              patch = builder.create(input.name + ".block", tile, (high - low) * row_words, layout.standard, alignment,
                                     input_distribution ? Lifetime::transient : Lifetime::from_start);
              for (std::uint32_t row = low; row < high; ++row)
                gather_block_into(builder, 0, graph, plan.distributions, op.inputs[0],
                                  {(image * w.height + row) * w.width + first_column, part.width, share.channel_begin,
                                   share.channels},
                                  {patch, static_cast<std::uint32_t>((row - low) * row_words)});
            }
            const BufferRef out_ref{partial[d], (q - rows.begin) * field.size * columns.size};
            std::vector<std::uint32_t> params =
                window_params(op, part, by_depth ? depth.size : shape.group_in, shape.group_out, share, a, b);
            if (by_depth) params[kConvFlags] = 0;  // the bias and ReLU come after the reduction
            if (conv)
              builder.call(1, tile, Codelet::conv,
                           {{patch, 0}, {weights, 0}, {has_bias && !by_depth ? bias : patch, 0}, out_ref},
                           std::move(params));
            else builder.call(1, tile, Codelet::pool, {{patch, 0}, out_ref}, std::move(params));
            q += b - a;
          }
        }
        // With field groups a share holds one image-row's run of pixels; else whole image-rows.
        const std::uint32_t first_row = rows.begin * shape.out_w + field.begin;
        const std::uint32_t pixels = by_field ? field.size : rows.size * shape.out_w;
        if (!by_depth) {
          output.pieces.push_back({tile_of[0], columns.begin, columns.size, partial[0], first_row, pixels});
          continue;
        }
        // The reduce-scatter: depth group d owns pixels slices[d] of the block.
        const std::vector<Range> slices = balanced_split(pixels, split.depth_groups);
        for (std::uint32_t d = 0; d < depth_groups.size(); ++d) {
          const Range slice = slices[d];
          if (slice.size == 0) continue;
          const std::uint32_t tile = tile_of[d], parts = split.depth_groups - 1;
          const std::uint32_t received =
              builder.create(name + ".reduce", tile, std::uint64_t{parts} * slice.size * columns.size, layout.standard,
                             layout.alignment, Lifetime::transient);
          std::uint32_t part_index = 0;
          for (std::uint32_t e = 0; e < depth_groups.size(); ++e) {
            if (e == d) continue;
            builder.move_rows(1, {partial[e], slice.begin * columns.size}, columns.size,
                              {received, part_index * slice.size * columns.size}, columns.size, slice.size,
                              columns.size);
            ++part_index;
          }
          const std::uint32_t bias =
              gather_block(builder, 1, graph, plan.distributions, op.inputs[2], {0, 1, columns.begin, columns.size},
                           tile, layout.standard, layout.alignment);
          const std::uint32_t out = builder.create(name + ".out", tile, std::uint64_t{slice.size} * columns.size,
                                                   layout.standard, layout.alignment, Lifetime::transient);
          builder.call(2, tile, Codelet::reduce_bias,
                       {{received, 0}, {partial[d], slice.begin * columns.size}, {bias, 0}, {out, 0}},
                       {parts, slice.size, columns.size, columns.size, op.relu ? 1u : 0u});
          output.pieces.push_back({tile, columns.begin, columns.size, out, first_row + slice.begin, slice.size});
        }
      }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// Whether every field group of `groups` reads some input column (column_window of each exists).
bool field_groups_read_input(const Window& w, std::uint32_t groups) {
  std::uint32_t first_column = 0;
  for (const Range& field : balanced_split(static_cast<std::uint32_t>(w.out_width()), groups))
    if (field.size > 0 && !column_window(w, field.begin, field.end(), first_column)) return false;
  return true;
}

/// Screening weight of a copy (descriptors to set up and hold), in cycles.
constexpr std::uint64_t kScreeningCyclesPerCopy = 64;

/// A cheap figure to order a window op's splits before building any: the busiest share's
/// codelet cycles, the words and copies it gathers (a word a cycle over the exchange), and
/// with depth groups its partials' exchange and reduction.
std::uint64_t window_screening_cycles(const BlockPlanContext& plan, Split split) {
  const Op& op = plan.op;
  const Window& w = op.window;
  const WindowShape shape(plan.graph, op);
  const bool by_depth = split.depth_groups > 1;
  const std::uint32_t rows = (op.batch * shape.out_h + split.row_groups - 1) / split.row_groups;
  const std::uint32_t cols = (shape.outs + split.column_groups - 1) / split.column_groups;
  const std::uint32_t depth = (shape.in_channels + split.depth_groups - 1) / split.depth_groups;
  // With field groups a share is one image-row's first (widest) run of output columns.
  std::uint32_t first_column = 0;
  const std::uint32_t field = (shape.out_w + split.field_groups - 1) / split.field_groups;
  const std::optional<Window> part = split.field_groups > 1 ? column_window(w, 0, field, first_column) : w;
  if (!part) return std::numeric_limits<std::uint64_t>::max();
  const std::uint32_t pixels_a_row = split.field_groups > 1 ? field : shape.out_w;
  WindowShare share = shape.share({0, rows}, {0, cols}, {0, depth}, by_depth);
  if (!by_depth && shape.conv)
    share.channels = std::min(shape.in_channels, ((cols + shape.group_out - 1) / shape.group_out + 1) * shape.group_in);
  const std::optional<Distribution>& input = plan.distributions.at(op.inputs[0]);
  std::uint64_t cycles = 0, words = 0, copies = 0;
  for (std::uint32_t done = 0; done < rows;) {  // whole images, then the rest of one
    const std::uint32_t b = std::min(shape.out_h, rows - done);
    const std::vector<std::uint32_t> params =
        window_params(op, *part, by_depth ? depth : shape.group_in, shape.group_out, share, 0, b);
    cycles += codelet_cycles(shape.conv ? Codelet::conv : Codelet::pool, params, plan.target);
    const std::uint32_t patch_rows = shape.conv ? params[kConvInRows] : params[kPoolInRows];
    words += std::uint64_t{patch_rows} * part->width * share.channels;
    if (input && split.field_groups > 1)
      copies += std::uint64_t{patch_rows} * gather_copies(*input, {0, part->width, 0, share.channels}, false);
    else if (input) copies += gather_copies(*input, {0, patch_rows * w.width, 0, share.channels}, false);
    done += b;
  }
  if (by_depth) {
    const std::uint64_t slice = (std::uint64_t{rows} * pixels_a_row + split.depth_groups - 1) / split.depth_groups;
    words += (split.depth_groups - 1) * slice * cols;
    copies += split.depth_groups - 1;
    cycles += codelet_cycles(Codelet::reduce_bias,
                             std::vector<std::uint32_t>{split.depth_groups - 1, static_cast<std::uint32_t>(slice), cols,
                                                        cols, op.relu ? 1u : 0u},
                             plan.target);
  }
  return cycles + words + copies * kScreeningCyclesPerCopy;
}

/// One output piece of a re-layout: the block `from` of the input gathered (column-major when
/// `transposed`) onto a tile of its own, where it is rows [row_begin, +rows) x columns
/// [col_begin, +cols) of the output.
struct Move {
  Block from;
  bool transposed = false;
  std::uint32_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;
};

/// The pieces of transpose (a batch of row blocks, each to its columns' row groups),
/// split_heads / merge_heads (token groups of each head of each batch item) and slice_columns
/// (row groups).
std::vector<Move> relayout_moves(const BlockPlanContext& plan, Split split) {
  const Op& op = plan.op;
  const Tensor& x = plan.graph.tensors[op.inputs[0]];
  std::vector<Move> moves;
  if (op.kind == OpKind::transpose) {
    const std::uint32_t x_rows = rows_of(x) / op.batch, x_cols = cols_of(x);
    for (std::uint32_t p = 0; p < op.batch; ++p)
      for (const Range rows : balanced_split(x_cols, split.row_groups))  // of y's block p: columns of x
        moves.push_back(
            {{p * x_rows, x_rows, rows.begin, rows.size}, true, p * x_cols + rows.begin, rows.size, 0, x_rows});
  } else if (op.kind == OpKind::slice_columns) {
    for (const Range rows : balanced_split(rows_of(x), split.row_groups))
      moves.push_back({{rows.begin, rows.size, op.column_begin, op.column_count},
                       false,
                       rows.begin,
                       rows.size,
                       0,
                       op.column_count});
  } else {
    const bool splits = op.kind == OpKind::split_heads;
    const std::uint32_t depth = splits ? cols_of(x) / op.heads : cols_of(x);
    const std::uint32_t tokens = splits ? rows_of(x) / op.batch : rows_of(x) / (op.batch * op.heads);
    for (std::uint32_t b = 0; b < op.batch; ++b)
      for (std::uint32_t h = 0; h < op.heads; ++h)
        for (const Range group : balanced_split(tokens, split.row_groups)) {
          const std::uint32_t merged_row = b * tokens + group.begin,
                              split_row = (b * op.heads + h) * tokens + group.begin;
          if (splits)
            moves.push_back({{merged_row, group.size, h * depth, depth}, false, split_row, group.size, 0, depth});
          else moves.push_back({{split_row, group.size, 0, depth}, false, merged_row, group.size, h * depth, depth});
        }
  }
  return moves;
}

/// transpose, split_heads, merge_heads, slice_columns: exchange re-layouts, each output piece
/// gathered onto the next tile from the cursor (the host writes it when the input is a graph input); no compute.
Fragment build_relayout(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Layout layout(plan.target);
  const std::string name = fmt::format("{}{}", op_kind_name(op.kind), plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  Distribution output{rows_of(plan.graph.tensors[op.output]), {}};
  const std::vector<Move> moves = relayout_moves(plan, split);
  for (std::size_t i = 0; i < moves.size(); ++i) {
    const Move& move = moves[i];
    const auto tile = static_cast<std::uint32_t>((plan.tile_cursor + i) % plan.target.tiles);
    const std::uint32_t block = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[0], move.from, tile,
                                             layout.standard, layout.alignment, move.transposed);
    output.pieces.push_back({tile, move.col_begin, move.cols, block, move.row_begin, move.rows});
  }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// Where element `index` (row-major) of gather input `input` (an op input slot) comes from.
struct GatherSource {
  std::uint32_t input = 0;
  std::int64_t index = 0;
};

/// The sources of a gather's output elements [begin, end) (row-major), from the repeats of each
/// run that meet them: memory for one piece, not the whole output.
std::vector<GatherSource> range_sources(const Op& op, std::uint64_t begin, std::uint64_t end) {
  std::vector<GatherSource> sources(end - begin);
  for (const GatherRun& run : op.gather_runs) {
    if (end <= run.output_begin) continue;
    const std::uint64_t step = run.repeat > 1 ? run.output_step : 1;  // output_step >= length > 0 when repeated
    // Repeat k covers [output_begin + k step, + length): it meets the range from k_low to k_high.
    const std::uint64_t k_low =
        begin >= run.output_begin + run.length ? (begin - run.output_begin - run.length) / step + 1 : 0;
    const std::uint64_t k_high = std::min(run.repeat, (end - run.output_begin + step - 1) / step);
    for (std::uint64_t k = k_low; k < k_high; ++k) {
      const std::uint64_t first = run.output_begin + k * step;
      const std::uint64_t i_low = begin > first ? begin - first : 0, i_high = std::min(run.length, end - first);
      for (std::uint64_t i = i_low; i < i_high; ++i)
        sources[first + i - begin] = {run.input, run.input_begin + static_cast<std::int64_t>(k) * run.input_step +
                                                     static_cast<std::int64_t>(i) * run.input_stride};
    }
  }
  return sources;
}

/// The piece of a distribution holding an element, through a grid of the pieces' row and column
/// cuts (pieces are blocks: each grid cell lies in one).
class PieceFinder {
public:
  explicit PieceFinder(const Distribution& distribution) {
    for (const Piece& piece : distribution.pieces) {
      row_cuts_.push_back(piece.row_begin);
      row_cuts_.push_back(piece.row_begin + piece.row_count(distribution.rows));
      col_cuts_.push_back(piece.col_begin);
      col_cuts_.push_back(piece.col_begin + piece.cols);
    }
    for (auto* cuts : {&row_cuts_, &col_cuts_}) {
      std::sort(cuts->begin(), cuts->end());
      cuts->erase(std::unique(cuts->begin(), cuts->end()), cuts->end());
    }
    const std::size_t columns = col_cuts_.empty() ? 0 : col_cuts_.size() - 1;
    cells_.assign((row_cuts_.empty() ? 0 : row_cuts_.size() - 1) * columns, nullptr);
    for (const Piece& piece : distribution.pieces) {
      const std::size_t r0 = cut_of(row_cuts_, piece.row_begin),
                        r1 = cut_of(row_cuts_, piece.row_begin + piece.row_count(distribution.rows));
      const std::size_t c0 = cut_of(col_cuts_, piece.col_begin), c1 = cut_of(col_cuts_, piece.col_begin + piece.cols);
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t c = c0; c < c1; ++c) cells_[r * columns + c] = &piece;
    }
  }
  /// The piece holding (row, col); null when none does (a distribution always covers its tensor).
  const Piece* find(std::uint32_t row, std::uint32_t col) const {
    if (row_cuts_.empty() || row < row_cuts_.front() || row >= row_cuts_.back() || col < col_cuts_.front() ||
        col >= col_cuts_.back())
      return nullptr;
    const std::size_t r = cell_of(row_cuts_, row), c = cell_of(col_cuts_, col);
    return cells_[r * (col_cuts_.size() - 1) + c];
  }

private:
  /// The position of `cut` among the cuts (it is one of them).
  static std::size_t cut_of(const std::vector<std::uint32_t>& cuts, std::uint32_t cut) {
    return static_cast<std::size_t>(std::lower_bound(cuts.begin(), cuts.end(), cut) - cuts.begin());
  }
  /// The cell holding `value`: i with cuts[i] <= value < cuts[i + 1].
  static std::size_t cell_of(const std::vector<std::uint32_t>& cuts, std::uint32_t value) {
    return static_cast<std::size_t>(std::upper_bound(cuts.begin(), cuts.end(), value) - cuts.begin()) - 1;
  }
  std::vector<std::uint32_t> row_cuts_, col_cuts_;
  std::vector<const Piece*> cells_;
};

/// gather: output pieces (row groups, or column groups of a single row) on consecutive tiles,
/// each element moved from where its source lies: the longest stretches contiguous on both
/// sides as one exchange copy (one on-tile copy when the source is on the same tile), or, from
/// a graph input or weight, as one host slice. Nothing is computed.
Fragment build_gather(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Graph& graph = plan.graph;
  const Tensor& out_tensor = graph.tensors[op.output];
  const std::uint32_t out_rows = rows_of(out_tensor), out_cols = cols_of(out_tensor);
  const Layout layout(plan.target);
  const std::string name = fmt::format("gather{}", plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  std::vector<std::optional<PieceFinder>> finders;
  for (std::uint32_t input : op.inputs) {
    const std::optional<Distribution>& spread = plan.distributions[input];
    finders.push_back(spread ? std::optional<PieceFinder>(std::in_place, *spread) : std::nullopt);
  }
  // A stretch of the output being gathered: from a piece's buffer (exchange or on-tile copy) or
  // from the host (a graph input or weight, one row of it).
  struct Stretch {
    bool open = false, from_host = false;
    std::uint32_t input = 0, source_buffer = 0, source_word = 0, host_row = 0, host_col = 0;
    std::uint32_t destination_word = 0, words = 0;
  };
  Distribution output{out_rows, {}};
  std::uint64_t tile_index = plan.tile_cursor;  // block ops rotate over the tiles
  for (const Range rows : balanced_split(out_rows, split.row_groups))
    for (const Range cols : balanced_split(out_cols, split.column_groups)) {
      if (rows.size == 0 || cols.size == 0) continue;
      const auto tile = static_cast<std::uint32_t>(tile_index++ % plan.target.tiles);
      // Row groups hold whole rows and column groups split a single row: a piece is one range of the output.
      const std::uint64_t first = std::uint64_t{rows.begin} * out_cols + cols.begin;
      const std::vector<GatherSource> sources = range_sources(op, first, first + std::uint64_t{rows.size} * cols.size);
      // Host-written words must be in place before superstep 0 (inputs) or since initialize (weights).
      Lifetime lifetime = Lifetime::transient;
      for (const GatherSource& source : sources) {
        const std::uint32_t input = op.inputs[source.input];
        if (plan.distributions[input]) continue;
        if (graph.tensors[input].kind == TensorKind::weight) lifetime = Lifetime::whole_program;
        else if (lifetime == Lifetime::transient) lifetime = Lifetime::from_start;
      }
      const std::uint32_t buffer = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols.size,
                                                  layout.standard, layout.alignment, lifetime);
      Stretch stretch;
      auto flush = [&] {
        if (!stretch.open) return;
        stretch.open = false;
        const std::uint32_t input = op.inputs[stretch.input];
        if (stretch.from_host) {
          const Tensor& tensor = graph.tensors[input];
          builder.host_slice(tensor, tensor.kind == TensorKind::weight ? StreamKind::weight : StreamKind::input, buffer,
                             stretch.host_row, 1, stretch.host_col, stretch.words, false, stretch.destination_word);
          return;
        }
        builder.move_rows(0, {builder.existing(stretch.source_buffer), stretch.source_word}, 0,
                          {buffer, stretch.destination_word}, 0, 1, stretch.words);
      };
      for (std::uint32_t destination = 0; destination < sources.size(); ++destination) {
        const GatherSource source = sources[destination];
        const Tensor& tensor = graph.tensors[op.inputs[source.input]];
        const auto source_row = static_cast<std::uint32_t>(source.index / tensor.cols());
        const auto source_col = static_cast<std::uint32_t>(source.index % tensor.cols());
        const std::optional<PieceFinder>& finder = finders[source.input];
        if (!finder) {
          const bool extends = stretch.open && stretch.from_host && stretch.input == source.input &&
                               stretch.host_row == source_row && stretch.host_col + stretch.words == source_col &&
                               stretch.destination_word + stretch.words == destination;
          if (!extends) {
            flush();
            stretch = {true, true, source.input, 0, 0, source_row, source_col, destination, 0};
          }
          ++stretch.words;
          continue;
        }
        const Piece* piece = finder->find(source_row, source_col);
        assert(piece != nullptr && "a distribution covers its tensor");
        const std::uint32_t word = (source_row - piece->row_begin) * piece->cols + (source_col - piece->col_begin);
        const bool extends = stretch.open && !stretch.from_host && stretch.source_buffer == piece->buffer &&
                             stretch.source_word + stretch.words == word &&
                             stretch.destination_word + stretch.words == destination;
        if (!extends) {
          flush();
          stretch = {true, false, source.input, piece->buffer, word, 0, 0, destination, 0};
        }
        ++stretch.words;
      }
      flush();
      output.pieces.push_back({tile, cols.begin, cols.size, buffer, rows.begin, rows.size});
    }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// c = a * b (or a * b^T): output block (i, j) on tile cursor + i * column_groups + j, from rows i
/// of a and the columns j of the product (rows j of b when transposed). A batch of products
/// (stacked by rows) takes the next tiles product by product, around again past the last.
Fragment build_product(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Tensor& a = plan.graph.tensors[op.inputs[0]];
  const Tensor& out_tensor = plan.graph.tensors[op.output];
  const std::uint32_t k = cols_of(a), n = cols_of(out_tensor);
  const std::uint32_t m = rows_of(a) / op.batch, b_rows_each = rows_of(plan.graph.tensors[op.inputs[1]]) / op.batch;
  const Layout layout(plan.target);
  const std::string name = fmt::format("matmul{}", plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  Distribution output{rows_of(a), {}};
  const std::vector<Range> row_groups = balanced_split(m, split.row_groups);
  const std::vector<Range> column_groups = balanced_split(n, split.column_groups);
  for (std::uint32_t p = 0; p < op.batch; ++p)
    for (std::uint32_t i = 0; i < row_groups.size(); ++i) {
      for (std::uint32_t j = 0; j < column_groups.size(); ++j) {
        const std::uint32_t tile = static_cast<std::uint32_t>(
            (plan.tile_cursor + std::uint64_t{p * split.row_groups + i} * split.column_groups + j) % plan.target.tiles);
        const Range rows{p * m + row_groups[i].begin, row_groups[i].size}, cols = column_groups[j];
        const std::uint32_t a_block =
            gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[0], {rows.begin, rows.size, 0, k}, tile,
                         layout.fast, layout.matmul_alignment);
        const std::uint32_t b_begin = p * b_rows_each;
        const Block b_rows =
            op.transpose_b ? Block{b_begin + cols.begin, cols.size, 0, k} : Block{b_begin, k, cols.begin, cols.size};
        // b's block stored transposed when that takes fewer copies (narrow column pieces send
        // whole columns, not one word a row); the codelet follows the layout: [k, n] is matmul's.
        const std::optional<Distribution>& b_spread = plan.distributions[op.inputs[1]];
        const bool b_transposed =
            b_spread && gather_copies(*b_spread, b_rows, true) < gather_copies(*b_spread, b_rows, false);
        const std::uint32_t b_block = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1], b_rows,
                                                   tile, layout.fast, layout.matmul_alignment, b_transposed);
        const std::uint32_t c_block = builder.create(name + ".out", tile, std::uint64_t{rows.size} * cols.size,
                                                     layout.fast, layout.matmul_alignment, Lifetime::transient);
        const Codelet codelet = op.transpose_b != b_transposed ? Codelet::matmul_transposed : Codelet::matmul;
        builder.call_matmul(1, tile, codelet, {a_block, 0}, {b_block, 0}, {c_block, 0},
                            {rows.size, k, cols.size,
                             matmul_orientation(codelet, rows.size, k, cols.size, plan.target, plan.orientation)});
        output.pieces.push_back({tile, cols.begin, cols.size, c_block, rows.begin, rows.size});
      }
    }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// a op b (add, sub, mul, div) where b is spread differently: b's values are gathered into a's blocks.
Fragment build_binary(const BlockPlanContext& plan, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Distribution& a = *plan.distributions[op.inputs[0]];
  const Layout layout(plan.target);
  const std::string name = fmt::format("{}{}", op_kind_name(op.kind), plan.op_index);
  builder.label(0, name + ".gather");
  builder.label(1, name);
  Distribution output{a.rows, {}};
  const Tensor& second = plan.graph.tensors[op.inputs[1]];
  const Broadcast broadcast = binary_broadcast(plan.graph.tensors[op.inputs[0]], second);
  for (const Piece& piece : a.pieces) {
    const std::uint32_t rows = piece.row_count(a.rows);
    // The second operand's values this piece meets: its columns of a row vector, its rows of
    // a column, else its own block.
    const Block block = broadcast == Broadcast::row      ? Block{0, 1, piece.col_begin, piece.cols}
                        : broadcast == Broadcast::column ? Block{piece.row_begin, rows, 0, 1}
                                                         : Block{piece.row_begin, rows, piece.col_begin, piece.cols};
    const std::uint32_t other = gather_block(builder, 0, plan.graph, plan.distributions, op.inputs[1], block,
                                             piece.tile, layout.standard, layout.alignment);
    const std::uint32_t out = builder.create(name + ".out", piece.tile, std::uint64_t{rows} * piece.cols,
                                             layout.standard, layout.alignment, Lifetime::transient);
    if (broadcast == Broadcast::row || broadcast == Broadcast::column) {
      // A row vector or a column applies in place to a copy of the piece.
      builder.call(1, piece.tile, Codelet::copy, {{builder.existing(piece.buffer), 0}, {out, 0}}, {rows * piece.cols});
      if (broadcast == Broadcast::row)
        call_binary_row(builder, 1, piece.tile, op.kind, second.dtype, out, other, rows, piece.cols);
      else call_binary_column(builder, 1, piece.tile, op.kind, second.dtype, out, other, rows, piece.cols);
    } else {
      call_binary(builder, 1, piece.tile, op.kind, second.dtype, builder.existing(piece.buffer), other, out,
                  rows * piece.cols);
    }
    output.pieces.push_back({piece.tile, piece.col_begin, piece.cols, out, piece.row_begin, piece.rows});
  }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// The tile of table part (row group r, column group c) of an embedding split, from the cursor.
std::uint32_t embedding_tile(const BlockPlanContext& plan, Split split, std::uint32_t r, std::uint32_t c) {
  return static_cast<std::uint32_t>((plan.tile_cursor + std::uint64_t{c} * split.row_groups + r) % plan.target.tiles);
}

/// embedding, as poplibs' multiSlice plans it: the table [V, D] in column groups (each tile holds
/// every row of its columns, so any index is served where the columns are) and, when a column
/// group's rows do not fit one tile, row groups too. The host writes each part once (a weight;
/// a table that is a graph input at every run, a computed one is gathered over the exchange);
/// the indices reach every part's tile (from a graph input: written by the host to the first
/// tile and multicast from there); each tile looks every index up in its part (multi_slice),
/// zeros for rows it does not hold. Without row groups its [T, cols] result is the output's
/// column block; with them row group r owns token slice r of the block and adds the other row
/// groups' partial slices to its own (reduce_add): exactly one of them holds an index's row.
Fragment build_embedding(const BlockPlanContext& plan, Split split, FragmentBuilder& builder) {
  const Op& op = plan.op;
  const Graph& graph = plan.graph;
  const Tensor& table = graph.tensors[op.inputs[0]];
  const Tensor& indices = graph.tensors[op.inputs[1]];
  const std::uint32_t table_rows = rows_of(table), table_cols = cols_of(table);
  const auto count = static_cast<std::uint32_t>(indices.elements());
  const Layout layout(plan.target);
  // Table parts are read by this op only: the larger region holds them (t1472: interleaved).
  const Region table_region = region_for(Region::interleaved, plan.target);
  const std::string name = fmt::format("embedding{}", plan.op_index);
  const bool by_rows = split.row_groups > 1;
  builder.label(0, name + ".indices");
  builder.label(1, name);
  if (by_rows) builder.label(2, name + ".reduce");
  const std::vector<Range> row_groups = balanced_split(table_rows, split.row_groups);
  const std::vector<Range> column_groups = balanced_split(table_cols, split.column_groups);
  const Block all_indices{0, rows_of(indices), 0, cols_of(indices)};
  // Indices from the host land on the first part's tile once; the exchange multicasts them on.
  std::optional<std::uint32_t> home;
  if (!plan.distributions.at(op.inputs[1]))
    home = gather_block(builder, 0, graph, plan.distributions, op.inputs[1], all_indices,
                        embedding_tile(plan, split, 0, 0), layout.standard, layout.alignment);
  Distribution output{count, {}};
  const std::vector<Range> slices = balanced_split(count, split.row_groups);
  for (std::uint32_t c = 0; c < column_groups.size(); ++c) {
    const Range columns = column_groups[c];
    std::vector<std::uint32_t> partial(row_groups.size()), tile_of(row_groups.size());
    for (std::uint32_t r = 0; r < row_groups.size(); ++r) {
      const Range rows = row_groups[r];
      const std::uint32_t tile = embedding_tile(plan, split, r, c);
      tile_of[r] = tile;
      const std::uint32_t part =
          gather_block(builder, 0, graph, plan.distributions, op.inputs[0],
                       {rows.begin, rows.size, columns.begin, columns.size}, tile, table_region, layout.alignment);
      std::uint32_t at = 0;
      if (!home) {
        at = gather_block(builder, 0, graph, plan.distributions, op.inputs[1], all_indices, tile, layout.standard,
                          layout.alignment);
      } else if (r == 0 && c == 0) {
        at = *home;
      } else {
        at = builder.create(indices.name + ".block", tile, count, layout.standard, layout.alignment,
                            Lifetime::transient);
        builder.move_rows(0, {*home, 0}, count, {at, 0}, count, 1, count);
      }
      partial[r] = builder.create(name + (by_rows ? ".partial" : ".out"), tile, std::uint64_t{count} * columns.size,
                                  layout.standard, layout.alignment, Lifetime::transient);
      builder.call(1, tile, Codelet::multi_slice, {{part, 0}, {at, 0}, {partial[r], 0}},
                   {rows.size, columns.size, count, rows.begin, table_rows});
    }
    if (!by_rows) {
      output.pieces.push_back({tile_of[0], columns.begin, columns.size, partial[0], 0, count});
      continue;
    }
    // The reduce-scatter: row group r owns token slice r; every partial of it, its own copied
    // on its tile, sums to the lookup.
    for (std::uint32_t r = 0; r < row_groups.size(); ++r) {
      const Range slice = slices[r];
      if (slice.size == 0) continue;
      const std::uint64_t words = std::uint64_t{slice.size} * columns.size;
      const std::uint32_t received = builder.create(name + ".reduce", tile_of[r], split.row_groups * words,
                                                    layout.standard, layout.alignment, Lifetime::transient);
      for (std::uint32_t e = 0; e < row_groups.size(); ++e)
        builder.move_rows(1, {partial[e], slice.begin * columns.size}, columns.size,
                          {received, static_cast<std::uint32_t>(e * words)}, columns.size, slice.size, columns.size);
      const std::uint32_t out =
          builder.create(name + ".out", tile_of[r], words, layout.standard, layout.alignment, Lifetime::transient);
      builder.call(2, tile_of[r], Codelet::reduce_add, {{received, 0}, {out, 0}},
                   {split.row_groups, static_cast<std::uint32_t>(words)});
      output.pieces.push_back({tile_of[r], columns.begin, columns.size, out, slice.begin, slice.size});
    }
  }
  std::vector<TensorDistribution> made;
  made.push_back({op.output, std::move(output)});
  return builder.finish(std::move(made));
}

/// The splits of an embedding worth building: column groups at least kMinBlockColumns wide (a
/// later op gathers the output's column blocks: narrower ones cut every row into copies), and
/// for each the two fewest row groups (powers of two) whose table part fits a tile's region.
/// Row groups sum their partials as floats: a table of int32 or bool words takes none.
std::vector<Split> embedding_splits(const BlockPlanContext& plan) {
  const Tensor& table = plan.graph.tensors[plan.op.inputs[0]];
  const bool float_table = table.dtype == DType::float32;
  const std::uint32_t table_rows = rows_of(table), table_cols = cols_of(table), tiles = plan.target.tiles;
  const Region region = region_for(Region::interleaved, plan.target);
  const std::uint64_t room =
      region == Region::interleaved
          ? plan.target.memory_bytes - std::min(plan.target.interleaved_start, plan.target.memory_bytes)
          : std::min(plan.target.interleaved_start, plan.target.memory_bytes);
  constexpr std::uint32_t kRowGroupsPerColumnGroup = 2;
  std::vector<Split> splits;
  for (std::uint32_t columns : group_counts(std::max(1u, table_cols / kMinBlockColumns), tiles)) {
    const std::uint64_t part_cols = (table_cols + columns - 1) / columns;
    std::uint32_t kept = 0;
    const std::uint64_t most_rows = float_table ? std::min<std::uint64_t>(table_rows, tiles / columns) : 1;
    for (std::uint64_t rows = 1; rows <= most_rows && kept < kRowGroupsPerColumnGroup; rows *= 2) {
      const std::uint64_t part_bytes = (table_rows + rows - 1) / rows * part_cols * 4;
      if (part_bytes > room) continue;
      splits.push_back({static_cast<std::uint32_t>(rows), columns});
      ++kept;
    }
  }
  return splits;
}

/// How many consecutive tiles from the cursor a block op's split takes (its pieces' tiles).
std::uint64_t tiles_used(const BlockPlanContext& plan, Split split) {
  const Op& op = plan.op;
  if (op.kind == OpKind::matmul) return std::uint64_t{op.batch} * split.row_groups * split.column_groups;
  if (is_relayout(op.kind)) return relayout_moves(plan, split).size();
  return std::uint64_t{split.row_groups} * split.column_groups * split.depth_groups * split.field_groups;
}

std::string where(const BlockPlanContext& plan) {
  return fmt::format("{}:{}:{}", plan.graph.source_file, plan.op.place.line, plan.op.place.column);
}

}  // namespace

void call_binary(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind, DType operands,
                 std::uint32_t a, std::uint32_t b, std::uint32_t out, std::uint32_t count) {
  if (kind == OpKind::add && !is_integer_word(operands))
    return builder.call(superstep, tile, Codelet::add, {{a, 0}, {b, 0}, {out, 0}}, {count});
  builder.call(superstep, tile, Codelet::binary, {{a, 0}, {b, 0}, {out, 0}},
               {count, static_cast<std::uint32_t>(binary_function(kind, operands))});
}

void call_binary_row(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind,
                     DType row_dtype, std::uint32_t values, std::uint32_t row, std::uint32_t rows, std::uint32_t cols) {
  if (kind == OpKind::add && !is_integer_word(row_dtype))
    return builder.call(superstep, tile, row_dtype == DType::float16 ? Codelet::bias_add_half : Codelet::bias_add,
                        {{values, 0}, {row, 0}}, {rows, cols, 0});
  assert(row_dtype != DType::float16 && "the loaders allow float16 rows for add only");
  builder.call(superstep, tile, Codelet::binary_row, {{values, 0}, {row, 0}},
               {rows, cols, static_cast<std::uint32_t>(binary_function(kind, row_dtype))});
}

void call_binary_column(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, OpKind kind,
                        DType operands, std::uint32_t values, std::uint32_t column, std::uint32_t rows,
                        std::uint32_t cols) {
  builder.call(superstep, tile, Codelet::binary_column, {{values, 0}, {column, 0}},
               {rows, cols, static_cast<std::uint32_t>(binary_function(kind, operands))});
}

void call_unary(FragmentBuilder& builder, std::uint32_t superstep, std::uint32_t tile, const Graph& graph, const Op& op,
                std::uint32_t in, std::uint32_t out, std::uint32_t count) {
  if (op.kind == OpKind::cast)
    return builder.call(superstep, tile, Codelet::cast, {{in, 0}, {out, 0}},
                        {count, static_cast<std::uint32_t>(graph.tensors.at(op.inputs.at(0)).dtype),
                         static_cast<std::uint32_t>(graph.tensors.at(op.output).dtype)});
  if (op.kind == OpKind::clip)
    return builder.call(
        superstep, tile, Codelet::clip, {{in, 0}, {out, 0}},
        {count, float_param(static_cast<float>(op.clip_low)), float_param(static_cast<float>(op.clip_high))});
  builder.call(superstep, tile, Codelet::unary, {{in, 0}, {out, 0}},
               {count, static_cast<std::uint32_t>(unary_function(op)),
                float_param(static_cast<float>(op.kind == OpKind::unary ? op.alpha : op.exponent))});
}

bool is_block_op(const Graph& graph, const Op& op) {
  if (op.kind == OpKind::softmax || op.kind == OpKind::layer_norm || is_relayout(op.kind) || op.kind == OpKind::where ||
      is_row_reduction(op.kind) || is_window(op.kind) || op.kind == OpKind::gather || op.kind == OpKind::embedding)
    return true;
  return op.kind == OpKind::matmul && op.inputs.size() == 2 &&
         (op.transpose_b || op.batch > 1 || graph.tensors.at(op.inputs[1]).kind == TensorKind::intermediate);
}

namespace {

/// The part of `block` that `piece` holds: rows [row_low, row_high) x columns [col_low, col_high).
struct Overlap {
  std::uint32_t row_low, row_high, col_low, col_high;
  bool empty() const { return row_low >= row_high || col_low >= col_high; }
};

Overlap overlap(const Piece& piece, std::uint32_t all_rows, Block block) {
  return {std::max(piece.row_begin, block.row_begin),
          std::min(piece.row_begin + piece.row_count(all_rows), block.row_begin + block.rows),
          std::max(piece.col_begin, block.col_begin),
          std::min(piece.col_begin + piece.cols, block.col_begin + block.cols)};
}

}  // namespace

std::uint64_t gather_copies(const Distribution& distribution, Block block, bool column_major) {
  std::uint64_t copies = 0;
  for (const Piece& piece : distribution.pieces) {
    const Overlap o = overlap(piece, distribution.rows, block);
    if (o.empty()) continue;
    const std::uint64_t rows = o.row_high - o.row_low, cols = o.col_high - o.col_low;
    // As FragmentBuilder::move_rows counts: one copy per strided row, one for a contiguous run.
    if (column_major) copies += cols * (rows == 1 || piece.cols == 1 ? 1 : rows);
    else copies += rows == 1 || (piece.cols == cols && block.cols == cols) ? 1 : rows;
  }
  return copies;
}

std::uint32_t gather_block(FragmentBuilder& builder, std::uint32_t superstep, const Graph& graph,
                           const std::vector<std::optional<Distribution>>& distributions, std::uint32_t index,
                           Block block, std::uint32_t tile, Region region, std::uint32_t alignment, bool column_major) {
  const Tensor& tensor = graph.tensors.at(index);
  const std::uint64_t words = std::uint64_t{block.rows} * block.cols;
  const std::string name = tensor.name + (column_major ? ".block_t" : ".block");
  if (!distributions.at(index)) {
    // The host writes the block, in either layout.
    const bool weight = tensor.kind == TensorKind::weight;
    const std::uint32_t buffer = builder.create(name, tile, packed_words(words, tensor.dtype), region, alignment,
                                                weight ? Lifetime::whole_program : Lifetime::from_start);
    builder.host_slice(tensor, weight ? StreamKind::weight : StreamKind::input, buffer, block.row_begin, block.rows,
                       block.col_begin, block.cols, column_major);
    return buffer;
  }
  const std::uint32_t buffer = builder.create(name, tile, words, region, alignment, Lifetime::transient);
  if (!column_major) {
    gather_block_into(builder, superstep, graph, distributions, index, block, {buffer, 0});
    return buffer;
  }
  // Column c of each overlap: a strided column of the piece, a contiguous run of the block.
  for (const Piece& piece : distributions.at(index)->pieces) {
    const Overlap o = overlap(piece, distributions.at(index)->rows, block);
    if (o.empty()) continue;
    const BufferRef source{builder.existing(piece.buffer),
                           (o.row_low - piece.row_begin) * piece.cols + (o.col_low - piece.col_begin)};
    for (std::uint32_t c = o.col_low; c < o.col_high; ++c)
      builder.move_rows(superstep, {source.buffer, source.word_offset + (c - o.col_low)}, piece.cols,
                        {buffer, (c - block.col_begin) * block.rows + (o.row_low - block.row_begin)}, 1,
                        o.row_high - o.row_low, 1);
  }
  return buffer;
}

void gather_block_into(FragmentBuilder& builder, std::uint32_t superstep, const Graph& graph,
                       const std::vector<std::optional<Distribution>>& distributions, std::uint32_t index, Block block,
                       BufferRef to) {
  const Tensor& tensor = graph.tensors.at(index);
  const std::optional<Distribution>& distribution = distributions.at(index);
  if (!distribution) {  // the host writes it
    builder.host_slice(tensor, tensor.kind == TensorKind::weight ? StreamKind::weight : StreamKind::input, to.buffer,
                       block.row_begin, block.rows, block.col_begin, block.cols, false, to.word_offset);
    return;
  }
  // Every piece meeting the block sends the rows of their intersection.
  for (const Piece& piece : distribution->pieces) {
    const Overlap o = overlap(piece, distribution->rows, block);
    if (o.empty()) continue;
    const BufferRef source{builder.existing(piece.buffer),
                           (o.row_low - piece.row_begin) * piece.cols + (o.col_low - piece.col_begin)};
    builder.move_rows(
        superstep, source, piece.cols,
        {to.buffer, to.word_offset + (o.row_low - block.row_begin) * block.cols + (o.col_low - block.col_begin)},
        block.cols, o.row_high - o.row_low, o.col_high - o.col_low);
  }
}

Status plan_block_op(BlockPlanContext& plan, std::optional<Fragment>& fragment) {
  const Op& op = plan.op;
  const Graph& graph = plan.graph;
  const std::uint32_t tiles = plan.target.tiles;
  for (std::uint32_t input : op.inputs)
    if (graph.tensors.at(input).kind == TensorKind::intermediate && !plan.distributions.at(input))
      return Status::failure(
          fmt::format("{}: '{}' is read before it is produced", where(plan), graph.tensors[input].name));
  std::vector<Split> splits;
  // An elementwise op on a graph input (no earlier op spread it) runs on row groups of it.
  const bool on_rows = (is_binary(op.kind) || is_unary(op.kind)) && !plan.distributions.at(op.inputs[0]);
  if (is_binary(op.kind) && !on_rows) {
    splits.push_back({});
  } else if (op.kind == OpKind::matmul) {
    // Each product of a batch splits the same way over its share of the tiles.
    const std::uint32_t m = rows_of(graph.tensors[op.inputs[0]]) / op.batch, n = cols_of(graph.tensors[op.output]);
    const std::uint32_t share = std::max(1u, tiles / op.batch);
    // Output blocks at least kMinBlockColumns wide: narrower ones would split every later
    // gather of the product into column-wide copies (and starve the AMP's 16-wide rows).
    const std::uint32_t most_columns = std::max(1u, n / kMinBlockColumns);
    for (std::uint32_t rows : group_counts(m, share))
      for (std::uint32_t cols : group_counts(std::min(n, most_columns), share / rows)) splits.push_back({rows, cols});
  } else if (op.kind == OpKind::transpose) {
    // Row groups of each transposed block: its rows are x's columns.
    for (std::uint32_t rows : group_counts(cols_of(graph.tensors[op.inputs[0]]), std::max(1u, tiles / op.batch)))
      splits.push_back({rows, 1});
  } else if (op.kind == OpKind::split_heads || op.kind == OpKind::merge_heads) {
    // Token groups of each head of each batch item.
    const std::uint64_t units = std::uint64_t{op.batch} * op.heads;
    const std::uint32_t by_heads = op.kind == OpKind::split_heads ? op.output : op.inputs[0];  // [B*H*S, D]
    const auto tokens = static_cast<std::uint32_t>(rows_of(graph.tensors[by_heads]) / units);
    for (std::uint32_t rows :
         group_counts(tokens, static_cast<std::uint32_t>(std::max<std::uint64_t>(1, tiles / units))))
      splits.push_back({rows, 1});
  } else if (op.kind == OpKind::embedding) {
    splits = embedding_splits(plan);
    if (splits.empty()) {
      const Tensor& table = graph.tensors[op.inputs[0]];
      return Status::failure(fmt::format(
          "{}: model does not fit: embedding table '{}' [{}, {}] ({} bytes) does not fit in one region of the {} "
          "tiles of target '{}' even split over all of them; use a target with more tiles or a smaller table",
          where(plan), table.name, table.shape[0], table.shape[1], table.elements() * 4, tiles, plan.target.name));
    }
  } else if (op.kind == OpKind::gather) {
    // Row groups of the output; a single row (or a 1-D output) in column groups.
    const Tensor& out = graph.tensors[op.output];
    if (out.rows() > 1)
      for (std::uint32_t rows : group_counts(rows_of(out), tiles)) splits.push_back({rows, 1});
    else
      for (std::uint32_t cols : group_counts(std::max(1u, cols_of(out) / kMinBlockColumns), tiles))
        splits.push_back({1, cols});
  } else if (is_window(op.kind)) {
    // Output image-rows by output channels, the most promising few by their screening figure.
    // Channel blocks at least kMinBlockColumns wide, as products' (a next window op gathers
    // whole pixels: narrower blocks would cut every pixel into a copy of its own); a conv of
    // one group (with a bias to fuse after the reduction) may also split its input channels.
    const auto image_rows = static_cast<std::uint32_t>(op.batch * op.window.out_height());
    const std::uint32_t outs = cols_of(graph.tensors[op.output]), ins = cols_of(graph.tensors[op.inputs[0]]);
    const bool depth = op.kind == OpKind::conv && op.window.groups == 1 && op.inputs.size() == 3;
    // With every image-row a group of its own, each row's output columns may split too (field
    // groups), so a large field with few channels still spreads over the tiles. Only where rows
    // and channel groups would leave half the tiles idle: a field group gathers a run of pixels
    // per input row, and the copies' descriptors stay on the tiles all program long (offered
    // everywhere, ResNet-50 no longer fit; docs/planning.md has the thresholds measured).
    const auto out_w = static_cast<std::uint32_t>(op.window.out_width());
    const std::uint64_t without_fields = std::uint64_t{image_rows} * std::max(1u, outs / kMinBlockColumns) *
                                         (depth ? std::max(1u, ins / kMinBlockColumns) : 1u);
    const bool fields_worth_it = without_fields * 2 < tiles;
    for (std::uint32_t rows : group_counts(image_rows, tiles))
      for (std::uint32_t fields :
           rows == image_rows && fields_worth_it ? group_counts(out_w, tiles / rows) : std::vector{1u}) {
        if (fields > 1 && !field_groups_read_input(op.window, fields)) continue;
        for (std::uint32_t cols : group_counts(std::max(1u, outs / kMinBlockColumns), tiles / (rows * fields)))
          for (std::uint32_t depths :
               depth ? group_counts(std::max(1u, ins / kMinBlockColumns), tiles / (rows * fields * cols))
                     : std::vector{1u})
            splits.push_back({rows, cols, depths, fields});
      }
    std::vector<std::pair<std::uint64_t, Split>> ranked;
    for (Split split : splits) ranked.push_back({window_screening_cycles(plan, split), split});
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    splits.clear();
    for (const auto& [figure, split] : ranked) splits.push_back(split);
  } else {
    for (std::uint32_t rows : group_counts(rows_of(graph.tensors[op.inputs[0]]), tiles)) splits.push_back({rows, 1});
  }

  constexpr std::uint64_t kNone = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t best_cycles = kNone, smallest_bytes = kNone;
  Split best{}, smallest{};
  std::size_t costed = 0;
  // A reduction after the op's own compute (depth groups, an embedding's row groups) takes a superstep more.
  auto own_supersteps = [&](Split split) -> std::uint32_t {
    return split.depth_groups > 1 || (op.kind == OpKind::embedding && split.row_groups > 1) ? 2 : 1;
  };
  auto build = [&](Split split, FragmentBuilder& builder) {
    if (op.kind == OpKind::gather) return build_gather(plan, split, builder);
    if (op.kind == OpKind::embedding) return build_embedding(plan, split, builder);
    if (is_binary(op.kind) && !on_rows) return build_binary(plan, builder);
    if (op.kind == OpKind::matmul) return build_product(plan, split, builder);
    if (is_relayout(op.kind)) return build_relayout(plan, split, builder);
    if (is_window(op.kind)) return build_window(plan, split, builder);
    return build_rows(plan, split, builder);
  };
  // Window ops build only their best-screened splits that fit.
  const std::size_t most_costed = is_window(op.kind) ? kWindowCostedSplits : splits.size();
  for (Split split : splits) {
    if (costed >= most_costed) break;
    FragmentBuilder builder(plan.program, own_supersteps(split));
    Fragment candidate = build(split, builder);
    const std::vector<TileBytes> added = new_bytes(candidate, plan.target);
    std::uint64_t peak = 0;
    for (const TileBytes& bytes : added) peak = std::max(peak, bytes.total());
    if (!builder.oversized() && peak < smallest_bytes) smallest_bytes = peak, smallest = split;
    if (builder.oversized() || !plan.fits(added)) continue;
    const std::uint64_t cycles = plan.context.cost_model.estimate(candidate.program, plan.target).total() +
                                 host_input_cycles(candidate.program, plan.target);
    ++costed;
    plan.context.logger.debug(
        "{}: costed block plan op={} row_groups={} column_groups={}{} estimated_cycles={}", plan.context.span,
        plan.op_index, split.row_groups, split.column_groups,
        is_window(op.kind) ? fmt::format(" depth_groups={} field_groups={}", split.depth_groups, split.field_groups)
                           : "",
        cycles);
    if (cycles < best_cycles) {
      best_cycles = cycles;
      best = split;
      fragment = std::move(candidate);
    }
  }
  if (!fragment) {
    if (smallest_bytes == kNone)
      return Status::failure(
          fmt::format("{}: model does not fit: every plan of {} '{}' needs a buffer of 4 GiB or "
                      "more on one tile",
                      where(plan), op_kind_name(op.kind), graph.tensors[op.output].name));
    // Nothing fits: carry on with the smallest so place-storage reports every tile over.
    plan.context.info("no block plan fits in tile memory op={} row_groups={} column_groups={}", plan.op_index,
                      smallest.row_groups, smallest.column_groups);
    if (plan.unfit_ops) plan.unfit_ops->push_back(plan.op_index);
    FragmentBuilder builder(plan.program, own_supersteps(smallest));
    fragment = build(smallest, builder);
    best = smallest;
  }
  std::size_t copies = 0, transposed_gathers = 0;
  for (const Superstep& step : fragment->program.supersteps) {
    copies += step.copies.size();
    for (const CodeletCall& call : step.compute) copies += call.codelet == Codelet::copy ? 1 : 0;
  }
  for (const Buffer& buffer : fragment->program.buffers) transposed_gathers += buffer.name.ends_with(".block_t");
  plan.context.info(
      "selected block plan op={} kind={} row_groups={} column_groups={}{} candidates={} costed={} "
      "copies={} transposed_gathers={} estimated_cycles={}",
      plan.op_index, op_kind_name(op.kind), best.row_groups, best.column_groups,
      is_window(op.kind) ? fmt::format(" depth_groups={} field_groups={}", best.depth_groups, best.field_groups) : "",
      splits.size(), costed, copies, transposed_gathers, best_cycles == kNone ? 0 : best_cycles);
  plan.context.remark({plan.op_index, op_kind_name(op.kind), "block", best.column_groups, 0, best.row_groups,
                       splits.size(), best_cycles == kNone ? 0 : best_cycles});
  // The next block op starts past the tiles this one used (binary ops run on their first operand's).
  if (!is_binary(op.kind) || on_rows)
    plan.tile_cursor = static_cast<std::uint32_t>((plan.tile_cursor + tiles_used(plan, best)) % tiles);
  return Status::success();
}

}  // namespace tessera::select_finalist
