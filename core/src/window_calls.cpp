// Conv and pool call params: the patch a call's output rows read and the offsets its taps use.
#include "tessera/window_calls.hpp"

#include <algorithm>

namespace tessera {

std::pair<std::uint32_t, std::uint32_t> window_input_rows(const Window& w, std::uint32_t row_begin,
                                                          std::uint32_t row_end) {
  const std::int64_t top = std::int64_t{row_begin} * w.stride_h - w.pad_top;
  const std::int64_t bottom =
      std::int64_t{row_end - 1} * w.stride_h - w.pad_top + std::int64_t{w.kernel_h - 1} * w.dilation_h + 1;
  const std::int64_t low = std::clamp<std::int64_t>(top, 0, std::int64_t{w.height} - 1);
  const std::int64_t high = std::clamp<std::int64_t>(bottom, low + 1, w.height);
  return {static_cast<std::uint32_t>(low), static_cast<std::uint32_t>(high)};
}

namespace {

/// The patch row of output row 0's first tap, as the int32 bit pattern the codelets read (it is
/// negative when that tap lies in padding above the patch).
std::uint32_t patch_top(const Window& w, std::uint32_t row_begin, std::uint32_t low) {
  return static_cast<std::uint32_t>(
      static_cast<std::int32_t>(std::int64_t{low} - (std::int64_t{row_begin} * w.stride_h - w.pad_top)));
}

}  // namespace

std::vector<std::uint32_t> conv_call_params(const Window& w, std::uint32_t row_begin, std::uint32_t row_end,
                                            const WindowChannels& c, std::uint32_t flags) {
  const auto [low, high] = window_input_rows(w, row_begin, row_end);
  std::vector<std::uint32_t> params(kConvParams);
  params[kConvOutRows] = row_end - row_begin;
  params[kConvOutWidth] = static_cast<std::uint32_t>(w.out_width());
  params[kConvInRows] = high - low;
  params[kConvInWidth] = w.width;
  params[kConvInChannels] = c.patch;
  params[kConvOutChannels] = c.outs;
  params[kConvKernelH] = w.kernel_h;
  params[kConvKernelW] = w.kernel_w;
  params[kConvStrideH] = w.stride_h;
  params[kConvStrideW] = w.stride_w;
  params[kConvDilationH] = w.dilation_h;
  params[kConvDilationW] = w.dilation_w;
  params[kConvTop] = patch_top(w, row_begin, low);
  params[kConvLeft] = w.pad_left;
  params[kConvGroupInChannels] = c.group_in;
  params[kConvGroupOutChannels] = c.group_out;
  params[kConvFirstOutChannel] = c.first_out;
  params[kConvFlags] = flags;
  return params;
}

std::vector<std::uint32_t> pool_call_params(const Window& w, std::uint32_t row_begin, std::uint32_t row_end,
                                            std::uint32_t channels, PoolMode mode) {
  const auto [low, high] = window_input_rows(w, row_begin, row_end);
  std::vector<std::uint32_t> params(kPoolParams);
  params[kPoolOutRows] = row_end - row_begin;
  params[kPoolOutWidth] = static_cast<std::uint32_t>(w.out_width());
  params[kPoolInRows] = high - low;
  params[kPoolInWidth] = w.width;
  params[kPoolChannels] = channels;
  params[kPoolKernelH] = w.kernel_h;
  params[kPoolKernelW] = w.kernel_w;
  params[kPoolStrideH] = w.stride_h;
  params[kPoolStrideW] = w.stride_w;
  params[kPoolDilationH] = w.dilation_h;
  params[kPoolDilationW] = w.dilation_w;
  params[kPoolTop] = patch_top(w, row_begin, low);
  params[kPoolLeft] = w.pad_left;
  params[kPoolMode] = static_cast<std::uint32_t>(mode);
  return params;
}

}  // namespace tessera
