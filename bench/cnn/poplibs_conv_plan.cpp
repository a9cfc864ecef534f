// bench-cnn's yardstick per conv layer: a poplibs-style estimate of the whole convolution on the
// chip, as poplin's planner (ConvPlan.cpp, ConvModel.cpp) costs a partition. It enumerates the
// parallel splits of the output field (rows, columns), the input channels, the output channels and
// the conv groups over the tiles; charges a partition's busiest tile with the vertex estimate of
// poplibs_reference::convolution (the transcribed poplin estimators) plus the exchange ConvModel's
// addExchangeCycleEstimates counts (inputs, weights, the first reduction stage's partials, at the
// exchange's bytes a cycle) and the reduction (addReduceCycleEstimate); and keeps the cheapest.
// It shares nothing with Tessera's planner: it includes no Tessera header.
//
//   stdin, a layer a line: NAME BATCH C H W M KH KW SH SW DH DW PAD_TOP PAD_LEFT PAD_BOTTOM PAD_RIGHT GROUPS
//   stdout, a line each:   NAME cycles=.. tiles=.. field=RxC in_split=.. out_split=.. group_split=.. vertex="..."
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "../fidelity/poplibs_reference.hpp"

namespace {

namespace ref = poplibs_reference;

// GC200 (IPU-M2000): 1,472 tiles; each tile sends and receives 4 bytes a cycle (poplar's
// Target::getExchangeBytesPerCycle), twice that for inputs shared by the two tiles of an exchange
// bus (ExchangeEstimator: an output-channel split that is a multiple of tilesPerSharedExchangeBus).
constexpr std::uint64_t kTiles = 1472, kExchangeBytesPerCycle = 4, kTilesPerSharedBus = 2, kFloatBytes = 4;

struct Layer {
  std::string name;
  std::uint64_t batch, c, h, w, m, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, groups;
};

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

std::uint64_t out_size(std::uint64_t in, std::uint64_t k, std::uint64_t s, std::uint64_t d, std::uint64_t pads) {
  const std::uint64_t span = (k - 1) * d + 1;
  return in + pads < span ? 0 : (in + pads - span) / s + 1;
}

/// The distinct part sizes ceil(size / parts) over every part count, with the fewest parts each.
std::vector<std::pair<std::uint64_t, std::uint64_t>> splits(std::uint64_t size) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> found;  // (parts, part size)
  for (std::uint64_t parts = 1; parts <= std::max<std::uint64_t>(size, 1); ++parts) {
    const std::uint64_t part = ceil_div(std::max<std::uint64_t>(size, 1), parts);
    if (found.empty() || found.back().second != part) found.push_back({parts, part});
  }
  return found;
}

struct Best {
  double cycles = -1;
  std::uint64_t tiles = 0, rows = 0, cols = 0, in_split = 0, out_split = 0, group_split = 0;
  std::string vertex;
};

