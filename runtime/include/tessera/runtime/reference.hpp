// The float64 reference executor of a model graph, and the numerical test against it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/graph.hpp"
#include "tessera/runtime/device.hpp"

namespace tessera::runtime {

/// Tensor values in float64, row-major, by name.
using ReferenceValues = std::map<std::string, std::vector<double>>;

/// Executes `graph` (matmul with optional transpose_b, add with row-vector broadcast,
/// relu, dense, softmax with scale, layer_norm) in float64.
/// Inputs and weights come from `values` (float32, widened to double: the same numbers
/// the device gets). Returns every tensor an op produces, or with `outputs_only` the graph's
/// outputs (each intermediate freed after its last reader: a deep model's would add up).
/// Throws Error naming the op's place in the model file on a missing value or a shape mismatch.
ReferenceValues execute_reference(const Graph& graph, const HostTensors& values, bool outputs_only = false);

/// Default tolerances of the numerical test. The simulator accumulates in float32
/// (unit roundoff 2^-24, about 6e-8); a dot product of k terms has a rounding error that
/// grows like sqrt(k) * 6e-8 * sum|terms| for random-sign data, about 4e-6 relative for
/// k = 4096, and a few layers compound it. 1e-4 relative to the largest reference value,
/// plus 1e-4 absolute for outputs near zero, is 25x above that yet far below any wrong
/// mapping, missing slice or misplaced word, which make errors of the order of the values.
inline constexpr double kDefaultAbsoluteTolerance = 1e-4;
inline constexpr double kDefaultRelativeTolerance = 1e-4;

/// float16. The reference computes with the weights' stored (rounded) float16 values, so
/// storage adds no error; what it cannot see is that a matmul with float16 weights rounds
/// its float32 left operand to float16 on load (the AMP multiplies half by half, see
/// codelets.cpp). Each rounding is x_i (1 + d_i), |d_i| <= u = 2^-11, about uniform and
/// independent, so an output y_j = sum_i x_i w_ij gets the error sum_i d_i x_i w_ij, of
/// standard deviation u / sqrt(3) * ||x o w_j||_2, i.e. u / sqrt(3) of y's own spread for
/// random-sign terms, whatever the reduction depth k (error and output both grow like
/// sqrt(k); the worst case u * sum_i |x_i w_ij| is sqrt(k) times larger and never seen
/// with independent roundings). L such matmuls on a path add their errors in quadrature,
/// so the relative tolerance gains kFloat16Deviations * u * sqrt(L): 8 standard deviations
/// of the largest single-layer error (about 0.8% for L = 4), 10 to 20 times what is
/// observed, while a corrupted or misplaced half (an exponent bit, a swapped pair, a wrong
/// offset) makes errors of the order of the values. Float32 accumulation stays covered by
/// the defaults above.
inline constexpr double kFloat16UnitRoundoff = 0x1.0p-11;
inline constexpr double kFloat16Deviations = 8.0;
/// The relative tolerance float16 matmuls add: kFloat16Deviations * u * sqrt(L), L the
/// number of matmul/dense ops whose right operand is float16 (0 for float32 models).
double float16_relative_tolerance(const Graph& graph);

struct NumericalReport {
  double max_abs_error = 0;      ///< over every element of every output
  double max_abs_reference = 0;  ///< largest |reference| over the outputs
  double tolerance = 0;          ///< atol + (rtol + float16 term) * max_abs_reference
  bool passed = false;           ///< max_abs_error <= tolerance (and no NaN)
  std::string worst_tensor;      ///< where max_abs_error is reached
  std::uint64_t worst_index = 0;
  std::uint64_t elements = 0;          ///< elements compared
  std::uint64_t inexact_integers = 0;  ///< int32 and bool elements that differ at all (they must be exact)
};

/// Compares the device's outputs with the reference over every graph output. A missing
/// output or one of the wrong size is an Error.
NumericalReport compare_with_reference(const Graph& graph, const HostTensors& outputs, const ReferenceValues& reference,
                                       double atol = kDefaultAbsoluteTolerance,
                                       double rtol = kDefaultRelativeTolerance);

/// ONNX's backend-test tolerances (numpy.testing.assert_allclose): an element passes when
/// |device - expected| <= atol + rtol * |expected|.
inline constexpr double kDefaultExpectAbsoluteTolerance = 1e-7;
inline constexpr double kDefaultExpectRelativeTolerance = 1e-3;

struct ExpectationReport {
  double max_abs_error = 0;      ///< over every element of every expected output
  double max_rel_error = 0;      ///< |device - expected| / |expected| over elements with expected != 0
  std::uint64_t mismatches = 0;  ///< elements outside atol + rtol * |expected| (or NaN on one side only)
  std::uint64_t elements = 0;
  std::string worst_tensor;  ///< where the first mismatch, or else max_abs_error, is
  std::uint64_t worst_index = 0;
  bool passed = false;
};

/// Compares each expected tensor with the device output of the same name, both as the device
/// holds them (int32 and bool tensors of `graph` as words, compared exactly). An expected
/// tensor that is no output, or of another size, is an Error naming it.
ExpectationReport compare_with_expected(const Graph& graph, const HostTensors& outputs, const HostTensors& expected,
                                        double atol, double rtol);

}  // namespace tessera::runtime
