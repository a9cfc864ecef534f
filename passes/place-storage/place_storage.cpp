// place-storage: gives every buffer a byte offset in its tile's region; buffers never live together share bytes.
#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/codelets.hpp"
#include "tessera/lowering.hpp"
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
  std::uint64_t support = 0;      ///< code and vertex states, reserved at the top of the standard region
  std::uint64_t descriptors = 0;  ///< exchange descriptors (an entry per copy each side), reserved beside them
  std::uint64_t standard_used = 0, interleaved_used = 0;
  std::uint64_t standard_over = 0, interleaved_over = 0;
  std::uint64_t over() const { return standard_over + interleaved_over; }
  std::uint64_t reserved() const { return support + descriptors; }
};

/// Interval-graph first fit: largest buffers first, each at the lowest aligned offset in
/// its region that overlaps no placed buffer whose live range meets its own, and no memory
/// element of a buffer it must stay element-apart from. Offsets may run past the region's
/// end; the caller reports that as the tile being over.
class TilePlacer {
public:
  TilePlacer(const std::vector<Buffer>& buffers, const std::vector<std::vector<std::uint32_t>>& element_apart,
             std::uint64_t element_bytes, std::vector<std::int64_t>& offsets)
      : buffers_(buffers),
        element_apart_(element_apart),
        element_bytes_(std::max<std::uint64_t>(element_bytes, 1)),
        offsets_(offsets) {}

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
      const std::uint64_t alignment = std::max<std::uint32_t>(buffer.alignment, 1);
      const std::vector<std::uint32_t>& apart = element_apart_[index];
      std::uint64_t offset = align_up(bounds.low, alignment);
      if (apart.empty()) {
        // placed_ is by address: the first gap between live-range conflicts that fits ends the scan.
        for (const Placed& other : placed_) {
          if (other.first_use > buffer.last_use || buffer.first_use > other.last_use) continue;
          if (offset + buffer.bytes <= other.begin) break;
          offset = std::max(offset, align_up(other.end, alignment));
        }
      } else {
        conflicts_.clear();
        for (const Placed& other : placed_) {
          if (std::find(apart.begin(), apart.end(), other.index) != apart.end())
            // The other buffer's whole memory elements are off limits.
            conflicts_.push_back({other.begin / element_bytes_ * element_bytes_, align_up(other.end, element_bytes_),
                                  other.first_use, other.last_use, other.index});
          else if (other.first_use <= buffer.last_use && buffer.first_use <= other.last_use)
            conflicts_.push_back(other);
        }
        // A widened range may start before the conflicts placed below it.
        std::sort(conflicts_.begin(), conflicts_.end(),
                  [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
        for (const Placed& other : conflicts_) {
          if (offset + buffer.bytes <= other.begin) break;
          offset = std::max(offset, align_up(other.end, alignment));
        }
      }
      offsets_[index] = static_cast<std::int64_t>(offset);
      const Placed placed{offset, offset + buffer.bytes, buffer.first_use, buffer.last_use, index};
      placed_.insert(std::upper_bound(placed_.begin(), placed_.end(), placed,
                                      [](const Placed& a, const Placed& b) { return a.begin < b.begin; }),
                     placed);
      end = std::max(end, offset + buffer.bytes);
    }
    return end;
  }

private:
  struct Placed {
    std::uint64_t begin, end;
    std::uint32_t first_use, last_use;
    std::uint32_t index;
  };
  const std::vector<Buffer>& buffers_;
  const std::vector<std::vector<std::uint32_t>>& element_apart_;
  const std::uint64_t element_bytes_;
  std::vector<std::int64_t>& offsets_;
  std::vector<Placed> placed_, conflicts_;
};

/// For each buffer, the buffers it must not share a memory element with: a matmul's `a` and
/// `b` operands, whose loads the inner loop pairs in one cycle (ld2x64pace), which one
/// element cannot serve (Poplar declares the same as `elem(*a) != elem(*b)`).
std::vector<std::vector<std::uint32_t>> element_apart_operands(const tessera::Program& program) {
  std::vector<std::vector<std::uint32_t>> apart(program.buffers.size());
  auto add = [&](std::uint32_t from, std::uint32_t to) {
    if (std::find(apart[from].begin(), apart[from].end(), to) == apart[from].end()) apart[from].push_back(to);
  };
  for (const tessera::Superstep& step : program.supersteps)
    for (const tessera::CodeletCall& call : step.compute) {
      if (!tessera::is_matmul(call.codelet) || call.operands.size() < 2) continue;
      const std::uint32_t a = call.operands[0].buffer, b = call.operands[1].buffer;
      if (a == b || a >= apart.size() || b >= apart.size()) continue;
      add(a, b);
      add(b, a);
    }
  return apart;
}