Best plan(const Layer& l) {
  const std::uint64_t oh = out_size(l.h, l.kh, l.sh, l.dh, l.pt + l.pb);
  const std::uint64_t ow = out_size(l.w, l.kw, l.sw, l.dw, l.pl + l.pr);
  const std::uint64_t cg = l.c / l.groups, mg = l.m / l.groups;
  Best best;
  // Grains as poplin's: input channels in eights, output channels in sixteens (at least one).
  const auto in_splits = splits(ceil_div(cg, 8)), out_splits = splits(ceil_div(mg, 16));
  const auto group_splits = splits(l.groups), row_splits = splits(oh), col_splits = splits(ow);
  for (const auto& [gs, g_part] : group_splits)
    for (const auto& [is, i_grains] : in_splits)
      for (const auto& [os, o_grains] : out_splits) {
        const std::uint64_t shared = gs * is * os;
        if (shared > kTiles) continue;
        const std::uint64_t ci = std::min(cg, i_grains * 8), mo = std::min(mg, o_grains * 16);
        for (const auto& [rs, rows] : row_splits) {
          if (shared * rs > kTiles) break;
          for (const auto& [cs, cols] : col_splits) {
            const std::uint64_t tiles = shared * rs * cs;
            if (tiles > kTiles) break;
            // The busiest tile's input patch: its output rows' and columns' windows, padding only
            // where the whole field is one part (an interior part reads real pixels).
            const std::uint64_t in_rows = rs == 1 ? l.h : std::min(l.h, (rows - 1) * l.sh + (l.kh - 1) * l.dh + 1);
            const std::uint64_t in_cols = cs == 1 ? l.w : std::min(l.w, (cols - 1) * l.sw + (l.kw - 1) * l.dw + 1);
            ref::ConvShape tile;
            tile.batch = l.batch;
            tile.inChannels = ci * g_part;
            tile.height = in_rows;
            tile.width = in_cols;
            tile.outChannels = mo * g_part;
            tile.kernelH = l.kh;
            tile.kernelW = l.kw;
            tile.strideH = l.sh;
            tile.strideW = l.sw;
            tile.dilationH = l.dh;
            tile.dilationW = l.dw;
            if (rs == 1) tile.padTop = l.pt, tile.padBottom = l.pb;
            if (cs == 1) tile.padLeft = l.pl, tile.padRight = l.pr;
            tile.groups = g_part;
            const ref::Estimate compute = ref::convolution(tile);
            // addExchangeCycleEstimates: a 1/N share of inputs (N = output-channel parts) and of
            // weights (N = field parts) is already on the tile.
            const double inputs = double(in_rows * in_cols * l.batch * ci * g_part) * (1.0 - 1.0 / double(os));
            const double weights = double(l.kh * l.kw * ci * mo * g_part) * (1.0 - 1.0 / double(rs * cs));
            const double input_rate = double(kExchangeBytesPerCycle * (os % kTilesPerSharedBus == 0 ? 2 : 1));
            double cycles = compute.cycles + inputs * kFloatBytes / input_rate +
                            weights * kFloatBytes / double(kExchangeBytesPerCycle);
            if (is > 1) {
              // addReduceCycleEstimate: the partials of the tile's outputs cross the exchange once
              // and are summed over the input-channel parts, each part owning 1/is of them.
              const std::uint64_t partials = rows * cols * l.batch * mo * g_part;
              const std::uint64_t owned = ceil_div(partials, is);
              cycles +=
                  double(partials * kFloatBytes) / double(kExchangeBytesPerCycle) + ref::reduceParts(is, owned).cycles;
            }
            if (best.cycles < 0 || cycles < best.cycles) best = {cycles, tiles, rows, cols, is, os, gs, compute.vertex};
          }
        }
      }
  return best;
}

}  // namespace

int main() {
  for (std::string line; std::getline(std::cin, line);) {
    std::istringstream in(line);
    Layer l;
    if (!(in >> l.name >> l.batch >> l.c >> l.h >> l.w >> l.m >> l.kh >> l.kw >> l.sh >> l.sw >> l.dh >> l.dw >> l.pt >>
          l.pl >> l.pb >> l.pr >> l.groups) ||
        l.groups == 0 || l.c % l.groups != 0 || l.m % l.groups != 0 || l.sh == 0 || l.sw == 0 || l.kh == 0 ||
        l.kw == 0 || l.dh == 0 || l.dw == 0) {
      std::fprintf(stderr, "bench-cnn-poplibs: cannot read layer line '%s'\n", line.c_str());
      return 1;
    }
    const Best best = plan(l);
    std::printf(
        "%s cycles=%.0f tiles=%llu field=%llux%llu in_split=%llu out_split=%llu group_split=%llu vertex=\"%s\"\n",
        l.name.c_str(), best.cycles, static_cast<unsigned long long>(best.tiles),
        static_cast<unsigned long long>(best.rows), static_cast<unsigned long long>(best.cols),
        static_cast<unsigned long long>(best.in_split), static_cast<unsigned long long>(best.out_split),
        static_cast<unsigned long long>(best.group_split), best.vertex.c_str());
  }
  return 0;
}
