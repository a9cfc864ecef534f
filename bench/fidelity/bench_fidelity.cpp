// Benchmark: the simulator's charge for each codelet beside Graphcore's poplibs estimate for the
// same operation (bench/fidelity/poplibs_reference.cpp, transcribed on its own) and beside the two
// floors, over a grid of shapes and a fixed-seed random draw of odd, tiny and huge shapes.
// Usage: bench-fidelity [TARGET] [--seed N] [--draw N] [--quiet]  (--quiet: summaries only)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "poplibs_reference.hpp"
#include "tessera/codelets.hpp"
#include "tessera/target.hpp"
#include "tessera/window_calls.hpp"

namespace {

using tessera::Codelet;
namespace ref = poplibs_reference;

// One row kind's operands: the params each kind reads (the others stay 0). Conv and pool rows:
// `batch` images of a tile's input patch (the window's field) with their channels.
struct Shape {
  std::uint32_t m = 0, k = 0, n = 0, rows = 0, cols = 0, count = 0, parts = 0;
  std::uint32_t batch = 1, in_channels = 0, out_channels = 0;
  tessera::Window window = {};
};

struct Row {
  std::string kind, shape;
  tessera::CodeletCharge ours;
  ref::Estimate poplibs;
};

const std::vector<std::pair<const char*, ref::Unary>> kUnaries = {
    {"sigmoid", ref::Unary::sigmoid}, {"tanh", ref::Unary::tanh}, {"erf", ref::Unary::erf},
    {"sqrt", ref::Unary::sqrt},       {"pow", ref::Unary::power}, {"square", ref::Unary::square},
    {"tan", ref::Unary::tan},         {"asin", ref::Unary::asin}, {"is_inf", ref::Unary::isInf},
    {"is_nan", ref::Unary::isNan}};
const std::vector<std::pair<const char*, ref::Binary>> kBinaries = {{"subtract", ref::Binary::subtract},
                                                                    {"multiply", ref::Binary::multiply},
                                                                    {"divide", ref::Binary::divide},
                                                                    {"add", ref::Binary::add}};
// Functions with no broadcast vertex in poplibs: rows of the flat binary codelet only.
const std::vector<std::pair<const char*, ref::Binary>> kFlatBinaries = {{"power", ref::Binary::power},
                                                                        {"remainder", ref::Binary::remainder},
                                                                        {"int_max", ref::Binary::intMaximum},
                                                                        {"int_remainder", ref::Binary::intRemainder}};

tessera::UnaryFunction unary_function(ref::Unary op) {
  switch (op) {
    case ref::Unary::sigmoid:
      return tessera::UnaryFunction::sigmoid;
    case ref::Unary::tanh:
      return tessera::UnaryFunction::tanh;
    case ref::Unary::erf:
      return tessera::UnaryFunction::erf;
    case ref::Unary::sqrt:
      return tessera::UnaryFunction::sqrt;
    case ref::Unary::tan:
      return tessera::UnaryFunction::tan;
    case ref::Unary::asin:
      return tessera::UnaryFunction::asin;
    case ref::Unary::isInf:
      return tessera::UnaryFunction::is_inf;
    case ref::Unary::isNan:
      return tessera::UnaryFunction::is_nan;
    default:
      return tessera::UnaryFunction::pow;
  }
}

tessera::BinaryFunction binary_function(ref::Binary op) {
  switch (op) {
    case ref::Binary::subtract:
      return tessera::BinaryFunction::subtract;
    case ref::Binary::multiply:
      return tessera::BinaryFunction::multiply;
    case ref::Binary::divide:
      return tessera::BinaryFunction::divide;
    case ref::Binary::power:
      return tessera::BinaryFunction::power;
    case ref::Binary::remainder:
      return tessera::BinaryFunction::remainder;
    case ref::Binary::intMaximum:
      return tessera::BinaryFunction::int_max;
    case ref::Binary::intRemainder:
      return tessera::BinaryFunction::int_remainder;
    default:
      return tessera::BinaryFunction::add;
  }
}

// Every kind of row: the matmul products, each codelet, each function of unary and binary codelets.
std::vector<std::string> row_kinds() {
  std::vector<std::string> kinds = {
      "matmul",          "matmul_half", "relu",       "add",       "copy",       "bias_add",    "bias_add+relu",
      "bias_add_half",   "softmax",     "layer_norm", "transpose", "reduce_add", "reduce_bias", "reduce_rows:sum",
      "reduce_rows:mean"};
  for (const auto& [name, op] : kUnaries) kinds.push_back(std::string("unary:") + name);
  for (const auto& [name, op] : kBinaries)
    for (const char* codelet : {"binary:", "binary_row:", "binary_column:"})
      kinds.push_back(codelet + std::string(name));
  for (const auto& [name, op] : kFlatBinaries) kinds.push_back(std::string("binary:") + name);
  // Last, so that the draw of the kinds above does not move.
  for (const char* window : {"conv", "conv+bias+relu", "conv_depthwise", "max_pool", "avg_pool"})
    kinds.push_back(window);
  return kinds;
}

bool is_window(const std::string& kind) { return kind.starts_with("conv") || kind.ends_with("_pool"); }

bool is_product(const std::string& kind) { return kind == "matmul" || kind == "matmul_half"; }
bool is_counted(const std::string& kind) {
  return kind == "relu" || kind == "add" || kind == "copy" || kind.rfind("unary:", 0) == 0 ||
         kind.rfind("binary:", 0) == 0;
}

std::string after_colon(const std::string& kind) { return kind.substr(kind.find(':') + 1); }

// A conv or pool row: one call an image over the tile's patch (as `tessera cycles` charges a
// layer), so the charge and its floors are the batch's.
Row evaluate_window(const std::string& kind, const Shape& s, const tessera::Target& target) {
  const tessera::Window& w = s.window;
  const auto out_h = static_cast<std::uint32_t>(w.out_height());
  const bool pool = kind.ends_with("_pool");
  const bool bias_relu = kind == "conv+bias+relu";
  std::vector<std::uint32_t> params;
  ref::Estimate poplibs;
  if (pool) {
    const bool max = kind == "max_pool";
    params = tessera::pool_call_params(w, 0, out_h, s.in_channels,
                                       max ? tessera::PoolMode::max : tessera::PoolMode::average);
    poplibs = ref::pooling({s.batch, s.in_channels, w.height, w.width, w.kernel_h, w.kernel_w, w.stride_h, w.stride_w,
                            w.dilation_h, w.dilation_w, w.pad_top, w.pad_left, w.pad_bottom, w.pad_right},
                           max);
  } else {
    params = tessera::conv_call_params(
        w, 0, out_h, {s.in_channels, s.out_channels, s.in_channels / w.groups, s.out_channels / w.groups, 0},
        bias_relu ? tessera::kConvRelu | tessera::kConvHasBias : 0u);
    poplibs = ref::convolution({s.batch, s.in_channels, w.height, w.width, s.out_channels, w.kernel_h, w.kernel_w,
                                w.stride_h, w.stride_w, w.dilation_h, w.dilation_w, w.pad_top, w.pad_left, w.pad_bottom,
                                w.pad_right, w.groups, bias_relu, bias_relu});
  }
  tessera::CodeletCharge ours = tessera::codelet_charge(pool ? Codelet::pool : Codelet::conv, params, target);
  ours.cycles *= s.batch;
  ours.mac_floor *= s.batch;
  ours.load_floor *= s.batch;
  std::string shape = "batch=" + std::to_string(s.batch) + " in_channels=" + std::to_string(s.in_channels) +
                      " field=" + std::to_string(w.height) + "x" + std::to_string(w.width);
  if (!pool) shape += " out_channels=" + std::to_string(s.out_channels);
  shape += " kernel=" + std::to_string(w.kernel_h) + "x" + std::to_string(w.kernel_w) +
           " stride=" + std::to_string(w.stride_h) + "x" + std::to_string(w.stride_w) +
           " dilation=" + std::to_string(w.dilation_h) + "x" + std::to_string(w.dilation_w) +
           " pad=" + std::to_string(w.pad_top) + "," + std::to_string(w.pad_left) + "," + std::to_string(w.pad_bottom) +
           "," + std::to_string(w.pad_right);
  if (!pool) shape += " groups=" + std::to_string(w.groups);
  return {kind, shape, ours, poplibs};
}

Row evaluate(const std::string& kind, const Shape& s, const tessera::Target& target) {
  if (is_window(kind)) return evaluate_window(kind, s, target);
  auto charge = [&](Codelet codelet, std::vector<std::uint32_t> params) {
    return tessera::codelet_charge(codelet, params, target);
  };
  const std::string rows_cols = "rows=" + std::to_string(s.rows) + " cols=" + std::to_string(s.cols);
  const std::string count = "count=" + std::to_string(s.count);
  if (is_product(kind)) {
    // Constant weights laid out as each orientation streams them (as the planner lays them out),
    // the faster orientation; a swapped product is its matmul call and the transpose of c^T.
    const bool half = kind == "matmul_half";
    tessera::CodeletCharge best;
    const char* best_orientation = "as-is";
    for (auto orientation : {tessera::MatmulOrientation::as_is, tessera::MatmulOrientation::swapped}) {
      const Codelet codelet = tessera::constant_weight_matmul(half, orientation);
      const std::vector<std::uint32_t> params = {s.m, s.k, s.n, static_cast<std::uint32_t>(orientation)};
      tessera::CodeletCharge c = charge(codelet, params);
      c.cycles = tessera::matmul_product_cycles(codelet, params, target);
      if (best.cycles == 0 || c.cycles < best.cycles) {
        best = c;
        best_orientation = orientation == tessera::MatmulOrientation::as_is ? "as-is" : "swapped";
      }
    }
    return {kind,
            "m=" + std::to_string(s.m) + " k=" + std::to_string(s.k) + " n=" + std::to_string(s.n) +
                " orientation=" + best_orientation,
            best, ref::matMul(s.m, s.k, s.n, half)};
  }
  if (kind == "relu") return {kind, count, charge(Codelet::relu, {s.count}), ref::reluInPlace(s.count)};
  if (kind == "add") return {kind, count, charge(Codelet::add, {s.count}), ref::addTensors(s.count)};
  if (kind == "copy") return {kind, count, charge(Codelet::copy, {s.count}), ref::copyTensor(s.count)};
  if (kind.rfind("bias_add", 0) == 0) {
    const bool half = kind == "bias_add_half", relu = kind == "bias_add+relu";
    return {kind, rows_cols,
            charge(half ? Codelet::bias_add_half : Codelet::bias_add, {s.rows, s.cols, relu ? 1u : 0u}),
            ref::biasRowsInPlace(s.rows, s.cols, half, relu)};
  }
  if (kind == "softmax")
    return {kind, rows_cols, charge(Codelet::softmax, {s.rows, s.cols, tessera::float_param(1.0f)}),
            ref::softmaxRows(s.rows, s.cols)};
  if (kind == "layer_norm")
    return {kind, rows_cols, charge(Codelet::layer_norm, {s.rows, s.cols, tessera::float_param(1e-5f)}),
            ref::layerNormRows(s.rows, s.cols)};
  if (kind == "transpose")
    return {kind, rows_cols, charge(Codelet::transpose, {s.rows, s.cols}), ref::transposeBlock(s.rows, s.cols)};
  if (kind == "reduce_add")
    return {kind, "parts=" + std::to_string(s.parts) + " " + count, charge(Codelet::reduce_add, {s.parts, s.count}),
            ref::reduceParts(s.parts, s.count)};
  if (kind == "reduce_bias") {
    const std::uint32_t relu = s.parts % 2;  // half the rows fuse a relu
    return {kind, "parts=" + std::to_string(s.parts) + " " + rows_cols + " relu=" + std::to_string(relu),
            charge(Codelet::reduce_bias, {s.parts, s.rows, s.cols, s.cols, relu}),
            ref::reducePartsThenBias(s.parts, s.rows, s.cols, relu != 0)};
  }
  if (kind.rfind("reduce_rows:", 0) == 0) {
    const bool mean = kind == "reduce_rows:mean";
    return {kind, rows_cols, charge(Codelet::reduce_rows, {s.rows, s.cols, mean ? 1u : 0u}),
            ref::reduceRows(s.rows, s.cols, mean)};
  }
  if (kind.rfind("unary:", 0) == 0) {
    for (const auto& [name, op] : kUnaries)
      if (after_colon(kind) == name) {
        const float exponent = op == ref::Unary::square ? 2.0f : 3.0f;
        const auto f = static_cast<std::uint32_t>(unary_function(op));
        return {kind, count, charge(Codelet::unary, {s.count, f, tessera::float_param(exponent)}),
                ref::unaryOp(op, s.count)};
      }
  }
  for (const auto& [name, op] : kFlatBinaries)
    if (after_colon(kind) == name) {
      const auto f = static_cast<std::uint32_t>(binary_function(op));
      return {kind, count, charge(Codelet::binary, {s.count, f}), ref::binaryOp(op, s.count)};
    }
  for (const auto& [name, op] : kBinaries) {
    if (after_colon(kind) != name) continue;
    const auto f = static_cast<std::uint32_t>(binary_function(op));
    if (kind.rfind("binary:", 0) == 0)
      return {kind, count, charge(Codelet::binary, {s.count, f}), ref::binaryOp(op, s.count)};
    if (kind.rfind("binary_row:", 0) == 0)
      return {kind, rows_cols, charge(Codelet::binary_row, {s.rows, s.cols, f}),
              ref::rowVectorInPlace(op, s.rows, s.cols)};
    return {kind, rows_cols, charge(Codelet::binary_column, {s.rows, s.cols, f}),
            ref::columnScalarInPlace(op, s.rows, s.cols)};
  }
  std::fprintf(stderr, "bench-fidelity: no row kind %s\n", kind.c_str());
  std::exit(2);
}

// At most ~600 KB of input, weights and output floats: a patch one tile holds.
constexpr std::uint64_t kTileFloats = 600 * 1024 / 4;

// A conv or pool row's shape when its kernel fits the padded patch, its params are sound and its
// floats fit a tile.
std::optional<Shape> window_shape(const std::string& kind, std::uint32_t batch, std::uint32_t in_channels,
                                  std::uint32_t out_channels, const tessera::Window& w) {
  if (w.out_height() <= 0 || w.out_width() <= 0) return std::nullopt;
  const bool pool = kind.ends_with("_pool");
  const std::uint64_t outs = pool ? in_channels : out_channels;
  const std::uint64_t floats =
      std::uint64_t{batch} *
          (std::uint64_t{w.height} * w.width * in_channels + std::uint64_t(w.out_height() * w.out_width()) * outs) +
      (pool ? 0 : std::uint64_t(w.kernel_positions()) * (in_channels / w.groups) * out_channels);
  if (floats > kTileFloats) return std::nullopt;
  Shape s{.batch = batch, .in_channels = in_channels, .out_channels = static_cast<std::uint32_t>(outs), .window = w};
  const auto out_h = static_cast<std::uint32_t>(w.out_height());
  const std::vector<std::uint32_t> params =
      pool ? tessera::pool_call_params(w, 0, out_h, in_channels, tessera::PoolMode::max)
           : tessera::conv_call_params(
                 w, 0, out_h, {in_channels, out_channels, in_channels / w.groups, out_channels / w.groups, 0}, 0);
  if (!tessera::window_params_problem(pool ? Codelet::pool : Codelet::conv, params).empty()) return std::nullopt;
  return s;
}

tessera::Window make_window(std::uint32_t height, std::uint32_t width, std::uint32_t kernel_h, std::uint32_t kernel_w,
                            std::uint32_t stride, std::uint32_t dilation, std::uint32_t groups) {
  tessera::Window w;
  w.height = height, w.width = width, w.kernel_h = kernel_h, w.kernel_w = kernel_w;
  w.stride_h = w.stride_w = stride;
  w.dilation_h = w.dilation_w = dilation;
  // "same" padding: half the dilated kernel each side
  w.pad_top = w.pad_bottom = dilation * (kernel_h - 1) / 2;
  w.pad_left = w.pad_right = dilation * (kernel_w - 1) / 2;
  w.groups = groups;
  return w;
}

// The grid of conv and pool rows: channel counts, tile-sized patches and kernels as CNN layers
// give a tile, "same" padding.
void window_grid(std::vector<std::pair<std::string, Shape>>& cases) {
  auto add = [&](const std::string& kind, std::uint32_t in, std::uint32_t out, const tessera::Window& w) {
    if (auto s = window_shape(kind, 1, in, out, w)) cases.push_back({kind, *s});
  };
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> channels = {
      {1, 8}, {3, 16}, {3, 64}, {8, 8}, {16, 16}, {16, 32}, {32, 32}, {32, 64}, {64, 64}, {64, 128}, {128, 128}};
  const std::vector<std::uint32_t> fields = {1, 4, 7, 14, 28, 56};
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> kernels = {{1, 1}, {3, 3}, {5, 5}, {7, 7}, {1, 7}, {7, 1}};
  for (const auto& [in, out] : channels)
    for (std::uint32_t field : fields) {
      for (const auto& [kh, kw] : kernels)
        for (std::uint32_t stride : {1u, 2u})
          if (stride == 1 || field > 1) add("conv", in, out, make_window(field, field, kh, kw, stride, 1, 1));
      add("conv", in, out, make_window(field, field, 3, 3, 1, 2, 1));
    }
  for (const auto& [in, out] :
       std::vector<std::pair<std::uint32_t, std::uint32_t>>{{3, 16}, {16, 16}, {32, 64}, {64, 64}, {128, 128}})
    for (std::uint32_t field : {7u, 14u, 28u, 56u})
      for (std::uint32_t k : {1u, 3u}) add("conv+bias+relu", in, out, make_window(field, field, k, k, 1, 1, 1));
  for (std::uint32_t c : {8u, 16u, 32u, 64u, 128u})
    for (std::uint32_t field : {4u, 7u, 14u, 28u, 56u}) {
      for (std::uint32_t k : {3u, 5u, 7u})
        for (std::uint32_t stride : {1u, 2u})
          add("conv_depthwise", c, c, make_window(field, field, k, k, stride, 1, c));
      add("conv_depthwise", c, c, make_window(field, field, 3, 3, 1, 2, c));
    }
  for (const char* kind : {"max_pool", "avg_pool"})
    for (std::uint32_t c : {1u, 3u, 8u, 16u, 32u, 64u, 128u})
      for (std::uint32_t field : {2u, 4u, 7u, 14u, 28u, 56u}) {
        tessera::Window two = make_window(field, field, 2, 2, 2, 1, 1);
        two.pad_bottom = two.pad_right = 0;
        add(kind, c, c, two);
        add(kind, c, c, make_window(field, field, 3, 3, 2, 1, 1));
        add(kind, c, c, make_window(field, field, 3, 3, 1, 1, 1));
        if (field > 2) add(kind, c, c, make_window(field, field, field, field, 1, 1, 1));  // global: no padding
      }
}

// The grid: batches and widths as the planner meets them in dense layers.
std::vector<std::pair<std::string, Shape>> grid() {
  std::vector<std::pair<std::string, Shape>> cases;
  const std::vector<std::uint32_t> batches = {1, 2, 4, 16, 64, 256};
  const std::vector<std::uint32_t> widths = {16, 64, 256, 1024, 4096};
  for (const char* kind : {"matmul", "matmul_half"})
    for (std::uint32_t m : batches)
      for (std::uint32_t k : widths)
        for (std::uint32_t n : widths)
          if (std::uint64_t{m} * k * n <= (1ull << 26)) cases.push_back({kind, Shape{.m = m, .k = k, .n = n}});
  for (const std::string& kind : row_kinds()) {
    if (is_product(kind) || is_window(kind)) continue;
    for (std::uint32_t m : batches)
      for (std::uint32_t width : widths) {
        Shape s{.rows = m, .cols = width, .count = m * width, .parts = 0};
        if (kind == "transpose") std::swap(s.rows, s.cols);  // a swapped product's c^T [width, m]
        if (kind == "reduce_add" || kind == "reduce_bias") {
          for (std::uint32_t parts : {2u, 4u, 16u}) {
            s.parts = parts;
            cases.push_back({kind, s});
          }
          continue;
        }
        cases.push_back({kind, s});
      }
  }
  window_grid(cases);
  return cases;
}

// Sizes from lo to hi: log-uniform, with 1, 2 and 3 often, and sometimes a multiple of 16.
std::uint32_t draw_size(std::mt19937_64& rng, std::uint32_t lo, std::uint32_t hi) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double pick = unit(rng);
  if (pick < 0.12) return std::clamp<std::uint32_t>(1 + static_cast<std::uint32_t>(pick / 0.04), lo, hi);
  const double log_value = std::log(double(lo)) + unit(rng) * (std::log(double(hi) + 1) - std::log(double(lo)));
  auto value = std::clamp<std::uint32_t>(static_cast<std::uint32_t>(std::exp(log_value)), lo, hi);
  if (pick > 0.9 && value >= 16) value = value / 16 * 16;
  return value;
}

