// Writing an execution profile: JSON for scripts, Chrome trace JSON for Perfetto.
#pragma once
#include <string>
#include <string_view>

#include "tessera/runtime/device.hpp"

namespace tessera {
struct Package;
}

namespace tessera::runtime {

/// The profile as JSON text: per superstep its label, per-tile compute cycles, exchange
/// horizon and cycles, word counts; totals; `samples` = number of (tile, superstep)
/// records.
std::string profile_json(const ExecutionProfile& profile);
/// Writes profile_json atomically (temporary file beside `path`, then rename).
void write_profile(const ExecutionProfile& profile, const std::string& path);
/// The Chrome trace (Trace Event Format, which Perfetto and chrome://tracing open): a
/// device track with one slice per superstep holding its compute, sync and exchange, and one
/// track per tile with its compute per superstep. When `package` (the package that was run)
/// is given, each tile's track also shows its send/receive activity per exchange phase, from
/// the tile images. Times are microseconds at the target clock; every slice's cycles are in
/// its args.
std::string chrome_trace_json(const ExecutionProfile& profile, const Package* package = nullptr);
/// Writes chrome_trace_json atomically.
void write_chrome_trace(const ExecutionProfile& profile, const std::string& path, const Package* package = nullptr);

}  // namespace tessera::runtime
