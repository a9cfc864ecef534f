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

/// Executes `graph` (matmul, add with row-vector broadcast, relu, dense) in float64.
/// Inputs and weights come from `values` (float32, widened to double: the same numbers
/// the device gets). Returns every tensor an op produces. Throws Error naming the op's
/// place in the model file on a missing value or a shape mismatch.
ReferenceValues execute_reference(const Graph& graph, const HostTensors& values);

/// Default tolerances of the numerical test. The simulator accumulates in float32
/// (unit roundoff 2^-24, about 6e-8); a dot product of k terms has a rounding error that
/// grows like sqrt(k) * 6e-8 * sum|terms| for random-sign data, about 4e-6 relative for
/// k = 4096, and a few layers compound it. 1e-4 relative to the largest reference value,
/// plus 1e-4 absolute for outputs near zero, is 25x above that yet far below any wrong
/// mapping, missing slice or misplaced word, which make errors of the order of the values.
inline constexpr double kDefaultAbsoluteTolerance = 1e-4;
inline constexpr double kDefaultRelativeTolerance = 1e-4;

struct NumericalReport {
  double max_abs_error = 0;      ///< over every element of every output
  double max_abs_reference = 0;  ///< largest |reference| over the outputs
  double tolerance = 0;          ///< atol + rtol * max_abs_reference
  bool passed = false;           ///< max_abs_error <= tolerance (and no NaN)
  std::string worst_tensor;      ///< where max_abs_error is reached
  std::uint64_t worst_index = 0;
  std::uint64_t elements = 0;    ///< elements compared
};

/// Compares the device's outputs with the reference over every graph output. A missing
/// output or one of the wrong size is an Error.
NumericalReport compare_with_reference(const Graph& graph, const HostTensors& outputs,
                                       const ReferenceValues& reference,
                                       double atol = kDefaultAbsoluteTolerance,
                                       double rtol = kDefaultRelativeTolerance);

}  // namespace tessera::runtime