/// A tile whose standard region overflows while its interleaved region has room: the fewest of
/// its largest standard-region buffers (found by bisection) move to the interleaved region, where
/// any buffer may live (only some operands need it). Left as it was when no count fits both.
/// `place_standard` places the standard region alone (all the bisection looks at); `place_tile`, both.
template <typename PlaceStandard, typename PlaceTile>
void spill_to_interleaved(std::vector<std::uint32_t>& standard_members, std::vector<std::uint32_t>& interleaved_members,
                          TilePlacement& placement, std::vector<Buffer>& buffers, PlaceStandard&& place_standard,
                          PlaceTile&& place_tile) {
  std::vector<std::uint32_t> by_size = standard_members;
  std::stable_sort(by_size.begin(), by_size.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return buffers[a].bytes > buffers[b].bytes; });
  const std::vector<std::uint32_t> standard_before = standard_members, interleaved_before = interleaved_members;
  auto move_largest = [&](std::size_t count, bool both_regions) {
    standard_members.assign(by_size.begin() + static_cast<std::ptrdiff_t>(count), by_size.end());
    interleaved_members = interleaved_before;
    interleaved_members.insert(interleaved_members.end(), by_size.begin(),
                               by_size.begin() + static_cast<std::ptrdiff_t>(count));
    both_regions ? place_tile() : place_standard();
  };
  // The fewest that leave the standard region fitting (moving more only fills the interleaved
  // region): standard overflows with `low` moved and fits with `high`.
  std::size_t low = 0, high = by_size.size();
  move_largest(high, false);
  if (placement.standard_over == 0) {
    while (high - low > 1) {
      const std::size_t middle = (low + high) / 2;
      move_largest(middle, false);
      (placement.standard_over == 0 ? high : low) = middle;
    }
    move_largest(high, true);
    // Element-apart operands can make more fit where fewer do not.
    if (placement.interleaved_over > 0 && high < by_size.size()) move_largest(high = by_size.size(), true);
  }
  if (placement.standard_over > 0 || placement.interleaved_over > 0) {
    standard_members = standard_before;
    interleaved_members = interleaved_before;
    place_tile();
    return;
  }
  for (std::size_t i = 0; i < high; ++i) buffers[by_size[i]].region = Region::interleaved;
}

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
        return Status::failure(fmt::format("buffer '{}' is on tile {} but target '{}' has {} tiles", buffers[i].name,
                                           buffers[i].tile, target.name, target.tiles));
      by_tile[std::size_t{buffers[i].tile} * 2 + (buffers[i].region == Region::interleaved)].push_back(i);
    }

    std::vector<std::int64_t> offsets(buffers.size(), tessera::kUnplaced);
    std::vector<TilePlacement> tiles(target.tiles);
    // Code, vertex states and exchange descriptors, reserved above the data (docs/targets.md).
    const std::vector<std::uint64_t> support = tessera::call_support_bytes(state.program, target.tiles);
    const std::vector<std::uint64_t> descriptors =
        tessera::exchange_descriptor_bytes(state.program, target.tiles, target.multicast);
    const std::vector<std::vector<std::uint32_t>> element_apart = element_apart_operands(state.program);
    TilePlacer placer(buffers, element_apart, target.memory_element_bytes, offsets);
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
      TilePlacement& placement = tiles[tile];
      placement.descriptors = descriptors[tile];
      placement.support = support[tile];
      std::vector<std::uint32_t>&standard_members = by_tile[std::size_t{tile} * 2],
      &interleaved_members = by_tile[std::size_t{tile} * 2 + 1];
      // The support memory sits above the data at the top of the standard region.
      auto place_standard = [&] {
        const std::uint64_t standard_end = placer.place(standard_members, standard);
        placement.standard_used = standard_end - standard.low;
        const std::uint64_t reserved = placement.reserved();
        placement.standard_over = standard_end + reserved > standard.high ? standard_end + reserved - standard.high : 0;
      };
      auto place_tile = [&] {
        place_standard();
        const std::uint64_t interleaved_end = placer.place(interleaved_members, interleaved);
        placement.interleaved_used = interleaved_end - interleaved.low;
        placement.interleaved_over = interleaved_end > interleaved.high ? interleaved_end - interleaved.high : 0;
      };
      place_tile();
      if (placement.standard_over > 0 && placement.interleaved_over == 0)
        spill_to_interleaved(standard_members, interleaved_members, placement, buffers, place_standard, place_tile);
      context.progress(tile + 1, target.tiles, "tiles");
    }

    std::vector<std::uint32_t> over;
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile)
      if (tiles[tile].over() > 0) over.push_back(tile);
    if (!over.empty()) return does_not_fit(state, target, tiles, over, by_tile);

    for (std::size_t i = 0; i < buffers.size(); ++i) buffers[i].offset = offsets[i];
    std::uint64_t peak_standard = 0, peak_interleaved = 0, peak_total = 0, sum = 0, peak_support = 0;
    std::uint32_t used_tiles = 0, tiles_over_90_percent = 0, peak_tile = 0;
    for (std::uint32_t tile = 0; tile < target.tiles; ++tile) {
      const TilePlacement& placement = tiles[tile];
      // Data extents, as `tessera report` draws them; the support memory is logged on its own.
      const std::uint64_t total = placement.standard_used + placement.interleaved_used;
      peak_support = std::max(peak_support, placement.reserved());
      peak_standard = std::max(peak_standard, placement.standard_used);
      peak_interleaved = std::max(peak_interleaved, placement.interleaved_used);
      if (total > peak_total) peak_tile = tile;
      peak_total = std::max(peak_total, total);
      sum += total;
      used_tiles += total > 0;
      tiles_over_90_percent += total * 10 > target.memory_bytes * 9;
    }
    const std::uint64_t mean = target.tiles ? sum / target.tiles : 0;
    state.estimates.peak_tile_bytes = peak_total;
    context.info(
        "placed storage tiles={} used_tiles={} buffers={} element_apart_pairs={} peak_standard_bytes={} "
        "peak_interleaved_bytes={} peak_total_bytes={} mean_tile_bytes={}",
        target.tiles, used_tiles, buffers.size(), count_pairs(element_apart), peak_standard, peak_interleaved,
        peak_total, mean);
    // Tile bytes are address extents (standard plus interleaved in use), as `tessera report` draws them.
    context.info(
        "memory summary max_tile_bytes={} mean_tile_bytes={} tiles_over_90_percent={} "
        "peak_standard_bytes={} peak_interleaved_bytes={} peak_support_reserved_bytes={} max_tile={} memory_bytes={}",
        peak_total, mean, tiles_over_90_percent, peak_standard, peak_interleaved, peak_support, peak_tile,
        target.memory_bytes);
    return Status::success();
  }