// A drawn conv or pool row: odd channels and fields, kernels 1 to 7 a side, strides 1 and 2,
// now and then a dilation of 2, padding up to half the kernel, a few images; depthwise convs have
// a group a channel, other convs now and then a few groups.
Shape draw_window(std::mt19937_64& rng, const std::string& kind) {
  auto pick = [&](std::uint32_t lo, std::uint32_t hi) {
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(rng);
  };
  for (;;) {
    const std::uint32_t batch = pick(0, 3) == 0 ? pick(2, 4) : 1;
    const std::uint32_t in = draw_size(rng, 1, 128);
    const std::uint32_t out = kind == "conv" || kind == "conv+bias+relu" ? draw_size(rng, 1, 128) : in;
    tessera::Window w;
    w.height = draw_size(rng, 1, 56);
    w.width = pick(0, 3) == 0 ? w.height : draw_size(rng, 1, 56);
    w.kernel_h = pick(1, 7);
    w.kernel_w = pick(0, 2) == 0 ? pick(1, 7) : w.kernel_h;
    w.stride_h = pick(1, 2);
    w.stride_w = pick(0, 3) == 0 ? pick(1, 2) : w.stride_h;
    w.dilation_h = w.dilation_w = pick(0, 9) == 0 ? 2 : 1;
    w.pad_top = pick(0, w.dilation_h * (w.kernel_h - 1) / 2);
    w.pad_bottom = pick(0, w.dilation_h * (w.kernel_h - 1) / 2);
    w.pad_left = pick(0, w.dilation_w * (w.kernel_w - 1) / 2);
    w.pad_right = pick(0, w.dilation_w * (w.kernel_w - 1) / 2);
    if (kind == "conv_depthwise") {
      w.groups = in;
    } else if (!kind.ends_with("_pool") && pick(0, 4) == 0) {
      w.groups = std::gcd(in, out) >= 2 ? pick(1, std::min<std::uint32_t>(std::gcd(in, out), 4)) : 1;
      while (in % w.groups != 0 || out % w.groups != 0) --w.groups;
    }
    if (auto s = window_shape(kind, batch, in, out, w)) return *s;
  }
}

