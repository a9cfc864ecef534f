// The feature table, the exchange features and the calibration table file.
#include "calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "tessera/codelets.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera::calibration {

namespace {

using Params = std::span<const std::uint32_t>;

// Elementwise work splits evenly over the worker threads, each walking its share in 64-bit
// vectors of two float32: the slowest worker's vectors set the length.
double worker_vectors(double count, const Target& target) {
  const double workers = std::max<std::uint32_t>(target.worker_threads, 1);
  return std::ceil(std::ceil(count / workers) / 2);
}

// A matmul runs on the AMP or on the workers, whichever is faster (docs/targets.md): the
// features of the path the machine model takes, zeros for the other, so one fit prices both.
// AMP: a call, its passes, the workers' cycles over all passes (a pipeline fill at least),
// output groups times field rows (zeroing), and the workers' operand preparation (b's
// transpose at the transpose codelet's charge, a's cast to half in fours). Workers: a call and the busiest worker's
// dot-product cycles.
Features matmul_features(Params p, const Target& t, Codelet codelet) {
  const bool half = codelet == Codelet::matmul_half;
  const bool swapped = p[3] == static_cast<std::uint32_t>(tessera::MatmulOrientation::swapped);
  const double m = p[0], k = p[1], n = p[2];
  const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
  const double in = half ? t.amp_fp16_input_channels : t.amp_fp32_input_channels;
  const double out = half ? t.amp_fp16_output_channels : t.amp_fp32_output_channels;
  const double macs = std::max<std::uint32_t>(half ? t.fp16_macs_per_cycle : t.fp32_macs_per_cycle, 1);
  const double outputs = swapped ? m : n;
  const double output_groups = std::ceil(outputs / out), passes = std::ceil(k / in) * output_groups;
  const double rows = std::ceil((swapped ? n : m) / workers);
  const double pass_worker = passes * std::max(half ? 25.0 : 46.0, (half ? 18 : 22) + in * out / macs * rows);
  const double zero_rows = half ? 0 : output_groups * rows;
  // b's transpose is the transpose codelet's charge for [k, n].
  const bool transpose = tessera::matmul_transposes_b(codelet, p[3]);
  const double transpose_cycles =
      transpose ? double(tessera::codelet_cycles(Codelet::transpose, std::vector<std::uint32_t>{p[1], p[2]}, t)) : 0;
  const double cast_fours = half ? std::ceil(std::ceil(m * k / workers) / 4) : 0;
  const double dot = double(tessera::matmul_worker_dot_cycles(codelet, p));
  const double worker_dots = std::ceil(m * n / workers) * (14 + dot);
  // Half inputs zero no rows; float inputs cast nothing.
  const double zero_or_cast = half ? cast_fours : zero_rows;
  const bool on_workers = std::string_view(tessera::codelet_charge(codelet, p, t).path) == "worker-mac";
  Features features = on_workers
                          ? Features{0, 0, 0, 0, half ? cast_fours : 0, 0, 1, worker_dots}
                          : Features{1, passes, pass_worker, output_groups, zero_or_cast, transpose_cycles, 0, 0};
  // matmul_half's b is stored as its orientation streams it: never transposed, no such feature.
  if (half) features.erase(features.begin() + 5);
  return features;
}

constexpr const char* kMatmulFeatureNames =
    "amp_call,amp_passes,amp_pass_worker_cycles,amp_output_groups,amp_zero_rows,transpose_cycles,worker_call,"
    "worker_dot_cycles";
constexpr const char* kHalfMatmulFeatureNames =
    "amp_call,amp_passes,amp_pass_worker_cycles,amp_output_groups,cast_fours,worker_call,worker_dot_cycles";

// Both orientations and both paths, all within ~200 KB of operands.
// Bias codelets (bias_add, bias_add_half): rows x columns of vectors, then a relu step (its
// own call and vectors) when fused.
constexpr const char* kBiasFeatureNames = "call,vectors,relu_call,relu_vectors";

Features bias_features(Params p, const Target& t) {
  const double vectors = worker_vectors(double(p[0]) * p[1], t);
  return {1, vectors, p[2] != 0 ? 1.0 : 0.0, p[2] != 0 ? vectors : 0.0};
}

const std::vector<std::vector<std::uint32_t>> kBiasShapes = {{1, 64, 0},  {2, 4096, 1}, {16, 256, 0},  {4, 1024, 1},
                                                             {8, 512, 1}, {2, 3000, 0}, {16, 1024, 0}, {1, 7, 1},
                                                             {1, 13, 0},  {3, 5000, 1}};

// Row codelets (softmax, layer_norm): steps over whole rows (a worker takes whole rows; a row
// costs a fixed fold or set-up plus per-vector work) and steps over the elements split evenly
// (softmax's exp, layer_norm's gamma and beta). Their third param is a float's bits.
constexpr const char* kRowFeatureNames = "call,row_steps,row_vector_steps,element_vectors";

Features row_features(Params p, const Target& t) {
  const double steps = std::ceil(double(p[0]) / std::max<std::uint32_t>(t.worker_threads, 1));
  return {1, steps, steps * std::ceil(p[1] / 2.0), worker_vectors(double(p[0]) * p[1], t)};
}

std::vector<std::vector<std::uint32_t>> row_shapes(std::uint32_t float_bits) {
  std::vector<std::vector<std::uint32_t>> shapes = {{1, 16}, {64, 64},  {6, 256},  {13, 100},
                                                    {32, 7}, {128, 32}, {2, 1024}, {40, 300}};
  for (auto& shape : shapes) shape.push_back(float_bits);
  return shapes;
}

const std::vector<std::vector<std::uint32_t>> kMatmulShapes = {
    {1, 16, 16, 0},   {2, 64, 32, 0},    {4, 128, 64, 0},  {8, 256, 16, 1}, {16, 64, 128, 0}, {2, 512, 64, 0},
    {1, 1024, 32, 0}, {16, 128, 128, 0}, {32, 256, 32, 1}, {4, 32, 512, 1}, {3, 100, 7, 1},   {2, 2048, 8, 1},
    {64, 64, 64, 0},  {2, 179, 128, 1},  {128, 64, 96, 0}, {1, 8, 1, 0},    {6, 256, 90, 1},  {2, 256, 90, 0}};

// A reduction's loops of four floats, split evenly over the workers: the slowest worker's count.
double worker_loops(double count, const Target& target) {
  const double workers = std::max<std::uint32_t>(target.worker_threads, 1);
  return std::ceil(std::ceil(count / 4) / workers);
}

// A conv call runs on the AMP or on the workers, whichever the machine model finds faster: the
// features of its path, zeros for the other (docs/targets.md, the conv codelet). AMP: a call, the
// supervisor's group loops, its kernel rows and passes (conv groups x input groups x output groups
// x kernel positions), the workers' cycles over the passes, the partials' zeroing vectors.
// Workers: a call, the conv groups and their busiest worker's cycles. Then the bias and relu
// steps, as bias_add's.
Features conv_features(Params p, const Target& t) {
  using namespace tessera;
  const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
  const double out_rows = p[kConvOutRows], pixels = out_rows * p[kConvOutWidth], outs = p[kConvOutChannels];
  const double group_out = std::max<std::uint32_t>(p[kConvGroupOutChannels], 1);
  const double groups = outs == 0 ? 0 : std::floor((outs - 1 + p[kConvFirstOutChannel]) / group_out) + 1;
  const double per_group = std::min(outs, group_out), positions = double(p[kConvKernelH]) * p[kConvKernelW];
  const double in_groups = std::ceil(p[kConvGroupInChannels] / double(t.amp_fp32_input_channels));
  const double out_groups = std::ceil(per_group / t.amp_fp32_output_channels);
  const double group_loops = groups * (16 + in_groups * (14 + out_groups * 14));
  const double kernel_rows = groups * in_groups * out_groups * p[kConvKernelH];
  const double passes = kernel_rows * p[kConvKernelW];
  const double entries = std::max(1.0, std::ceil(out_rows / workers)), share = std::ceil(pixels / workers);
  const double core = double(t.amp_fp32_input_channels) * t.amp_fp32_output_channels /
                      std::max<std::uint32_t>(t.fp32_macs_per_cycle, 1);
  const double pass_worker = passes * (19 + 45 * entries + std::max(0.0, share - 3 * entries) * core);
  const double zero_vectors = std::ceil(std::ceil(pixels * outs / workers) / 2);
  const double hmac =
      groups * (16 + positions * (20 * entries + share * per_group * (std::ceil(p[kConvGroupInChannels] / 2.0) + 2)));
  const bool epilogue = (p[kConvFlags] & (kConvHasBias | kConvRelu)) != 0, relu = (p[kConvFlags] & kConvRelu) != 0;
  const double vectors = worker_vectors(pixels * outs, t);
  const std::string_view path = tessera::codelet_charge(Codelet::conv, p, t).path;
  Features features =
      path == "worker-mac" ? Features{0, 0, 0, 0, 0, 0, 1, groups, hmac, 0, 0, 0, 0}
      : path == "amp" ? Features{1, group_loops, kernel_rows, passes, pass_worker, zero_vectors, 0, 0, 0, 0, 0, 0, 0}
                      : Features{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
  if (path == "vertical-mac") {  // depthwise: items of output rows x kernel positions, then the workers' sums
    const double items = std::ceil(out_rows * positions / workers);
    features[10] = items;
    features[11] = items * p[kConvOutWidth] * std::ceil(groups * per_group / 2);
    features[12] = std::ceil(pixels * outs / 4);
  }
  for (double f : {epilogue ? 1.0 : 0.0, epilogue ? vectors : 0.0, relu ? 1.0 : 0.0, relu ? vectors : 0.0})
    features.push_back(f);
  return features;
}

// The feature table: one line per codelet. A new codelet needs its line here (calibrate
// refuses to run without one); keep each microbenchmark call under ~200 KB of operands.
const CodeletLine kCodeletLines[] = {
    {Codelet::matmul, kMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul); }, kMatmulShapes},
    // Reductions walk loops of four floats split over the workers, each loop a load of every part.
    {Codelet::reduce_add,
     "call,loops,part_loops",
     [](Params p, const Target& t) -> Features {
       const double loops = worker_loops(p[1], t);
       return {1, loops, p[0] * loops};
     },
     {{2, 64}, {4, 1000}, {8, 512}, {16, 300}, {3, 4096}, {2, 8000}, {12, 2048}, {23, 1024}, {1, 7}, {5, 9000}}},
    {Codelet::bias_add, kBiasFeatureNames, bias_features, kBiasShapes},
    {Codelet::relu,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {4096}, {12000}, {30000}}},
    {Codelet::add,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {4096}, {12000}, {16000}}},
    {Codelet::copy,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1}, {7}, {64}, {333}, {1000}, {4096}, {12000}, {24000}}},
    // Rows are walked separately (the own partial is strided), so each row rounds up to loops;
    // then the bias step and the relu step, as bias_add's.
    {Codelet::reduce_bias,
     "call,loops,part_loops,bias_vectors,relu_call,relu_vectors",
     [](Params p, const Target& t) -> Features {
       const double loops = worker_loops(double(p[1]) * std::ceil(p[2] / 4.0) * 4, t);
       const double vectors = worker_vectors(double(p[1]) * p[2], t);
       return {1, loops, p[0] * loops, vectors, p[4] != 0 ? 1.0 : 0.0, p[4] != 0 ? vectors : 0.0};
     },
     {{2, 2, 3, 64, 1},
      {22, 2, 3, 64, 1},
      {4, 16, 64, 64, 0},
      {8, 8, 100, 120, 1},
      {3, 4, 513, 600, 0},
      {16, 2, 256, 256, 1},
      {1, 1, 7, 7, 0},
      {23, 2, 178, 178, 1},
      {5, 16, 200, 200, 0},
      {10, 3, 50, 64, 1}}},
    {Codelet::matmul_transposed, kMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul_transposed); },
     kMatmulShapes},
    {Codelet::matmul_half, kHalfMatmulFeatureNames,
     [](Params p, const Target& t) -> Features { return matmul_features(p, t, Codelet::matmul_half); }, kMatmulShapes},
    {Codelet::bias_add_half, kBiasFeatureNames, bias_features, kBiasShapes},
    // A transpose walks 2x2 grains, the rows split over the workers: a fixed cost by case (one
    // grain, one column of grains, wider), then per row of grains, and per grain when wider.
    {Codelet::transpose,
     "single_grain,narrow,wide,narrow_row_grains,wide_row_grains,wide_grains",
     [](Params p, const Target& t) -> Features {
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
       const double row_grains = std::ceil(std::ceil(p[0] / workers) / 2), col_grains = std::ceil(p[1] / 2.0);
       const bool wide = col_grains > 1, narrow = !wide && row_grains > 1;
       return {!wide && !narrow ? 1.0 : 0.0, narrow ? 1.0 : 0.0,      wide ? 1.0 : 0.0,
               narrow ? row_grains : 0.0,    wide ? row_grains : 0.0, wide ? row_grains * col_grains : 0.0};
     },
     {{1, 1},
      {2, 1},
      {16, 2},
      {128, 1},
      {1024, 2},
      {2, 16},
      {64, 8},
      {256, 16},
      {33, 7},
      {256, 64},
      {90, 6},
      {1024, 16}}},
    {Codelet::softmax, kRowFeatureNames, row_features, row_shapes(0x3e000000)},     // scale 0.125
    {Codelet::layer_norm, kRowFeatureNames, row_features, row_shapes(0x3727c5ac)},  // eps 1e-5
    // Functions (unary, binary, binary_row): the slowest worker's vectors times the function's
    // cycles a vector (tessera::function_cycles_per_vector). Unary's third param is the
    // exponent's bits (2.0 squares, 1.5 takes the general power).
    {Codelet::unary,
     "call,function_cycles",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t) * double(tessera::function_cycles_per_vector(Codelet::unary, p))};
     },
     {{1, 0, 0},
      {64, 0, 0},
      {1000, 1, 0},
      {4096, 2, 0},
      {333, 3, 0},
      {2000, 4, 0x40000000},
      {700, 4, 0x3fc00000},
      {12000, 1, 0},
      {7, 2, 0},
      {5000, 3, 0}}},
    {Codelet::binary,
     "call,function_cycles",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t) * double(tessera::function_cycles_per_vector(Codelet::binary, p))};
     },
     {{1, 0}, {7, 1}, {64, 2}, {333, 0}, {1000, 1}, {4096, 2}, {12000, 0}, {16000, 1}, {9000, 2}}},
    {Codelet::binary_row,
     "call,function_cycles",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(double(p[0]) * p[1], t) *
                      double(tessera::function_cycles_per_vector(Codelet::binary_row, p))};
     },
     {{1, 64, 0},
      {2, 4096, 1},
      {16, 256, 2},
      {4, 1024, 0},
      {8, 512, 1},
      {2, 3000, 2},
      {16, 1024, 1},
      {1, 7, 0},
      {1, 13, 2},
      {3, 5000, 1}}},
    {Codelet::reduce_rows,
     "call,row_steps,row_vector_steps,mean_steps",
     [](Params p, const Target& t) -> Features {
       const double steps = std::ceil(double(p[0]) / std::max<std::uint32_t>(t.worker_threads, 1));
       return {1, steps, steps * std::ceil(p[1] / 2.0), p[2] != 0 ? steps : 0.0};
     },
     {{1, 16, 0},
      {64, 64, 1},
      {6, 256, 0},
      {13, 100, 1},
      {32, 7, 0},
      {128, 32, 1},
      {2, 1024, 0},
      {40, 300, 1},
      {300, 12, 0},
      {90, 90, 1}}},
    // A row step: per row a scalar's set-up, per vector the function's cycles.
    {Codelet::binary_column,
     "call,row_steps,row_function_cycles",
     [](Params p, const Target& t) -> Features {
       const double steps = std::ceil(double(p[0]) / std::max<std::uint32_t>(t.worker_threads, 1));
       return {1, steps,
               steps * std::ceil(p[1] / 2.0) * double(tessera::function_cycles_per_vector(Codelet::binary_column, p))};
     },
     {{1, 16, 0},
      {64, 64, 1},
      {6, 256, 2},
      {13, 100, 3},
      {32, 7, 0},
      {128, 32, 2},
      {2, 1024, 1},
      {40, 300, 2},
      {300, 12, 3},
      {90, 90, 0}}},
    {Codelet::conv,
     "amp_call,amp_group_loops,amp_kernel_rows,amp_passes,amp_pass_worker_cycles,amp_zero_vectors,worker_call,"
     "worker_groups,worker_cycles,vertical_call,vertical_items,vertical_item_vectors,vertical_reduce_fours,"
     "epilogue_call,epilogue_vectors,relu_call,relu_vectors",
     conv_features,
     {{4, 8, 6, 8, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16, 16, 0, 3},
      {2, 14, 2, 14, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 64, 64, 0, 2},
      {7, 7, 7, 7, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 3},
      {3, 16, 7, 32, 3, 16, 3, 3, 2, 2, 1, 1, 1, 1, 3, 16, 0, 3},
      {1, 4, 1, 4, 128, 256, 1, 1, 1, 1, 1, 1, 0, 0, 128, 256, 0, 0},
      {8, 8, 10, 10, 8, 24, 3, 3, 1, 1, 1, 1, 0, 0, 8, 24, 0, 1},
      {5, 5, 11, 11, 3, 8, 7, 7, 2, 2, 1, 1, 3, 3, 3, 8, 0, 3},
      {6, 6, 10, 10, 16, 16, 3, 3, 1, 1, 2, 2, 0, 0, 16, 16, 0, 2},
      {4, 10, 4, 10, 32, 8, 1, 1, 1, 1, 1, 1, 0, 0, 4, 2, 1, 0},
      {2, 56, 4, 56, 64, 64, 3, 3, 1, 1, 1, 1, 1, 1, 64, 64, 0, 3},
      {14, 14, 14, 14, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2},
      {1, 7, 3, 7, 96, 24, 3, 3, 1, 1, 1, 1, 1, 1, 96, 24, 0, 1},
      {2, 3, 4, 7, 24, 8, 3, 3, 2, 2, 1, 1, 0, 0, 3, 1, 0, 3},
      {12, 12, 12, 12, 40, 40, 1, 1, 1, 1, 1, 1, 0, 0, 40, 40, 0, 3},
      {1, 1, 3, 3, 128, 32, 3, 3, 1, 1, 1, 1, 1, 1, 128, 32, 0, 2},
      {2, 2, 2, 2, 256, 128, 1, 1, 1, 1, 1, 1, 0, 0, 256, 128, 0, 1},
      {16, 16, 18, 18, 3, 4, 3, 3, 1, 1, 1, 1, 1, 1, 3, 4, 0, 0},
      {5, 9, 5, 9, 24, 24, 5, 5, 1, 1, 1, 1, 2, 2, 1, 1, 0, 3},
      {3, 3, 7, 7, 12, 48, 3, 3, 2, 2, 1, 1, 0, 0, 12, 48, 0, 2},
      {1, 28, 3, 28, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 32, 16, 0, 0},
      {6, 1, 6, 1, 64, 32, 1, 1, 1, 1, 1, 1, 0, 0, 64, 32, 0, 3},
      {7, 7, 7, 7, 64, 64, 1, 1, 1, 1, 1, 1, 0, 0, 8, 8, 0, 1},
      {4, 4, 8, 8, 8, 6, 2, 2, 2, 2, 1, 1, 0, 0, 2, 2, 1, 2},
      {10, 10, 12, 12, 20, 10, 3, 3, 1, 1, 1, 1, 1, 1, 20, 10, 0, 3},
      {2, 28, 4, 28, 48, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1},
      {7, 7, 15, 15, 96, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 3},
      {1, 56, 3, 56, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0, 2},
      {4, 14, 8, 28, 144, 144, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 0, 0},
      {3, 3, 7, 7, 64, 64, 5, 5, 1, 1, 1, 1, 2, 2, 1, 1, 0, 3}}},
    {Codelet::clip,
     "call,vectors",
     [](Params p, const Target& t) -> Features {
       return {1, worker_vectors(p[0], t)};
     },
     {{1, 0, 0x40c00000}, {7, 0, 0x40c00000}, {64, 0xbf800000, 0x3f800000}, {333, 0, 0x40c00000}, {1000, 0, 0x40c00000},
      {4096, 0xff800000, 0}, {12000, 0, 0x40c00000}, {16000, 0, 0x7f800000}}},
    // Pooling: per kernel position, the busiest worker's worklist rows and its share of the
    // output vectors (an average scales each once more).
    {Codelet::pool,
     "call,row_loops,vectors,average_vectors",
     [](Params p, const Target& t) -> Features {
       using namespace tessera;
       const double workers = std::max<std::uint32_t>(t.worker_threads, 1);
       const double positions = double(p[kPoolKernelH]) * p[kPoolKernelW];
       const double rows = std::max(1.0, std::ceil(p[kPoolOutRows] / workers));
       const double share = std::ceil(double(p[kPoolOutRows]) * p[kPoolOutWidth] * std::ceil(p[kPoolChannels] / 2.0) / workers);
       return {1, positions * rows, positions * share, p[kPoolMode] != 0 ? share : 0.0};
     },
     {{2, 4, 5, 8, 16, 3, 3, 2, 2, 1, 1, 1, 1, 0},
      {1, 1, 7, 7, 64, 7, 7, 1, 1, 1, 1, 0, 0, 1},
      {4, 4, 8, 8, 32, 2, 2, 2, 2, 1, 1, 0, 0, 0},
      {3, 7, 9, 14, 8, 3, 3, 2, 2, 1, 1, 1, 1, 2},
      {1, 1, 1, 1, 512, 1, 1, 1, 1, 1, 1, 0, 0, 1},
      {8, 8, 8, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 0},
      {2, 28, 5, 56, 24, 3, 3, 2, 2, 1, 1, 1, 1, 0},
      {1, 1, 2, 2, 256, 2, 2, 1, 1, 1, 1, 0, 0, 1},
      {6, 6, 13, 13, 12, 3, 3, 2, 2, 1, 1, 1, 1, 2},
      {14, 14, 14, 14, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1}}},
};