private:
  static std::size_t count_pairs(const std::vector<std::vector<std::uint32_t>>& apart) {
    std::size_t links = 0;
    for (const auto& partners : apart) links += partners.size();
    return links / 2;
  }

  /// What takes one region of an over tile: the region's extent, its peak live bytes and the
  /// superstep of that peak (more than the peak means fragmentation or element separation),
  /// and its buffers grouped by name (one tensor's pieces share a name), the largest first.
  static std::string region_breakdown(const tessera::Program& program, const std::vector<std::string>& tensor_of,
                                      const std::vector<std::uint32_t>& members, const char* region, std::uint64_t used,
                                      std::uint64_t capacity) {
    constexpr std::size_t kLargestShown = 4;
    const auto& buffers = program.buffers;
    std::string text = fmt::format("{} region {} of {} bytes", region, used, capacity);
    if (used <= capacity || members.empty()) return text;

    std::vector<std::uint64_t> live(program.supersteps.size() + 1, 0);
    for (std::uint32_t index : members)
      for (std::uint32_t s = buffers[index].first_use; s <= buffers[index].last_use && s < live.size(); ++s)
        live[s] += buffers[index].bytes;
    const auto peak = std::max_element(live.begin(), live.end());

    struct Group {
      std::string name, tensor;
      std::uint64_t bytes = 0;
      std::uint32_t count = 0, first_use = 0, last_use = 0;
    };
    std::map<std::string, Group> by_name;
    for (std::uint32_t index : members) {
      const Buffer& buffer = buffers[index];
      Group& group = by_name[buffer.name];
      if (group.count == 0) group = {buffer.name, tensor_of[index], 0, 0, buffer.first_use, buffer.last_use};
      group.bytes += buffer.bytes;
      ++group.count;
      group.first_use = std::min(group.first_use, buffer.first_use);
      group.last_use = std::max(group.last_use, buffer.last_use);
    }
    std::vector<Group> groups;
    for (auto& entry : by_name) groups.push_back(std::move(entry.second));
    std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.bytes > b.bytes; });
    std::vector<std::string> shown;
    for (std::size_t i = 0; i < groups.size() && i < kLargestShown; ++i)
      shown.push_back(fmt::format("{} {} bytes ({} buffer{}{}, live supersteps {}-{})", groups[i].name, groups[i].bytes,
                                  groups[i].count, groups[i].count == 1 ? "" : "s",
                                  groups[i].tensor.empty() ? "" : ", tensor " + groups[i].tensor, groups[i].first_use,
                                  groups[i].last_use));
    if (groups.size() > kLargestShown) {
      std::uint64_t rest_bytes = 0, rest_buffers = 0;
      for (std::size_t i = kLargestShown; i < groups.size(); ++i) {
        rest_bytes += groups[i].bytes;
        rest_buffers += groups[i].count;
      }
      shown.push_back(
          fmt::format("and {} more buffer{} of {} bytes", rest_buffers, rest_buffers == 1 ? "" : "s", rest_bytes));
    }
    return fmt::format("{} ({} over; peak live {} bytes at superstep {}): {}", text, used - capacity, *peak,
                       peak - live.begin(), fmt::join(shown, ", "));
  }

  /// Every tile over: the worst ones each with what it needs, by how much, and per region what
  /// takes the space; the others by tile range and how much over.
  static Status does_not_fit(const tessera::CompilationState& state, const tessera::Target& target,
                             const std::vector<TilePlacement>& tiles, const std::vector<std::uint32_t>& over,
                             const std::vector<std::vector<std::uint32_t>>& by_tile) {
    const auto worst = std::max_element(
        over.begin(), over.end(), [&](std::uint32_t a, std::uint32_t b) { return tiles[a].over() < tiles[b].over(); });
    std::string message =
        fmt::format("model does not fit: {} tile{} over {} bytes (the worst, tile {}, by {} bytes):", over.size(),
                    over.size() == 1 ? "" : "s", target.memory_bytes, *worst, tiles[*worst].over());
    const std::uint64_t interleaved_capacity = target.memory_bytes - target.interleaved_start;
    // The model tensor the host streams into a buffer, when it does: weights and inputs.
    std::vector<std::string> tensor_of(state.program.buffers.size());
    for (const tessera::HostStream& stream : state.program.streams)
      for (const tessera::HostSlice& slice : stream.slices)
        if (slice.destination.buffer < tensor_of.size()) tensor_of[slice.destination.buffer] = stream.tensor;
    // The worst tiles in full, the worst first; the rest as tile ranges with how much over (a
    // screenful: the worst three say what takes the space, the ranges say where else).
    constexpr std::size_t kTilesShown = 3;
    std::vector<std::uint32_t> shown = over;
    std::stable_sort(shown.begin(), shown.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return tiles[a].over() > tiles[b].over(); });
    std::vector<std::uint32_t> rest(shown.begin() + std::min(shown.size(), kTilesShown), shown.end());
    shown.resize(std::min(shown.size(), kTilesShown));
    for (std::uint32_t tile : shown) {
      const TilePlacement& placement = tiles[tile];
      message += fmt::format(
          "\n  tile {} needs {} bytes ({} over): {}; {}; support (code, vertex state) {} bytes; exchange descriptors "
          "{} bytes",
          tile, target.memory_bytes + placement.over(), placement.over(),
          region_breakdown(state.program, tensor_of, by_tile[std::size_t{tile} * 2 + 1], "interleaved",
                           placement.interleaved_used, interleaved_capacity),
          region_breakdown(state.program, tensor_of, by_tile[std::size_t{tile} * 2], "standard",
                           placement.standard_used,
                           target.interleaved_start - std::min(target.interleaved_start, placement.reserved())),
          placement.support, placement.descriptors);
    }
    if (!rest.empty()) {
      std::sort(rest.begin(), rest.end());
      std::uint64_t least = tiles[rest.front()].over(), most = least;
      std::vector<std::string> ranges;
      for (std::size_t i = 0; i < rest.size();) {
        std::size_t j = i;
        while (j + 1 < rest.size() && rest[j + 1] == rest[j] + 1) ++j;
        ranges.push_back(i == j ? fmt::format("{}", rest[i]) : fmt::format("{}-{}", rest[i], rest[j]));
        for (std::size_t k = i; k <= j; ++k)
          least = std::min(least, tiles[rest[k]].over()), most = std::max(most, tiles[rest[k]].over());
        i = j + 1;
      }
      message += fmt::format("\n  and {} more tile{} over by {} bytes: {}", rest.size(), rest.size() == 1 ? "" : "s",
                             least == most ? std::to_string(least) : fmt::format("{} to {}", least, most),
                             fmt::join(ranges, ", "));
    }
    message += fmt::format(
        "\n  fix: use a target with more tiles or more memory per tile than '{}', or a smaller model", target.name);
    return Status::failure(std::move(message));
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* place_storage_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "place-storage", "0.1.0",
      "assigns buffer offsets per tile and region; buffers with disjoint live ranges share memory; a matmul's "
      "operands never share a memory element",
      tessera::facts::plan, tessera::facts::storage, &tessera::create_plugin_object<PlaceStorage>);
  return &manifest;
}
TESSERA_PLUGIN(place_storage_manifest)
