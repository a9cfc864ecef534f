// place-storage: gives every buffer a byte offset in its tile's region; buffers never live together share bytes.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/pass.hpp"

namespace {

using tessera::Buffer;
using tessera::Region;
using tessera::Status;

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return alignment <= 1 ? value : (value + alignment - 1) / alignment * alignment;
}

/// Where one region lies in tile memory: [low, high).
struct RegionBounds {
  std::uint64_t low = 0, high = 0;
};

/// What placing one tile found: per-region high-water marks (bytes used from the region's
/// start, gaps included) and each buffer's offset.
struct TilePlacement {
  std::uint64_t standard_used = 0, interleaved_used = 0;
  std::uint64_t standard_over = 0, interleaved_over = 0;
  std::uint64_t over() const { return standard_over + interleaved_over; }
};

/// Interval-graph first fit: largest buffers first, each at the lowest aligned offset in
/// its region that overlaps no placed buffer whose live range meets its own. Offsets may
/// run past the region's end; the caller reports that as the tile being over.
class TilePlacer {
public:
  TilePlacer(const std::vector<Buffer>& buffers, std::vector<std::int64_t>& offsets)
      : buffers_(buffers), offsets_(offsets) {}

  /// Places `members` (indices of buffers of one tile and one region); returns the end of
  /// the highest one.
  std::uint64_t place(std::vector<std::uint32_t>& members, RegionBounds bounds) {
    std::sort(members.begin(), members.end(), [&](std::uint32_t a, std::uint32_t b) {
      const Buffer &x = buffers_[a], &y = buffers_[b];
      if (x.bytes != y.bytes) return x.bytes > y.bytes;
      if (x.first_use != y.first_use) return x.first_use < y.first_use;
      return a < b;
    });
    placed_.clear();
    std::uint64_t end = bounds.low;
    for (std::uint32_t index : members) {
      const Buffer& buffer = buffers_[index];
      conflicts_.clear();
      for (const Placed& other : placed_)
        if (other.first_use <= buffer.last_use && buffer.first_use <= other.last_use) conflicts_.push_back(other);
      std::sort(conflicts_.begin(), conflicts_.end(), [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
      const std::uint64_t alignment = std::max<std::uint32_t>(buffer.alignment, 1);
      std::uint64_t offset = align_up(bounds.low, alignment);
      for (const Placed& other : conflicts_) {
        if (offset + buffer.bytes <= other.begin) break;
        offset = std::max(offset, align_up(other.end, alignment));
      }
      offsets_[index] = static_cast<std::int64_t>(offset);
      placed_.push_back({offset, offset + buffer.bytes, buffer.first_use, buffer.last_use});
      end = std::max(end, offset + buffer.bytes);
    }
    return end;
  }

private:
  struct Placed {
    std::uint64_t begin, end;
    std::uint32_t first_use, last_use;
  };
  const std::vector<Buffer>& buffers_;
  std::vector<std::int64_t>& offsets_;
  std::vector<Placed> placed_, conflicts_;
};

class PlaceStorage final : public tessera::Pass {
protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    const tessera::Target& target = context.target;
    std::vector<Buffer>& buffers = state.program.buffers;
    const RegionBounds standard{0, target.interleaved_start};
    const RegionBounds interleaved{target.interleaved_start, target.memory_bytes};

    // Buffers by tile and region, in index order.
    std::vector<std::vector<std::uint32_t>> by_tile(std::size_t{target.tiles} * 2);
    for (std::uint32_t i = 0; i < buffers.size(); ++i) {
      if (buffers[i].tile >= target.tiles)
        return Status::failure(fmt::format("buffer '{}' is on tile {} but target '{}' has {} tiles",
                                           buffers[i].name, buffers[i].tile, target.name, target.tiles));
      by_tile[std::size_t{buffers[i].tile} * 2 + (buffers[i].region == Region::interleaved)].push_back(i);
    }

    std::vector<std::int64_t> offsets(buffers.size(), tessera::kUnplaced);
    std::vector<TilePlacement> tiles(target.tiles);
    TilePlacer placer(buffers, offsets);
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
      TilePlacement& placement = tiles[tile];
      const std::uint64_t standard_end = placer.place(by_tile[std::size_t{tile} * 2], standard);
      const std::uint64_t interleaved_end = placer.place(by_tile[std::size_t{tile} * 2 + 1], interleaved);
      placement.standard_used = standard_end - standard.low;
      placement.interleaved_used = interleaved_end - interleaved.low;
      placement.standard_over = standard_end > standard.high ? standard_end - standard.high : 0;
      placement.interleaved_over = interleaved_end > interleaved.high ? interleaved_end - interleaved.high : 0;
    }

    std::vector<std::uint32_t> over;
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile)
      if (tiles[tile].over() > 0) over.push_back(tile);
    if (!over.empty()) return does_not_fit(state, target, tiles, over, by_tile);

    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].offset = offsets[i];
    std::uint64_t peak_standard = 0, peak_interleaved = 0, peak_total = 0, sum = 0;
    std::uint32_t used_tiles = 0;
    for (const TilePlacement& placement : tiles) {
      const std::uint64_t total = placement.standard_used + placement.interleaved_used;
      peak_standard = std::max(peak_standard, placement.standard_used);
      peak_interleaved = std::max(peak_interleaved, placement.interleaved_used);
      peak_total = std::max(peak_total, total);
      sum += total;
      used_tiles += total > 0;
    }
    state.estimates.peak_tile_bytes = peak_total;
    context.info("placed storage tiles={} used_tiles={} buffers={} peak_standard_bytes={} peak_interleaved_bytes={} "
                 "peak_total_bytes={} mean_tile_bytes={}",
                 target.tiles, used_tiles, buffers.size(), peak_standard, peak_interleaved, peak_total,
                 target.tiles ? sum / target.tiles : 0);
    return Status::success();
  }