[[noreturn]] void fail(const std::string& file, const YAML::Node& node, const std::string& message) {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) throw Error(file + ": " + message);
  throw Error(fmt::format("{}:{}:{}: {}", file, mark.line + 1, mark.column + 1, message));
}

YAML::Node required(const std::string& file, const YAML::Node& map, const char* key) {
  if (!map.IsMap()) fail(file, map, "expected a mapping");
  YAML::Node node = map[key];
  if (!node.IsDefined()) fail(file, map, fmt::format("missing key '{}'", key));
  return node;
}

template <typename T>
T scalar(const std::string& file, const YAML::Node& map, const char* key) {
  const YAML::Node node = required(file, map, key);
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail(file, node, fmt::format("'{}' has the wrong type", key));
  }
}

Formula read_formula(const std::string& file, const YAML::Node& node) {
  Formula formula;
  const YAML::Node features = required(file, node, "features");
  const YAML::Node coefficients = required(file, node, "coefficients");
  if (!features.IsSequence() || !coefficients.IsSequence() || features.size() != coefficients.size() ||
      features.size() == 0)
    fail(file, node, "'features' and 'coefficients' must be lists of the same, non-zero length");
  for (std::size_t i = 0; i < features.size(); ++i) {
    formula.features.push_back(features[i].as<std::string>());
    try {
      formula.coefficients.push_back(coefficients[i].as<double>());
    } catch (const YAML::Exception&) {
      fail(file, coefficients[i], "a coefficient must be a number");
    }
    if (!std::isfinite(formula.coefficients.back())) fail(file, coefficients[i], "a coefficient must be finite");
  }
  formula.samples = scalar<std::uint64_t>(file, node, "samples");
  formula.max_relative_error = scalar<double>(file, node, "max_relative_error");
  return formula;
}

