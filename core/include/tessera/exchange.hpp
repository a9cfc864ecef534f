// One exchange phase, its schedule, and the core's validator of schedules.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

struct Target;

/// `words` consecutive words from `source` to every tile in `destinations` (one send,
/// several receivers when the target has multicast). Addresses are byte offsets in tile
/// memory, filled in by lower-exchanges; schedulers ignore them.
struct Transfer {
  std::uint32_t source = 0;
  std::vector<std::uint32_t> destinations;
  std::uint32_t words = 0;
  std::uint32_t source_address = 0;
  std::vector<std::uint32_t> destination_addresses;  ///< parallel to destinations
};

struct ExchangePhase {
  std::uint32_t tiles = 0;
  std::vector<Transfer> transfers;
};

/// The transfer's next `words` words leave its source on consecutive cycles from `start`.
struct Segment {
  std::uint32_t transfer = 0;
  std::uint64_t start = 0;
  std::uint32_t words = 0;
};

struct Schedule {
  std::vector<Segment> segments;
};

/// What the validator found. `horizon` = last arrival cycle + 1 (0 for an empty phase).
struct ScheduleReport {
  bool valid = true;
  std::string first_conflict;  ///< empty when valid
  std::uint64_t horizon = 0;
  std::uint64_t endpoint_lower_bound = 0;  ///< max over tiles of words sent or received
  std::uint64_t lower_bound = 0;           ///< the strongest bound computed for the target
};

/// The exchange rules a phase must meet before a scheduler sees it (docs/architecture.md,
/// "The exchange problem"): no more tiles than the target, every source and destination a
/// tile of the phase, at least one destination, no source among its own destinations, no
/// destination listed twice, several destinations only where the target has multicast.
/// Returns the first problem ("transfer 3: ...") or "" when the phase is well formed.
/// ExchangeScheduler::schedule calls it first; a scheduler need not check again.
std::string check_phase(const ExchangePhase& phase, const Target& target);

/// Max over tiles of the words it sends or receives (a multicast word is sent once).
std::uint64_t endpoint_lower_bound(const ExchangePhase& phase);

/// The strongest cheap lower bound on the horizon for `target` (at least the endpoint bound).
std::uint64_t lower_bound(const ExchangePhase& phase, const Target& target);

/// Checks `schedule` against the target's rules: every word sent once and in order, one
/// word sent and one received per tile per cycle, latency, multicast, receive-mux switch
/// cost. Reports the first conflict with tile, cycle and the transfers involved.
ScheduleReport validate_schedule(const ExchangePhase& phase, const Schedule& schedule, const Target& target);

/// The most a phase file may hold: parsed, a phase takes about 30 times its text in memory.
inline constexpr std::uint64_t kMaxPhaseFileBytes = std::uint64_t{64} << 20;

/// Reads a phase file (`tiles N` then `SRC DST[,DST...] WORDS` lines, `#` comments): a regular
/// file of at most kMaxPhaseFileBytes. Throws Error naming the file and line.
ExchangePhase read_phase_file(const std::string& path);
/// The text of a phase file.
std::string phase_file_text(const ExchangePhase& phase);
/// Writes the phase file atomically (write_file_atomically: missing folders are created, a
/// failure leaves no partial file).
void write_phase_file(const ExchangePhase& phase, const std::string& path);
/// The name of superstep `superstep`'s phase file in a --emit-phases folder: phase-00042.txt
/// (five digits, so that a listing sorts in program order).
std::string phase_file_name(std::size_t superstep);
/// Writes `TRANSFER START WORDS` lines, atomically.
void write_schedule_file(const Schedule& schedule, const std::string& path);

}  // namespace tessera
