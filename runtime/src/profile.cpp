// Writing an execution profile: JSON for scripts, Chrome trace JSON for Perfetto.
#include "tessera/runtime/profile.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/package.hpp"

namespace tessera::runtime {

namespace {
constexpr int kProfileFormatVersion = 1;
}

std::string profile_json(const ExecutionProfile& profile) {
  nlohmann::json supersteps = nlohmann::json::array();
  for (std::size_t index = 0; index < profile.supersteps.size(); ++index) {
    const SuperstepProfile& step = profile.supersteps[index];
    supersteps.push_back({
        {"index", index},
        {"label", step.label},
        {"compute_cycles", step.compute_cycles},
        {"busiest_tile", step.busiest_tile},
        {"sync_cycles", step.sync_cycles},
        {"exchange_horizon", step.exchange_horizon},
        {"exchange_cycles", step.exchange_cycles},
        {"words_sent", step.words_sent},
        {"words_received", step.words_received},
        {"words_unreceived", step.words_unreceived},
        {"tile_compute_cycles", step.tile_compute_cycles},
    });
  }
  const nlohmann::json document = {
      {"format", "tessera-profile"},
      {"version", kProfileFormatVersion},
      {"target", profile.target_name},
      {"tiles", profile.tiles},
      {"clock_hz", profile.clock_hz},
      {"samples", profile.samples()},
      {"totals",
       {{"cycles", profile.cycles.total()},
        {"compute_cycles", profile.cycles.compute},
        {"exchange_cycles", profile.cycles.exchange},
        {"sync_cycles", profile.cycles.sync},
        {"seconds", profile.clock_hz > 0 ? profile.cycles.total() / profile.clock_hz : 0.0}}},
      {"supersteps", std::move(supersteps)},
  };
  return document.dump(1) + "\n";
}

void write_profile(const ExecutionProfile& profile, const std::string& path) {
  write_file_atomically(path, profile_json(profile), "profile");
}

namespace {

/// Maps cycles to trace timestamps. Boundaries are whole nanoseconds from a monotone
/// rounding of cycles, so slices that nest or abut in cycles still do in the trace.
/// Perfetto truncates `us * 1000` to integer nanoseconds, and 1.234 * 1000 is
/// 1233.999..., so each value carries a quarter-nanosecond that the truncation removes.
class TraceClock {
public:
  explicit TraceClock(double clock_hz) : nanoseconds_per_cycle_(clock_hz > 0 ? 1e9 / clock_hz : 1e3) {}
  double timestamp(std::uint64_t cycle) const { return (nanoseconds(cycle) + 0.25) / 1000.0; }
  double duration(std::uint64_t begin, std::uint64_t end) const {
    return (nanoseconds(end) - nanoseconds(begin) + 0.25) / 1000.0;
  }

private:
  std::int64_t nanoseconds(std::uint64_t cycle) const {
    return std::llround(static_cast<double>(cycle) * nanoseconds_per_cycle_);
  }
  double nanoseconds_per_cycle_;
};

/// One tile's traffic in one exchange phase, in cycles from the start of the phase.
struct TileTraffic {
  std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t end = 0;
  std::uint64_t words_sent = 0, words_received = 0;
  std::uint64_t sends = 0, receives = 0;
  bool active() const { return words_sent + words_received > 0; }
};

TileTraffic tile_traffic(const TileSuperstep& step) {
  TileTraffic traffic;
  for (const TileSend& send : step.sends) {
    if (send.words == 0) continue;
    traffic.first = std::min(traffic.first, send.cycle);
    traffic.end = std::max(traffic.end, send.cycle + send.words);
    traffic.words_sent += send.words;
    ++traffic.sends;
  }
  for (const TileReceive& receive : step.receives) {
    if (receive.words == 0) continue;
    traffic.first = std::min(traffic.first, receive.arrival);
    traffic.end = std::max(traffic.end, receive.arrival + receive.words);
    traffic.words_received += receive.words;
    ++traffic.receives;
  }
  return traffic;
}

}  // namespace

std::string chrome_trace_json(const ExecutionProfile& profile, const Package* package) {
  if (package != nullptr && (package->tiles.size() != profile.tiles ||
                             std::any_of(package->tiles.begin(), package->tiles.end(), [&](const TileImage& tile) {
                               return tile.supersteps.size() != profile.supersteps.size();
                             })))
    throw std::logic_error(
        fmt::format("chrome_trace_json: the package has {} tiles and the profile {} tiles and {} "
                    "supersteps; pass the package that produced the profile",
                    package->tiles.size(), profile.tiles, profile.supersteps.size()));

  // Trace Event Format: complete ("X") events. pid 1 is the device (Perfetto reserves pid 0
  // and tid 0 for the kernel's idle task); tid 1 is the device-wide track, tid 2 + t tile t.
  // Categories: "superstep" and "device" on the device track, "compute" and "exchange" on
  // tile tracks.
  constexpr int kProcess = 1;
  constexpr std::uint32_t kDeviceTrack = 1;
  auto tile_track = [](std::uint32_t tile) { return tile + 2; };
  const TraceClock clock(profile.clock_hz);

  nlohmann::json events = nlohmann::json::array();
  auto name_track = [&](std::uint32_t track, const std::string& name) {
    events.push_back(
        {{"name", "thread_name"}, {"ph", "M"}, {"pid", kProcess}, {"tid", track}, {"args", {{"name", name}}}});
    // chrome://tracing orders tracks by this; Perfetto ignores it.
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", kProcess},
                      {"tid", track},
                      {"args", {{"sort_index", track}}}});
  };
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", kProcess},
                    {"args", {{"name", fmt::format("{} (simulated)", profile.target_name)}}}});
  name_track(kDeviceTrack, "device: supersteps");
  for (std::uint32_t tile = 0; tile < profile.tiles; ++tile) name_track(tile_track(tile), fmt::format("tile {}", tile));

  auto slice = [&](const std::string& name, const char* category, std::uint32_t track, std::uint64_t begin,
                   std::uint64_t end, nlohmann::json args) {
    args["cycles"] = end - begin;
    args["first_cycle"] = begin;
    events.push_back({{"name", name},
                      {"cat", category},
                      {"ph", "X"},
                      {"pid", kProcess},
                      {"tid", track},
                      {"ts", clock.timestamp(begin)},
                      {"dur", clock.duration(begin, end)},
                      {"args", std::move(args)}});
  };

  std::uint64_t now = 0;
  for (std::size_t index = 0; index < profile.supersteps.size(); ++index) {
    const SuperstepProfile& step = profile.supersteps[index];
    const std::uint64_t compute_end = now + step.compute_cycles;
    const std::uint64_t exchange_begin = compute_end + step.sync_cycles;
    const std::uint64_t step_end = exchange_begin + step.exchange_cycles;

    slice(fmt::format("superstep {}: {}", index, step.label), "superstep", kDeviceTrack, now, step_end,
          {{"superstep", index}});
    if (step.compute_cycles > 0)
      slice(fmt::format("compute (slowest tile {})", step.busiest_tile), "device", kDeviceTrack, now, compute_end,
            {{"superstep", index}, {"busiest_tile", step.busiest_tile}});
    slice("sync", "device", kDeviceTrack, compute_end, exchange_begin, {{"superstep", index}});
    if (step.exchange_cycles > 0)
      slice(fmt::format("exchange: {}", step.label), "device", kDeviceTrack, exchange_begin, step_end,
            {{"superstep", index},
             {"horizon", step.exchange_horizon},
             {"phase_overhead", step.exchange_cycles - step.exchange_horizon},
             {"words_sent", step.words_sent},
             {"words_received", step.words_received},
             {"words_unreceived", step.words_unreceived}});

    for (std::uint32_t tile = 0; tile < step.tile_compute_cycles.size(); ++tile)
      if (step.tile_compute_cycles[tile] > 0)
        slice(step.label, "compute", tile_track(tile), now, now + step.tile_compute_cycles[tile],
              {{"superstep", index}});
    // The schedule's cycle 0 is the start of the phase; the fixed phase overhead follows the
    // horizon on the device track.
    if (package != nullptr)
      for (std::uint32_t tile = 0; tile < profile.tiles; ++tile) {
        const TileTraffic traffic = tile_traffic(package->tiles[tile].supersteps[index]);
        if (!traffic.active()) continue;
        slice(fmt::format("exchange: {}", step.label), "exchange", tile_track(tile), exchange_begin + traffic.first,
              exchange_begin + traffic.end,
              {{"superstep", index},
               {"phase_cycle", traffic.first},
               {"words_sent", traffic.words_sent},
               {"words_received", traffic.words_received},
               {"sends", traffic.sends},
               {"receives", traffic.receives}});
      }
    now = step_end;
  }
  // traceEvents first: Perfetto's streaming reader stops at a top-level key it does not know.
  // No displayTimeUnit: Perfetto releases before 2022 read it as the unit of `ts`.
  nlohmann::ordered_json document;
  document["traceEvents"] = std::move(events);
  document["otherData"] = {{"generator", "tessera run"},
                           {"target", profile.target_name},
                           {"clock_hz", profile.clock_hz},
                           {"total_cycles", profile.cycles.total()}};
  return document.dump() + "\n";
}

void write_chrome_trace(const ExecutionProfile& profile, const std::string& path, const Package* package) {
  write_file_atomically(path, chrome_trace_json(profile, package), "trace");
}

}  // namespace tessera::runtime