void emit_formula(YAML::Emitter& out, const Formula& formula) {
  out << YAML::BeginMap;
  out << YAML::Key << "features" << YAML::Value << YAML::Flow << formula.features;
  out << YAML::Key << "coefficients" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (double c : formula.coefficients) out << fmt::format("{:.9g}", c);
  out << YAML::EndSeq;
  out << YAML::Key << "samples" << YAML::Value << formula.samples;
  out << YAML::Key << "max_relative_error" << YAML::Value << fmt::format("{:.6f}", formula.max_relative_error);
  out << YAML::EndMap;
}

}  // namespace

const CodeletLine* codelet_line(Codelet codelet) {
  for (const CodeletLine& line : kCodeletLines)
    if (line.codelet == codelet) return &line;
  return nullptr;
}

const char* exchange_feature_names() { return "phase,lower_bound"; }

Features exchange_features(const ExchangePhase& phase, const Target& target) {
  return {1, double(lower_bound(phase, target))};
}

double Formula::cycles(const Features& values) const {
  double sum = 0;
  for (std::size_t i = 0; i < coefficients.size() && i < values.size(); ++i) sum += coefficients[i] * values[i];
  return sum;
}

std::vector<std::string> split_names(const char* names) {
  std::vector<std::string> out;
  std::string current;
  for (const char* c = names; *c; ++c) {
    if (*c == ',') {
      out.push_back(current);
      current.clear();
    } else {
      current += *c;
    }
  }
  out.push_back(current);
  return out;
}

