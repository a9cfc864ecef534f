// The params of a conv or pool call for output rows of one image, as the codelets read them.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/graph.hpp"

namespace tessera {

/// The input rows [first, last) of an image that output rows [row_begin, row_end) of `window`
/// read, clipped to the image (at least one row): a call's patch, at the image's full width.
std::pair<std::uint32_t, std::uint32_t> window_input_rows(const Window& window, std::uint32_t row_begin,
                                                          std::uint32_t row_end);

/// A conv call's channels: the patch's, the outputs, the channels of a group on either side, and
/// where the first output falls in its group.
struct WindowChannels {
  std::uint32_t patch = 0, outs = 0, group_in = 1, group_out = 1, first_out = 0;
};

/// conv params (ConvParam) for output rows [row_begin, row_end) of one image over the patch of
/// window_input_rows; `flags` is kConvRelu | kConvHasBias.
std::vector<std::uint32_t> conv_call_params(const Window& window, std::uint32_t row_begin, std::uint32_t row_end,
                                            const WindowChannels& channels, std::uint32_t flags);
/// pool params (PoolParam) for output rows [row_begin, row_end) of one image, likewise.
std::vector<std::uint32_t> pool_call_params(const Window& window, std::uint32_t row_begin, std::uint32_t row_end,
                                            std::uint32_t channels, PoolMode mode);

}  // namespace tessera
