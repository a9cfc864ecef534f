// Host-side tensors for the host exchange streams: initial values and slice packing.
#include "tessera/runtime/host_exchange.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "memory.hpp"
#include "tessera/package.hpp"

namespace tessera::runtime {

HostTensors initial_host_tensors(const Graph& graph, TensorKind kind) {
  HostTensors tensors;
  for (const Tensor& tensor : graph.tensors) {
    if (tensor.kind != kind) continue;
    std::vector<float>& values = tensors[tensor.name];
    const auto count = static_cast<std::size_t>(tensor.elements());
    values.reserve(count);
    detail::advise_huge_pages(values.data(), count * sizeof(float));
    // Appended, not resized then assigned: zero-filling first would write every byte twice.
    for (std::size_t i = 0; i < count; ++i) values.push_back(initial_value(graph, tensor, i));
    // A float16 tensor's values are the ones it can hold: the device stores exactly these.
    if (tensor.dtype == DType::float16)
      for (float& value : values) value = round_to_half(value);
    // int32 tensors get small integers (the nearest to 16 times the value: -16..16 at scale 1),
    // bool ones true where the value is positive, both as the words the device holds.
    if (tensor.dtype == DType::int32)
      for (float& value : values) value = int_word(static_cast<std::int32_t>(std::lround(16.0f * value)));
    if (tensor.dtype == DType::boolean)
      for (float& value : values) value = int_word(value > 0 ? 1 : 0);
  }
  return tensors;
}

// Slices were checked against the tensor and the tile when the package was loaded.
void pack_slice(std::span<const float> tensor, std::uint32_t tensor_cols, const PackageSlice& slice,
                std::span<float> destination) {
  assert(destination.size() == static_cast<std::size_t>(slice.rows) * slice.cols);
  if (slice.transposed) {
    for (std::uint32_t r = 0; r < slice.rows; ++r) {
      const float* from = tensor.data() + static_cast<std::size_t>(slice.row_begin + r) * tensor_cols + slice.col_begin;
      for (std::uint32_t c = 0; c < slice.cols; ++c)
        destination[static_cast<std::size_t>(c) * slice.rows + r] = from[c];
    }
    return;
  }
  for (std::uint32_t r = 0; r < slice.rows; ++r) {
    const std::size_t from = static_cast<std::size_t>(slice.row_begin + r) * tensor_cols + slice.col_begin;
    assert(from + slice.cols <= tensor.size());
    std::copy_n(tensor.data() + from, slice.cols, destination.data() + static_cast<std::size_t>(r) * slice.cols);
  }
}

void unpack_slice(std::span<const float> packed, std::uint32_t tensor_cols, const PackageSlice& slice,
                  std::span<float> tensor) {
  assert(packed.size() == static_cast<std::size_t>(slice.rows) * slice.cols);
  for (std::uint32_t r = 0; r < slice.rows; ++r) {
    const std::size_t to = static_cast<std::size_t>(slice.row_begin + r) * tensor_cols + slice.col_begin;
    assert(to + slice.cols <= tensor.size());
    std::copy_n(packed.data() + static_cast<std::size_t>(r) * slice.cols, slice.cols, tensor.data() + to);
  }
}

std::uint64_t HostCallSummary::cycles(const Target& target) const {
  const std::uint64_t transfer =
      target.host_bytes_per_cycle <= 0
          ? 0
          : static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / target.host_bytes_per_cycle));
  return transfer + target.host_call_latency_cycles;
}

HostCallSummary summarize_host_call(const Package& package, std::initializer_list<StreamKind> kinds) {
  HostCallSummary summary;
  for (const PackageStream& stream : package.streams) {
    if (std::find(kinds.begin(), kinds.end(), stream.kind) == kinds.end()) continue;
    for (const PackageSlice& slice : stream.slices) {
      ++summary.phases;
      summary.bytes += packed_words(std::uint64_t{slice.rows} * slice.cols, stream.dtype) * sizeof(float);
    }
  }
  return summary;
}

}  // namespace tessera::runtime
