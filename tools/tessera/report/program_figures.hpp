// The figures `tessera report` draws, computed from a package and (optionally) its run profile.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/exchange.hpp"
#include "tessera/package.hpp"

namespace tessera::report {

/// One tile's memory, per region, from its buffer table. `extent` is how far the region is
/// used (highest buffer end above the region's start): buffers whose lifetimes do not
/// overlap share addresses, so extent, not the sum of sizes, is what the tile needs.
struct TileMemory {
  std::uint64_t standard_extent = 0;
  std::uint64_t interleaved_extent = 0;
  std::uint64_t standard_buffer_bytes = 0;  ///< sum of buffer sizes in the region
  std::uint64_t interleaved_buffer_bytes = 0;
  std::uint32_t buffers = 0;
  std::uint64_t total_extent() const { return standard_extent + interleaved_extent; }
};

/// Per-tile compute cycles of every superstep and where they came from.
struct ComputeCycles {
  std::vector<std::vector<std::uint64_t>> per_superstep;  ///< [superstep][tile]
  std::string source;                                     ///< "profile FILE" or "codelet cycle formulas"
  bool from_profile = false;
  std::optional<std::uint64_t> simulated_total_cycles;  ///< the profile's total, when given
};

/// One exchange phase as the package carries it: per tile its sends and receives.
struct PhaseFigures {
  std::uint32_t index = 0;  ///< the superstep whose exchange this is
  std::string label;
  std::uint64_t horizon = 0;  ///< last send or arrival cycle + 1; 0 when nothing is sent
  std::uint64_t endpoint_lower_bound = 0;
  std::uint64_t lower_bound = 0;  ///< tessera::lower_bound of the phase rebuilt from the sends
  std::uint64_t words_sent = 0;   ///< a multicast word counts once
  std::uint64_t words_received = 0;
  std::uint64_t words_unreceived = 0;  ///< sent words no tile listens to
  std::size_t transfers = 0;           ///< in the rebuilt phase
  std::uint32_t active_tiles = 0;      ///< tiles that send or receive
  bool empty() const { return words_sent == 0; }
  /// horizon / lower bound (1 = at the bound); 0 for an empty phase.
  double ratio_to_bound() const {
    return lower_bound == 0 ? 0.0 : static_cast<double>(horizon) / static_cast<double>(lower_bound);
  }
};

/// One tile's traffic in one phase, for the timeline.
struct TileTraffic {
  std::uint32_t tile = 0;
  std::uint64_t words_sent = 0, words_received = 0;
  std::uint64_t first_cycle = 0, end_cycle = 0;  ///< first busy cycle, last busy cycle + 1
  std::uint32_t senders = 0;                     ///< distinct tiles it listens to
  std::uint64_t busiest_port_words() const { return std::max(words_sent, words_received); }
};

struct ReportOptions {
  std::optional<std::uint32_t> phase;  ///< empty: the phase with the largest horizon
  std::uint32_t timeline_tiles = 16;   ///< how many of the busiest tiles the timeline shows
};

struct ProgramFigures {
  std::string package_path;
  const Package* package = nullptr;  ///< the figures' source; outlives them
  std::vector<TileMemory> memory;    ///< one per tile
  ComputeCycles cycles;
  std::vector<PhaseFigures> phases;                                 ///< one per superstep, empty phases included
  std::vector<std::uint64_t> tile_words_sent, tile_words_received;  ///< over every phase
  /// The phase the timeline shows, or empty when the package exchanges nothing.
  std::optional<std::uint32_t> selected_phase;
  std::vector<TileTraffic> timeline;  ///< the busiest tiles of the selected phase, busiest first
  std::uint64_t peak_tile_bytes = 0;  ///< max over tiles of TileMemory::total_extent
  std::uint32_t peak_tile = 0;
};

/// Rebuilds the exchange phase of `superstep` from the tile images: every word a source sends
/// becomes part of a transfer to the tiles that receive it (arrival - latency = send cycle),
/// one transfer per (source, destination set). Transfers are preemptive, so this is the same
/// scheduling problem as the compiler's phase. Words nobody receives are left out and counted
/// in `unreceived_words`. Throws Error for a receive no send matches.
ExchangePhase rebuild_phase(const Package& package, std::uint32_t superstep, std::uint64_t* unreceived_words = nullptr);

/// Per-tile compute cycles from the codelet cycle formulas (what the simulator charges).
ComputeCycles cycles_from_package(const Package& package);

/// Per-tile compute cycles from a profile JSON written by `tessera run --profile`. Throws
/// Error naming `profile_path` when it is unreadable or belongs to another package.
ComputeCycles cycles_from_profile(const Package& package, const std::string& profile_path);

/// Every figure of the report. Throws Error naming the package when `options.phase` is not
/// an exchange phase of it.
ProgramFigures compute_figures(const Package& package, const std::string& package_path, ComputeCycles cycles,
                               const ReportOptions& options);

}  // namespace tessera::report