// The fixed-seed draw: `per_kind` shapes of every row kind (four times as many matmul products).
std::vector<std::pair<std::string, Shape>> draw(std::uint64_t seed, std::size_t per_kind) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::string, Shape>> cases;
  for (const std::string& kind : row_kinds()) {
    const std::size_t wanted = is_product(kind) ? 4 * per_kind : per_kind;
    for (std::size_t i = 0; i < wanted; ++i) {
      Shape s;
      if (is_window(kind)) {
        s = draw_window(rng, kind);
      } else if (is_product(kind)) {
        do {  // at most 2^26 MACs: what a tile's memory holds
          s.m = draw_size(rng, 1, 512);
          s.k = draw_size(rng, 1, 4096);
          s.n = draw_size(rng, 1, 4096);
        } while (std::uint64_t{s.m} * s.k * s.n > (1ull << 26));
      } else if (is_counted(kind)) {
        s.count = draw_size(rng, 1, 1000000);
      } else if (kind == "reduce_add") {
        s.parts = draw_size(rng, 2, 64);
        s.count = draw_size(rng, 1, 1000000 / s.parts);
      } else {
        do {
          s.rows = draw_size(rng, 1, 512);
          s.cols = draw_size(rng, 1, 4096);
        } while (std::uint64_t{s.rows} * s.cols > 1000000);
        if (kind == "reduce_bias") s.parts = draw_size(rng, 2, 64);
      }
      cases.push_back({kind, s});
    }
  }
  return cases;
}

