// Host-side tensors for the host exchange streams: initial values and slice packing.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "tessera/graph.hpp"
#include "tessera/program.hpp"
#include "tessera/runtime/device.hpp"

namespace tessera {
struct Package;
struct PackageSlice;
}  // namespace tessera

namespace tessera::runtime {

/// Every tensor of `kind` (input or weight) with its values from tessera::initial_value,
/// row-major.
HostTensors initial_host_tensors(const Graph& graph, TensorKind kind);

/// Copies the block [row_begin..+rows, col_begin..+cols] of a row-major tensor with
/// `tensor_cols` columns into `destination`, packed row-major (rows * cols values), or
/// column-major when the slice is transposed.
void pack_slice(std::span<const float> tensor, std::uint32_t tensor_cols, const PackageSlice& slice,
                std::span<float> destination);
/// The inverse of pack_slice: writes the packed block back into the tensor.
void unpack_slice(std::span<const float> packed, std::uint32_t tensor_cols, const PackageSlice& slice,
                  std::span<float> tensor);

/// What one streaming host call moves.
struct HostCallSummary {
  std::uint64_t phases = 0;  ///< slices moved (each is one host transfer)
  std::uint64_t bytes = 0;
  /// The call over the host link: its bytes at the link's bandwidth plus the call's latency.
  std::uint64_t cycles(const Target& target) const;
};
/// The streams of `kinds` in the package, e.g. {weight} for initialize or {input, output}
/// for run.
HostCallSummary summarize_host_call(const Package& package, std::initializer_list<StreamKind> kinds);

}  // namespace tessera::runtime
