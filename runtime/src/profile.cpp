// Writing an execution profile: JSON for scripts, Chrome trace JSON for Perfetto.
#include "tessera/runtime/profile.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tessera/diagnostic.hpp"

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
  write_file_atomically(path, profile_json(profile));
}

void write_chrome_trace(const ExecutionProfile& profile, const std::string& path) {
  // Trace Event Format: complete ("X") events with microsecond timestamps; pid 0 is the
  // device, tid = tile, and tid = tiles is the device-wide track (barriers, exchange).
  const double microseconds_per_cycle = profile.clock_hz > 0 ? 1e6 / profile.clock_hz : 1.0;
  const std::uint32_t device_track = profile.tiles;
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 0},
                    {"args", {{"name", fmt::format("{} (simulated)", profile.target_name)}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", device_track},
                    {"args", {{"name", "device: sync and exchange"}}}});
  for (std::uint32_t tile = 0; tile < profile.tiles; ++tile)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", tile},
                      {"args", {{"name", fmt::format("tile {}", tile)}}}});
  auto event = [&](const std::string& name, const char* category, std::uint32_t track,
                   std::uint64_t start, std::uint64_t cycles) {
    events.push_back({{"name", name}, {"cat", category}, {"ph", "X"}, {"pid", 0},
                      {"tid", track}, {"ts", start * microseconds_per_cycle},
                      {"dur", cycles * microseconds_per_cycle}, {"args", {{"cycles", cycles}}}});
  };
  std::uint64_t now = 0;
  for (const SuperstepProfile& step : profile.supersteps) {
    for (std::uint32_t tile = 0; tile < step.tile_compute_cycles.size(); ++tile)
      if (step.tile_compute_cycles[tile] > 0)
        event(step.label, "compute", tile, now, step.tile_compute_cycles[tile]);
    now += step.compute_cycles;
    event("sync", "sync", device_track, now, step.sync_cycles);
    now += step.sync_cycles;
    if (step.exchange_cycles > 0) {
      event(fmt::format("exchange: {}", step.label), "exchange", device_track, now,
            step.exchange_cycles);
      now += step.exchange_cycles;
    }
  }
  const nlohmann::json document = {{"traceEvents", std::move(events)},
                                   {"displayTimeUnit", "ns"}};
  write_file_atomically(path, document.dump() + "\n");
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path directory = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ignored;
  fs::create_directories(directory, ignored);
  // A unique name in the same directory, so the rename stays on one file system.
  std::string temporary = (directory / ("." + target.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0)
    throw Error(path, 0, 0, fmt::format("cannot create a temporary file beside it: {}; check the "
                                        "directory exists and is writable", std::strerror(errno)));
  auto fail = [&](const char* step) {
    const int saved = errno;
    ::close(fd);
    ::unlink(temporary.c_str());
    throw Error(path, 0, 0, fmt::format("cannot write it ({}): {}", step, std::strerror(saved)));
  };
  for (std::size_t written = 0; written < contents.size();) {
    const ssize_t n = ::write(fd, contents.data() + written, contents.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write");
    written += static_cast<std::size_t>(n);
  }
  // mkstemp makes 0600 files; a profile is an ordinary artefact.
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw Error(path, 0, 0, fmt::format("cannot write it (close): {}", std::strerror(saved)));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temporary.c_str());
    throw Error(path, 0, 0, fmt::format("cannot rename the temporary file over it: {}",
                                        std::strerror(saved)));
  }
}

}  // namespace tessera::runtime