private:
  /// Every tile over, each with what it needs, by how much, its regions and its largest buffers.
  static Status does_not_fit(const tessera::CompilationState& state, const tessera::Target& target,
                             const std::vector<TilePlacement>& tiles, const std::vector<std::uint32_t>& over,
                             const std::vector<std::vector<std::uint32_t>>& by_tile) {
    constexpr std::size_t kLargestShown = 4;
    const auto& buffers = state.program.buffers;
    std::string message = fmt::format("model does not fit: {} tile{} over {} bytes:", over.size(),
                                      over.size() == 1 ? "" : "s", target.memory_bytes);
    for (std::uint32_t tile : over) {
      const TilePlacement& placement = tiles[tile];
      std::vector<std::uint32_t> members = by_tile[std::size_t{tile} * 2];
      members.insert(members.end(), by_tile[std::size_t{tile} * 2 + 1].begin(), by_tile[std::size_t{tile} * 2 + 1].end());
      std::sort(members.begin(), members.end(), [&](std::uint32_t a, std::uint32_t b) {
        return buffers[a].bytes != buffers[b].bytes ? buffers[a].bytes > buffers[b].bytes : a < b;
      });
      std::vector<std::string> largest;
      for (std::size_t i = 0; i < members.size() && i < kLargestShown; ++i)
        largest.push_back(fmt::format("{} {} {}", buffers[members[i]].name, buffers[members[i]].bytes,
                                      tessera::region_name(buffers[members[i]].region)));
      if (members.size() > kLargestShown) largest.push_back(fmt::format("and {} more", members.size() - kLargestShown));
      message += fmt::format(
          "\n  tile {} needs {} bytes ({} over: {}; standard region {} of {} bytes, interleaved region {} of {} bytes)",
          tile, target.memory_bytes + placement.over(), placement.over(), fmt::join(largest, ", "),
          placement.standard_used, target.interleaved_start, placement.interleaved_used,
          target.memory_bytes - target.interleaved_start);
    }
    message += fmt::format("\nfix: use a target with more tiles or more memory per tile than '{}', or a smaller model",
                           target.name);
    return Status::failure(std::move(message));
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* place_storage_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "place-storage", "0.1.0",
      "assigns buffer offsets per tile and region; buffers with disjoint live ranges share memory",
      tessera::facts::plan, tessera::facts::storage, &tessera::create_plugin_object<PlaceStorage>);
  return &manifest;
}
TESSERA_PLUGIN(place_storage_manifest)
