// `tessera cycles`: one codelet call's charge, floors and path, exactly as the simulator charges it.
#include "cycles_command.hpp"

#include "command_line.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <optional>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/graph.hpp"
#include "tessera/target.hpp"
#include "tessera/window_calls.hpp"

namespace tessera::cli {

CLI::App* add_cycles_command(CLI::App& app, CyclesRequest& request) {
  auto* cycles = app.add_subcommand("cycles", "print the simulator's charge for one codelet call and its floors");
  cycles
      ->add_option(
          "codelet", request.codelet,
          "matmul, matmul_transposed, relu, add, copy, bias_add, softmax, layer_norm, reduce_add, reduce_bias; "
          "unary: sigmoid, tanh, erf, sqrt, square, pow; binary: subtract, multiply, divide (--count), "
          "their _row and _column forms (--rows --cols); reduce_sum, reduce_mean; transpose; conv, max_pool, "
          "avg_pool (--batch --in-channels --height --width --kernel [--out-channels --stride --dilation --groups "
          "--pad])")
      ->required();
  cycles->add_option("--target,-t", request.target, "target YAML or a shipped target's name")
      ->required()
      ->transform(shipped_config("targets"))
      ->check(CLI::ExistingFile);
  cycles->add_option("--dtype", request.dtype, "f32, or f16 for half weights (matmul, bias_add)")
      ->check(CLI::IsMember({"f32", "f16"}));
  // as_is, as the pipeline option select-finalist's `orientation` spells it; as-is still accepted.
  cycles->add_option("--orientation", request.orientation, "matmul orientation: auto (the faster), as_is or swapped")
      ->transform(CLI::Transformer(std::map<std::string, std::string>{{"as-is", "as_is"}}))
      ->check(CLI::IsMember({"auto", "as_is", "swapped"}));
  for (auto [flag, field, what] : {std::tuple{"--m", &request.m, "matmul rows of a"},
                                   {"--k", &request.k, "matmul depth"},
                                   {"--n", &request.n, "matmul columns of b"},
                                   {"--count", &request.count, "elements"},
                                   {"--rows", &request.rows, "rows"},
                                   {"--cols", &request.cols, "columns"},
                                   {"--parts", &request.parts, "partial sums added"}})
    cycles->add_option(flag, *field, what)->check(CLI::Range(1u, 1u << 30));
  cycles->add_flag("--relu", request.relu, "bias_add, reduce_bias, conv: fuse a relu");
  for (auto [flag, field, what] : {std::tuple{"--batch", &request.batch, "conv, pools: images"},
                                   {"--in-channels", &request.in_channels, "conv, pools: input channels"},
                                   {"--height", &request.height, "conv, pools: input field height"},
                                   {"--width", &request.width, "conv, pools: input field width"},
                                   {"--out-channels", &request.out_channels, "conv: output channels"},
                                   {"--stride", &request.stride, "conv, pools: stride (both axes)"},
                                   {"--dilation", &request.dilation, "conv, pools: dilation (both axes)"},
                                   {"--groups", &request.groups, "conv: channel groups (depthwise: the channels)"}})
    cycles->add_option(flag, *field, what)->check(CLI::Range(1u, 1u << 24));
  cycles->add_option("--pad", request.pad, "conv, pools: zero padding on every side")->check(CLI::Range(0u, 1u << 24));
  cycles->add_option("--kernel", request.kernel, "conv, pools: KHxKW, e.g. 3x3 (or 3)");
  return cycles;
}

namespace {

/// The unary function a `tessera cycles` name stands for (square: pow by 2).
std::optional<UnaryFunction> unary_of(const std::string& name) {
  for (std::uint32_t f = 0; f < kUnaryFunctionCount; ++f)
    if (name == unary_function_name(static_cast<UnaryFunction>(f))) return static_cast<UnaryFunction>(f);
  if (name == "square") return UnaryFunction::pow;
  return std::nullopt;
}

/// The row reduction of `reduce_sum`, `reduce_max`, ...
std::optional<ReduceFunction> reduce_of(const std::string& name) {
  for (std::uint32_t f = 0; f < kReduceFunctionCount; ++f)
    if (name == std::string("reduce_") + reduce_function_name(static_cast<ReduceFunction>(f)))
      return static_cast<ReduceFunction>(f);
  return std::nullopt;
}

std::vector<std::string> unary_names() {
  std::vector<std::string> names;
  for (std::uint32_t f = 0; f < kUnaryFunctionCount; ++f)
    names.push_back(unary_function_name(static_cast<UnaryFunction>(f)));
  return names;
}

std::vector<std::string> reduce_names() {
  std::vector<std::string> names;
  for (std::uint32_t f = 0; f < kReduceFunctionCount; ++f)
    names.push_back(std::string("reduce_") + reduce_function_name(static_cast<ReduceFunction>(f)));
  return names;
}

/// The binary function of `subtract`, `multiply_row`, `divide_column`, ...
std::optional<BinaryFunction> binary_of(const std::string& name) {
  const std::string base = name.ends_with("_row")      ? name.substr(0, name.size() - 4)
                           : name.ends_with("_column") ? name.substr(0, name.size() - 7)
                                                       : name;
  for (std::uint32_t f = 0; f < kBinaryFunctionCount; ++f)
    if (base == binary_function_name(static_cast<BinaryFunction>(f))) return static_cast<BinaryFunction>(f);
  return std::nullopt;
}

/// The value of a shape option the codelet needs, or an error naming the option.
std::uint32_t needed(std::uint32_t value, const char* option, const std::string& codelet) {
  if (value == 0) throw Error(fmt::format("tessera cycles {}: give {} (a positive count)", codelet, option));
  return value;
}

}  // namespace

/// conv, max_pool, avg_pool: a whole layer as the calls one tile would make for it, a call per
/// image (each image's field in one patch), with the charge of one call and of all of them.
int window_cycles(const CyclesRequest& request, const Target& target) {
  const std::string& name = request.codelet;
  if (request.m || request.k || request.n || request.count || request.rows || request.cols || request.parts)
    throw Error(
        fmt::format("tessera cycles {}: give the layer's --batch, --in-channels, --height, --width and "
                    "--kernel (not --m, --k, --n, --count, --rows, --cols or --parts)",
                    name));
  const bool conv = name == "conv";
  if (!conv && (request.out_channels || request.groups != 1 || request.relu))
    throw Error(fmt::format("tessera cycles {}: --out-channels, --groups and --relu apply to conv only", name));
  if (request.dtype != "f32")
    throw Error(fmt::format("tessera cycles {}: --dtype f16 does not apply yet (float32 convolutions)", name));
  Window w;
  w.height = needed(request.height, "--height", name);
  w.width = needed(request.width, "--width", name);
  const std::string& kernel = request.kernel;
  const std::size_t x = kernel.find('x');
  try {
    std::size_t used = 0;
    w.kernel_h = static_cast<std::uint32_t>(std::stoul(kernel.substr(0, x), &used));
    w.kernel_w = x == std::string::npos ? w.kernel_h : static_cast<std::uint32_t>(std::stoul(kernel.substr(x + 1)));
  } catch (const std::exception&) {
    throw Error(fmt::format("tessera cycles {}: --kernel '{}' must be KHxKW (e.g. 3x3) or K", name, kernel));
  }
  w.stride_h = w.stride_w = request.stride;
  w.dilation_h = w.dilation_w = request.dilation;
  w.pad_top = w.pad_left = w.pad_bottom = w.pad_right = request.pad;
  w.groups = request.groups;
  const std::uint32_t channels = needed(request.in_channels, "--in-channels", name);
  const std::uint32_t outs = conv ? needed(request.out_channels, "--out-channels", name) : channels;
  const std::uint32_t batch = needed(request.batch, "--batch", name);
  if (w.kernel_h == 0 || w.kernel_w == 0 || w.out_height() <= 0 || w.out_width() <= 0)
    throw Error(fmt::format("tessera cycles {}: a {}x{} kernel does not fit the {}x{} field padded by {}", name,
                            w.kernel_h, w.kernel_w, w.height, w.width, w.pad_top));
  if (conv && (channels % w.groups != 0 || outs % w.groups != 0))
    throw Error(fmt::format("tessera cycles conv: {} groups must divide {} input and {} output channels", w.groups,
                            channels, outs));
  const auto out_h = static_cast<std::uint32_t>(w.out_height()), out_w = static_cast<std::uint32_t>(w.out_width());
  // One call an image: all its output rows, over the rows they read.
  const std::vector<std::uint32_t> params =
      conv ? conv_call_params(w, 0, out_h, {channels, outs, channels / w.groups, outs / w.groups, 0},
                              request.relu ? kConvRelu : 0u)
           : pool_call_params(w, 0, out_h, channels, name == "max_pool" ? PoolMode::max : PoolMode::average);
  const Codelet codelet = conv ? Codelet::conv : Codelet::pool;
  const CodeletCharge charge = codelet_charge(codelet, params, target);
  fmt::print(
      "codelet={} target={} batch={} in_channels={} field={}x{}{} kernel={}x{} stride={} dilation={}{} pad={} "
      "out_field={}x{} path={}{} cycles_per_image={} cycles={} mac_floor={} load_floor={}\n",
      codelet_name(codelet), target.name, batch, channels, w.height, w.width,
      conv ? fmt::format(" out_channels={}", outs) : "", w.kernel_h, w.kernel_w, w.stride_h, w.dilation_h,
      conv ? fmt::format(" groups={}", w.groups) : "", w.pad_top, out_h, out_w, charge.path,
      charge.amp_passes ? fmt::format(" amp_passes={}", charge.amp_passes) : "", charge.cycles, charge.cycles * batch,
      charge.mac_floor * batch, charge.load_floor * batch);
  return 0;
}

int cycles_command(const CyclesRequest& request) {
  const Target target = load_target(request.target);
  if (request.codelet == "conv" || request.codelet == "max_pool" || request.codelet == "avg_pool")
    return window_cycles(request, target);
  if (request.batch || request.in_channels || request.height || request.width || request.out_channels ||
      !request.kernel.empty() || request.pad || request.stride != 1 || request.dilation != 1 || request.groups != 1)
    throw Error(
        fmt::format("tessera cycles {}: the layer options (--batch, --kernel, ...) apply to conv, max_pool "
                    "and avg_pool only",
                    request.codelet));
  const std::string& name = request.codelet;
  const bool half = request.dtype == "f16";
  Codelet codelet{};
  std::vector<std::uint32_t> params;
  std::string shape;
  if (name == "matmul" || name == "matmul_transposed") {
    codelet = half ? Codelet::matmul_half : name == "matmul" ? Codelet::matmul : Codelet::matmul_transposed;
    if (half && name == "matmul_transposed")
      throw Error("tessera cycles: half weights come as matmul --dtype f16 only");
    const std::uint32_t m = needed(request.m, "--m", name), k = needed(request.k, "--k", name),
                        n = needed(request.n, "--n", name);
    const MatmulOrientation orientation = request.orientation == "auto"
                                              ? faster_matmul_orientation(codelet, m, k, n, target)
                                          : request.orientation == "as_is" ? MatmulOrientation::as_is
                                                                           : MatmulOrientation::swapped;
    params = {m, k, n, static_cast<std::uint32_t>(orientation)};
    shape = fmt::format("m={} k={} n={} orientation={}", m, k, n,
                        orientation == MatmulOrientation::as_is ? "as_is" : "swapped");
  } else if (name == "relu" || name == "add" || name == "copy") {
    codelet = name == "relu" ? Codelet::relu : name == "add" ? Codelet::add : Codelet::copy;
    params = {needed(request.count, "--count", name)};
    shape = fmt::format("count={}", params[0]);
  } else if (name == "bias_add" || name == "softmax" || name == "layer_norm") {
    const std::uint32_t rows = needed(request.rows, "--rows", name), cols = needed(request.cols, "--cols", name);
    codelet = name == "softmax"      ? Codelet::softmax
              : name == "layer_norm" ? Codelet::layer_norm
              : half                 ? Codelet::bias_add_half
                                     : Codelet::bias_add;
    // softmax's scale and layer_norm's eps do not change the charge.
    const std::uint32_t third = name == "softmax"      ? float_param(1.0f)
                                : name == "layer_norm" ? float_param(1e-5f)
                                                       : request.relu;
    params = {rows, cols, third};
    shape = fmt::format("rows={} cols={}", rows, cols);
  } else if (name == "reduce_add") {
    params = {needed(request.parts, "--parts", name), needed(request.count, "--count", name)};
    codelet = Codelet::reduce_add;
    shape = fmt::format("parts={} count={}", params[0], params[1]);
  } else if (name == "reduce_bias") {
    const std::uint32_t cols = needed(request.cols, "--cols", name);
    params = {needed(request.parts, "--parts", name), needed(request.rows, "--rows", name), cols, cols, request.relu};
    codelet = Codelet::reduce_bias;
    shape = fmt::format("parts={} rows={} cols={}", params[0], params[1], cols);
  } else if (const auto unary = unary_of(name)) {
    codelet = Codelet::unary;
    // pow's charge depends only on whether the exponent is 2 (a square): 3 stands for any other.
    params = {needed(request.count, "--count", name), static_cast<std::uint32_t>(*unary),
              float_param(name == "square" ? 2.0f : 3.0f)};
    shape = fmt::format("count={} function={}", params[0], name);
  } else if (const auto binary = binary_of(name)) {
    const bool column = name.ends_with("_column"), row = name.ends_with("_row") || column;
    codelet = column ? Codelet::binary_column : row ? Codelet::binary_row : Codelet::binary;
    if (row)
      params = {needed(request.rows, "--rows", name), needed(request.cols, "--cols", name),
                static_cast<std::uint32_t>(*binary)};
    else params = {needed(request.count, "--count", name), static_cast<std::uint32_t>(*binary)};
    shape = row ? fmt::format("rows={} cols={} function={}", params[0], params[1], binary_function_name(*binary))
                : fmt::format("count={} function={}", params[0], binary_function_name(*binary));
  } else if (name == "transpose") {
    codelet = Codelet::transpose;
    params = {needed(request.rows, "--rows", name), needed(request.cols, "--cols", name)};
    shape = fmt::format("rows={} cols={}", params[0], params[1]);
  } else if (const auto reduce = reduce_of(name)) {
    codelet = Codelet::reduce_rows;
    params = {needed(request.rows, "--rows", name), needed(request.cols, "--cols", name),
              static_cast<std::uint32_t>(*reduce)};
    shape = fmt::format("rows={} cols={} function={}", params[0], params[1], reduce_function_name(*reduce));
  } else {
    throw Error(
        fmt::format("tessera cycles: unknown codelet '{}'; the codelets are matmul, matmul_transposed, relu, add, "
                    "copy, bias_add, softmax, layer_norm, reduce_add and reduce_bias (half weights: --dtype f16), "
                    "the unary functions ({}, square), subtract, multiply, divide, max, min and prelu "
                    "(and their _row and _column forms, add_row and add_column too), the row reductions ({}), "
                    "transpose, conv, max_pool and avg_pool",
                    name, fmt::join(unary_names(), ", "), fmt::join(reduce_names(), ", ")));
  }
  if (half && codelet != Codelet::matmul_half && codelet != Codelet::bias_add_half)
    throw Error(fmt::format("tessera cycles {}: --dtype f16 applies to matmul and bias_add only", name));
  // A shape option the codelet does not take is a mistake, not something to ignore.
  const bool counted = codelet == Codelet::relu || codelet == Codelet::add || codelet == Codelet::copy ||
                       codelet == Codelet::reduce_add || codelet == Codelet::unary || codelet == Codelet::binary;
  const bool matmul = is_matmul(codelet), rows_cols = !matmul && !counted;
  const bool parts = codelet == Codelet::reduce_add || codelet == Codelet::reduce_bias;
  const bool relu_taken =
      codelet == Codelet::bias_add || codelet == Codelet::bias_add_half || codelet == Codelet::reduce_bias;
  for (auto [given, taken, option] : {std::tuple{request.m != 0, matmul, "--m"},
                                      {request.k != 0, matmul, "--k"},
                                      {request.n != 0, matmul, "--n"},
                                      {request.count != 0, counted, "--count"},
                                      {request.rows != 0, rows_cols, "--rows"},
                                      {request.cols != 0, rows_cols, "--cols"},
                                      {request.parts != 0, parts, "--parts"},
                                      {request.relu, relu_taken, "--relu"},
                                      {request.orientation != "auto", matmul, "--orientation"}})
    if (given && !taken) throw Error(fmt::format("tessera cycles {}: {} does not apply to {}", name, option, name));
  const CodeletCharge charge = codelet_charge(codelet, params, target);
  // A swapped product leaves c^T: the transpose call after it is part of the product.
  std::string product;
  if (matmul && params[kMatmulOrientationParam] == static_cast<std::uint32_t>(MatmulOrientation::swapped)) {
    const std::uint64_t total = matmul_product_cycles(codelet, params, target);
    product = fmt::format(" output_transpose_cycles={} product_cycles={}", total - charge.cycles, total);
  }
  fmt::print("codelet={} target={} {}{} path={}{} cycles={} mac_floor={} load_floor={}{}\n", codelet_name(codelet),
             target.name, shape, relu_taken ? fmt::format(" relu={}", request.relu ? 1 : 0) : "", charge.path,
             charge.amp_passes ? fmt::format(" amp_passes={}", charge.amp_passes) : "", charge.cycles, charge.mac_floor,
             charge.load_floor, product);
  return 0;
}

}  // namespace tessera::cli
