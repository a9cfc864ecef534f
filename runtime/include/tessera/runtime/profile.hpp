// Writing an execution profile: JSON for scripts, Chrome trace JSON for Perfetto.
#pragma once
#include <string>
#include <string_view>

#include "tessera/runtime/device.hpp"

namespace tessera::runtime {

/// The profile as JSON text: per superstep its label, per-tile compute cycles, exchange
/// horizon and cycles, word counts; totals; `samples` = number of (tile, superstep)
/// records.
std::string profile_json(const ExecutionProfile& profile);
/// Writes profile_json atomically (temporary file beside `path`, then rename).
void write_profile(const ExecutionProfile& profile, const std::string& path);
/// Writes a Chrome trace (one track per tile, plus a device track with barriers and
/// exchange phases; times in microseconds at the target clock) atomically.
void write_chrome_trace(const ExecutionProfile& profile, const std::string& path);

/// Writes `contents` to a temporary file beside `path`, flushes it to disk and renames it
/// over `path`; throws Error naming the path on failure and leaves no partial file.
void write_file_atomically(const std::string& path, std::string_view contents);

}  // namespace tessera::runtime