std::string table_yaml(const Table& table) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "calibration_table" << YAML::Value << kTableFormatVersion;
  out << YAML::Key << "target" << YAML::Value << table.target;
  out << YAML::Key << "target_hash" << YAML::Value << fmt::format("{:016x}", table.target_hash);
  out << YAML::Key << "codelet_set_version" << YAML::Value << table.codelet_set_version;
  out << YAML::Key << "scheduler" << YAML::Value << table.scheduler;
  out << YAML::Key << "codelets" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, formula] : table.codelets) {
    out << YAML::Key << name << YAML::Value;
    emit_formula(out, formula);
  }
  out << YAML::EndMap;
  out << YAML::Key << "exchange" << YAML::Value;
  emit_formula(out, table.exchange);
  out << YAML::Key << "barrier_cycles" << YAML::Value << fmt::format("{:.9g}", table.barrier_cycles);
  out << YAML::EndMap;
  return std::string(
             "# Calibrated cost-model table: cycles = coefficients . features, fitted by `tessera calibrate`\n"
             "# on simulator microbenchmarks. Generated; do not edit (re-run the command instead).\n") +
         out.c_str() + "\n";
}

Table read_table(const std::string& path, const std::string& make_command) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(fmt::format("calibration table {} not found; make it with `{}`", path, make_command));
  YAML::Node root;
  try {
    root = YAML::Load(read_yaml_text(path, "a calibration table"));  // bounded size and aliases
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}:{}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  if (!root.IsMap()) fail(path, root, "a calibration table must be a mapping (written by `tessera calibrate`)");
  const auto version = scalar<std::uint32_t>(path, root, "calibration_table");
  if (version != kTableFormatVersion)
    fail(path, root["calibration_table"],
         fmt::format("table format {} is not the {} this build reads; re-run `{}`", version, kTableFormatVersion,
                     make_command));
  Table table;
  table.file = path;
  table.target = scalar<std::string>(path, root, "target");
  const std::string hash = scalar<std::string>(path, root, "target_hash");
  try {
    std::size_t used = 0;
    table.target_hash = std::stoull(hash, &used, 16);
    if (used != hash.size()) throw std::invalid_argument(hash);
  } catch (const std::exception&) {
    fail(path, root["target_hash"], "'target_hash' must be 16 hex digits");
  }
  table.codelet_set_version = scalar<std::uint32_t>(path, root, "codelet_set_version");
  table.scheduler = scalar<std::string>(path, root, "scheduler");
  const YAML::Node codelets = required(path, root, "codelets");
  if (!codelets.IsMap()) fail(path, codelets, "'codelets' must map codelet names to formulas");
  for (const auto& entry : codelets) table.codelets[entry.first.as<std::string>()] = read_formula(path, entry.second);
  table.exchange = read_formula(path, required(path, root, "exchange"));
  table.barrier_cycles = scalar<double>(path, root, "barrier_cycles");
  return table;
}

}  // namespace tessera::calibration