double percentile(std::vector<double> sorted, double p) {
  std::sort(sorted.begin(), sorted.end());
  const std::size_t index = static_cast<std::size_t>(std::floor(p * double(sorted.size() - 1) + 0.5));
  return sorted[std::min(index, sorted.size() - 1)];
}

bool within_band(double ratio) { return ratio >= 0.75 && ratio <= 1.25; }

// Prints the rows of one set and its per-kind summary; returns the rows below a floor.
std::size_t report(const char* set, const std::vector<Row>& rows, bool quiet) {
  std::map<std::string, std::vector<double>> ratios;
  std::map<std::string, std::size_t> below;
  std::size_t below_total = 0;
  for (const Row& row : rows) {
    const double ratio = double(row.ours.cycles) / row.poplibs.cycles;
    ratios[row.kind].push_back(ratio);
    const bool floor_ok = row.ours.cycles >= row.ours.mac_floor && row.ours.cycles >= row.ours.load_floor;
    below[row.kind] += floor_ok ? 0 : 1;
    below_total += floor_ok ? 0 : 1;
    if (quiet && within_band(ratio) && floor_ok) continue;
    std::printf(
        "set=%s codelet=%s %s path=%s ours=%llu poplibs=%.0f ratio=%.3f mac_floor=%llu load_floor=%llu "
        "within_25pct=%s poplibs_vertex=\"%s\"%s\n",
        set, row.kind.c_str(), row.shape.c_str(), row.ours.path, static_cast<unsigned long long>(row.ours.cycles),
        row.poplibs.cycles, ratio, static_cast<unsigned long long>(row.ours.mac_floor),
        static_cast<unsigned long long>(row.ours.load_floor), within_band(ratio) ? "yes" : "no",
        row.poplibs.vertex.c_str(), floor_ok ? "" : " BELOW_FLOOR");
  }
  std::size_t within = 0, total = 0, weakest_in = 0, weakest_n = 1;
  std::string weakest = "-";
  for (const auto& [kind, values] : ratios) {
    const auto in = static_cast<std::size_t>(std::count_if(values.begin(), values.end(), within_band));
    within += in;
    total += values.size();
    if (in * weakest_n < weakest_in * values.size() || weakest == "-") {
      weakest = kind;
      weakest_in = in;
      weakest_n = values.size();
    }
    std::printf(
        "summary set=%s codelet=%s shapes=%zu within_25pct=%zu within_pct=%.1f min_ratio=%.3f p5_ratio=%.3f "
        "median_ratio=%.3f p95_ratio=%.3f max_ratio=%.3f below_a_floor=%zu\n",
        set, kind.c_str(), values.size(), in, 100.0 * double(in) / double(values.size()),
        *std::min_element(values.begin(), values.end()), percentile(values, 0.05), percentile(values, 0.5),
        percentile(values, 0.95), *std::max_element(values.begin(), values.end()), below[kind]);
  }
  std::printf(
      "summary set=%s shapes=%zu within_25pct=%zu weakest_codelet=%s weakest_within_pct=%.1f below_a_floor=%zu\n", set,
      total, within, weakest.c_str(), 100.0 * double(weakest_in) / double(weakest_n), below_total);
  return below_total;
}

}  // namespace

int main(int argc, char** argv) {
  std::string target_path = std::string(TESSERA_SOURCE_DIR) + "/configs/targets/t1472.yaml";
  std::uint64_t seed = 32;
  std::size_t per_kind = 60;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--draw" && i + 1 < argc) per_kind = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--quiet") quiet = true;
    else target_path = arg;
  }
  const tessera::Target target = tessera::load_target(target_path);
  std::printf(
      "# codelet fidelity: target=%s seed=%llu; ours = the simulator's charge, poplibs = Graphcore's estimators "
      "transcribed in bench/fidelity/poplibs_reference.cpp for the vertex poplibs would run, floors = MACs at peak "
      "and input bytes at load_bytes_per_cycle\n",
      target.name.c_str(), static_cast<unsigned long long>(seed));
  std::size_t below = 0;
  for (const auto& [set, cases] : {std::pair{"grid", grid()}, std::pair{"draw", draw(seed, per_kind)}}) {
    std::vector<Row> rows;
    rows.reserve(cases.size());
    for (const auto& [kind, shape] : cases) rows.push_back(evaluate(kind, shape, target));
    below += report(set, rows, quiet);
  }
  return below == 0 ? 0 : 1;
}
