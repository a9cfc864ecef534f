// The schedule validator, the exchange lower bounds, and the phase/schedule text files.
#include "tessera/exchange.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"
#include "tessera/target.hpp"

namespace tessera {
namespace {

// Cycles beyond this are refused, so start + latency + words never overflows 64 bits.
constexpr std::uint64_t kLatestStartCycle = std::uint64_t{1} << 62;

// The bounds accept any phase: a tile beyond phase.tiles is the validator's to report, so
// the bounds leave out the transfers and destinations that name one.
bool in_phase(const ExchangePhase& phase, std::uint32_t tile) { return tile < phase.tiles; }

// Counting sort of items into per-tile buckets: `begin[t]..begin[t+1]` index `items` of
// tile t, in input order. Linear, so the per-tile sorts that follow stay small.
template <typename Item, typename TileOf>
void bucket_by_tile(std::vector<Item>& items, std::uint32_t tiles, TileOf tile_of, std::vector<std::size_t>& begin) {
  begin.assign(std::size_t{tiles} + 1, 0);
  for (const Item& item : items) ++begin[tile_of(item) + 1];
  for (std::uint32_t tile = 0; tile < tiles; ++tile) begin[tile + 1] += begin[tile];
  std::vector<std::size_t> next(begin.begin(), begin.end() - 1);
  std::vector<Item> sorted(items.size());
  for (const Item& item : items) sorted[next[tile_of(item)]++] = item;
  items = std::move(sorted);
}

// A conflict found by one sweep; the validator reports the earliest one.
struct Conflict {
  std::uint64_t cycle = 0;
  std::uint32_t tile = 0;
  std::string message;
};

void keep_earliest(std::optional<Conflict>& kept, Conflict candidate) {
  if (!kept || candidate.cycle < kept->cycle || (candidate.cycle == kept->cycle && candidate.tile < kept->tile))
    kept = std::move(candidate);
}

// One transfer's words leaving its source: cycles [start, end).
struct SendInterval {
  std::uint64_t start, end;
  std::uint32_t source, transfer;
};

// One transfer's words arriving at one destination: cycles [start, end).
struct ReceiveInterval {
  std::uint64_t start, end;
  std::uint32_t destination, source, transfer;
};

std::optional<Conflict> find_send_conflict(std::vector<SendInterval>& sends, std::uint32_t tiles) {
  std::vector<std::size_t> begin;
  bucket_by_tile(
      sends, tiles, [](const SendInterval& s) { return s.source; }, begin);
  std::optional<Conflict> earliest;
  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    auto first = sends.begin() + static_cast<std::ptrdiff_t>(begin[tile]);
    auto last = sends.begin() + static_cast<std::ptrdiff_t>(begin[tile + 1]);
    std::sort(first, last, [](const SendInterval& a, const SendInterval& b) {
      return a.start != b.start ? a.start < b.start : a.transfer < b.transfer;
    });
    // Sorted by start, the first interval that begins before the latest end so far is the
    // tile's earliest double send.
    const SendInterval* latest = nullptr;
    for (auto it = first; it != last; ++it) {
      if (latest && it->start < latest->end) {
        keep_earliest(earliest, {it->start, tile,
                                 fmt::format("send conflict: tile {} sends words of transfer {} and "
                                             "transfer {} in the same cycle {} (a tile sends one word "
                                             "per cycle)",
                                             tile, latest->transfer, it->transfer, it->start)});
        break;
      }
      if (!latest || it->end > latest->end) latest = &*it;
    }
  }
  return earliest;
}

std::optional<Conflict> find_receive_conflict(std::vector<ReceiveInterval>& receives, std::uint32_t tiles,
                                              const Target& target) {
  std::vector<std::size_t> begin;
  bucket_by_tile(
      receives, tiles, [](const ReceiveInterval& r) { return r.destination; }, begin);
  std::optional<Conflict> earliest;
  const std::uint64_t switch_cost = target.switch_cost;
  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    auto first = receives.begin() + static_cast<std::ptrdiff_t>(begin[tile]);
    auto last = receives.begin() + static_cast<std::ptrdiff_t>(begin[tile + 1]);
    std::sort(first, last, [](const ReceiveInterval& a, const ReceiveInterval& b) {
      return a.start != b.start ? a.start < b.start : a.transfer < b.transfer;
    });
    // While no two intervals overlap, the interval with the latest end is also the one
    // just before in arrival order, so the mux rule only needs the previous interval.
    const ReceiveInterval* previous = nullptr;
    for (auto it = first; it != last; ++it) {
      if (previous && it->start < previous->end) {
        keep_earliest(earliest,
                      {it->start, tile,
                       fmt::format("receive conflict: tile {} receives words of transfer {} "
                                   "(from tile {}) and transfer {} (from tile {}) in the same "
                                   "cycle {} (a tile receives one word per cycle)",
                                   tile, previous->transfer, previous->source, it->transfer, it->source, it->start)});
        break;
      }
      if (previous && switch_cost > 0 && it->source != previous->source && it->start < previous->end + switch_cost) {
        keep_earliest(earliest,
                      {it->start, tile,
                       fmt::format("switch conflict: tile {} changes the source it listens to from tile "
                                   "{} (transfer {}, last word arrives in cycle {}) to tile {} (transfer "
                                   "{}, first word arrives in cycle {}) after {} idle cycles; target "
                                   "'{}' needs {}",
                                   tile, previous->source, previous->transfer, previous->end - 1, it->source,
                                   it->transfer, it->start, it->start - previous->end, target.name, switch_cost)});
        break;
      }
      previous = &*it;
    }
  }
  return earliest;
}

// Single-port bound with release times (receivers) or tails (senders): for the jobs whose
// offset is at least L, the port needs L + their words + idle switches. Taking every
// distinct offset as L is the classic one-machine bound, computed by one sorted sweep.
struct PortJob {
  std::uint32_t port;
  std::uint32_t offset;  ///< release (earliest arrival) or tail (latency after the last send)
  std::uint32_t words;
  std::uint32_t partner;  ///< the source, for counting distinct sources at a receiver
};

std::uint64_t one_port_bound(std::vector<PortJob>& jobs, std::uint32_t tiles, std::uint64_t switch_cost) {
  std::vector<std::size_t> begin;
  bucket_by_tile(
      jobs, tiles, [](const PortJob& j) { return j.port; }, begin);
  // seen_at[partner] == port + 1 when partner was already counted for this port.
  std::vector<std::uint32_t> seen_at(tiles, 0);
  std::uint64_t best = 0;
  for (std::uint32_t port = 0; port < tiles; ++port) {
    auto first = jobs.begin() + static_cast<std::ptrdiff_t>(begin[port]);
    auto last = jobs.begin() + static_cast<std::ptrdiff_t>(begin[port + 1]);
    std::sort(first, last, [](const PortJob& a, const PortJob& b) { return a.offset > b.offset; });
    std::uint64_t words = 0, partners = 0;
    for (auto it = first; it != last; ++it) {
      words += it->words;
      if (seen_at[it->partner] != port + 1) {
        seen_at[it->partner] = port + 1;
        ++partners;
      }
      const bool offset_ends = std::next(it) == last || std::next(it)->offset != it->offset;
      if (offset_ends && words > 0) best = std::max(best, it->offset + words + switch_cost * (partners - 1));
    }
  }
  return best;
}

// Pairwise-conflicting multicasts can never overlap in time when every latency involved is
// equal, so their words add up. A greedy clique over the heaviest multicasts is cheap.
std::uint64_t multicast_clique_bound(const ExchangePhase& phase, const Target& target, std::uint32_t tiles) {
  constexpr std::size_t kCandidates = 512;
  std::vector<std::uint32_t> candidates;
  for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
    const Transfer& transfer = phase.transfers[index];
    if (transfer.destinations.size() > 1 && transfer.words > 0 && in_phase(phase, transfer.source) &&
        std::all_of(transfer.destinations.begin(), transfer.destinations.end(),
                    [&](std::uint32_t d) { return in_phase(phase, d); }))
      candidates.push_back(index);
  }
  if (candidates.size() < 2) return 0;
  std::sort(candidates.begin(), candidates.end(), [&](std::uint32_t a, std::uint32_t b) {
    const auto wa = phase.transfers[a].words, wb = phase.transfers[b].words;
    return wa != wb ? wa > wb : a < b;
  });
  if (candidates.size() > kCandidates) candidates.resize(kCandidates);

  // Two transfers conflict when they share their source or a destination; a tile that
  // sends one and receives the other is full duplex, so that is no conflict.
  struct Member {
    std::uint32_t source;
    std::vector<std::uint64_t> destinations;  ///< bitset over tiles
  };
  const std::size_t words_per_set = (tiles + 63) / 64;
  auto member_of = [&](const Transfer& transfer) {
    Member member{transfer.source, std::vector<std::uint64_t>(words_per_set, 0)};
    for (std::uint32_t d : transfer.destinations) member.destinations[d / 64] |= std::uint64_t{1} << (d % 64);
    return member;
  };
  auto conflict = [&](const Member& a, const Member& b) {
    if (a.source == b.source) return true;
    for (std::size_t i = 0; i < words_per_set; ++i)
      if (a.destinations[i] & b.destinations[i]) return true;
    return false;
  };

  std::optional<std::uint32_t> common_latency;
  std::uint64_t words = 0;
  std::vector<Member> members;
  for (std::uint32_t index : candidates) {
    const Transfer& transfer = phase.transfers[index];
    std::optional<std::uint32_t> latency = common_latency;
    bool uniform = true;
    for (std::uint32_t d : transfer.destinations) {
      const std::uint32_t l = target.latency(transfer.source, d);
      if (!latency) latency = l;
      if (l != *latency) {
        uniform = false;
        break;
      }
    }
    if (!uniform) continue;
    Member candidate = member_of(transfer);
    if (!std::all_of(members.begin(), members.end(), [&](const Member& member) { return conflict(member, candidate); }))
      continue;
    members.push_back(std::move(candidate));
    common_latency = latency;
    words += transfer.words;
  }
  return members.size() < 2 ? 0 : words + *common_latency;
}

// ---- phase file parsing ----

struct Token {
  std::string_view text;
  int column = 0;  ///< 1-based
};

std::vector<Token> split_tokens(std::string_view line) {
  std::vector<Token> tokens;
  std::size_t position = 0;
  while (position < line.size()) {
    while (position < line.size() && (line[position] == ' ' || line[position] == '\t' || line[position] == '\r'))
      ++position;
    if (position >= line.size()) break;
    const std::size_t start = position;
    while (position < line.size() && line[position] != ' ' && line[position] != '\t' && line[position] != '\r')
      ++position;
    tokens.push_back({line.substr(start, position - start), static_cast<int>(start) + 1});
  }
  return tokens;
}

class PhaseFileParser {
public:
  explicit PhaseFileParser(std::string path) : path_(std::move(path)) {}

  ExchangePhase parse(std::istream& in) {
    ExchangePhase phase;
    bool have_header = false;
    std::string line;
    int line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      std::string_view content = line;
      if (auto hash = content.find('#'); hash != std::string_view::npos) content = content.substr(0, hash);
      const std::vector<Token> tokens = split_tokens(content);
      if (tokens.empty()) continue;
      if (!have_header) {
        read_header(tokens, line_number, phase);
        have_header = true;
        continue;
      }
      phase.transfers.push_back(read_transfer(tokens, line_number, phase.tiles));
    }
    if (in.bad()) fail(line_number, 0, "cannot read the file");
    if (!have_header)
      fail(line_number + 1, 1,
           "missing `tiles N` header: a phase file starts with the tile count, e.g. `tiles "
           "1472`");
    return phase;
  }

private:
  [[noreturn]] void fail(int line, int column, const std::string& message) const {
    throw Error(path_, line, column, message);
  }

  // Reads an unsigned decimal that must consume the whole token.
  std::uint64_t read_number(const Token& token, int line, const char* what, std::uint64_t maximum) const {
    std::uint64_t value = 0;
    const char* first = token.text.data();
    const char* last = first + token.text.size();
    if (!token.text.empty() && token.text.front() == '-')
      fail(line, token.column, fmt::format("negative {} '{}'", what, token.text));
    auto [end, error] = std::from_chars(first, last, value);
    if (error == std::errc::result_out_of_range || (error == std::errc() && value > maximum))
      fail(line, token.column, fmt::format("{} '{}' is too large (at most {})", what, token.text, maximum));
    if (error != std::errc() || end != last)
      fail(line, token.column, fmt::format("expected a non-negative integer {}, found '{}'", what, token.text));
    return value;
  }

  void read_header(const std::vector<Token>& tokens, int line, ExchangePhase& phase) const {
    if (tokens[0].text != "tiles")
      fail(line, tokens[0].column,
           fmt::format("missing `tiles N` header: found '{}' before it; start the file with "
                       "the tile count, e.g. `tiles 1472`",
                       tokens[0].text));
    if (tokens.size() != 2) fail(line, tokens[0].column, "the header must be exactly `tiles N`");
    phase.tiles = static_cast<std::uint32_t>(
        read_number(tokens[1], line, "tile count", std::numeric_limits<std::uint32_t>::max()));
    if (phase.tiles == 0) fail(line, tokens[1].column, "the tile count must be at least 1");
  }

  std::uint32_t read_tile(std::string_view text, int column, int line, const char* what, std::uint32_t tiles) const {
    const Token part{text, column};
    const std::uint64_t tile = read_number(part, line, what, std::numeric_limits<std::uint32_t>::max());
    if (tile >= tiles)
      fail(line, column,
           fmt::format("{} {} is out of range: the phase has {} tiles (0..{})", what, tile, tiles, tiles - 1));
    return static_cast<std::uint32_t>(tile);
  }

  Transfer read_transfer(const std::vector<Token>& tokens, int line, std::uint32_t tiles) const {
    if (tokens[0].text == "tiles")
      fail(line, tokens[0].column, "a second `tiles` header; a phase file has exactly one");
    if (tokens.size() != 3)
      fail(line, tokens[0].column,
           fmt::format("expected `SRC DST[,DST...] WORDS` (3 fields), found {} field{}", tokens.size(),
                       tokens.size() == 1 ? "" : "s"));
    Transfer transfer;
    transfer.source = read_tile(tokens[0].text, tokens[0].column, line, "source tile", tiles);
    // A hash set, not a search of the list so far: one line may list every tile of the target.
    std::unordered_set<std::uint32_t> listed;
    std::string_view list = tokens[1].text;
    int column = tokens[1].column;
    while (true) {
      const std::size_t comma = list.find(',');
      const std::string_view item = list.substr(0, comma);
      if (item.empty()) fail(line, column, "empty destination in the list; separate tiles with single commas");
      const std::uint32_t destination = read_tile(item, column, line, "destination tile", tiles);
      if (destination == transfer.source)
        fail(line, column, fmt::format("source tile {} is among its own destinations", destination));
      if (!listed.insert(destination).second)
        fail(line, column, fmt::format("destination tile {} is listed twice", destination));
      transfer.destinations.push_back(destination);
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
      column += static_cast<int>(comma) + 1;
    }
    transfer.words = static_cast<std::uint32_t>(
        read_number(tokens[2], line, "word count", std::numeric_limits<std::uint32_t>::max()));
    return transfer;
  }

  std::string path_;
};

}  // namespace

std::string check_phase(const ExchangePhase& phase, const Target& target) {
  if (phase.tiles > target.tiles)
    return fmt::format("the phase has {} tiles but target '{}' has only {}", phase.tiles, target.name, target.tiles);
  // Marks which destinations the current transfer already listed, without clearing.
  std::vector<std::uint32_t> listed_by(phase.tiles, std::numeric_limits<std::uint32_t>::max());
  for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
    const Transfer& transfer = phase.transfers[index];
    if (transfer.source >= phase.tiles)
      return fmt::format("transfer {}: source tile {} is out of range (the phase has {} tiles)", index, transfer.source,
                         phase.tiles);
    if (transfer.destinations.empty())
      return fmt::format("transfer {} (from tile {}) has no destination", index, transfer.source);
    if (transfer.destinations.size() > 1 && !target.multicast)
      return fmt::format(
          "transfer {} has {} destinations but target '{}' has no multicast; split it into "
          "one transfer per destination",
          index, transfer.destinations.size(), target.name);
    for (std::uint32_t destination : transfer.destinations) {
      if (destination >= phase.tiles)
        return fmt::format("transfer {}: destination tile {} is out of range (the phase has {} tiles)", index,
                           destination, phase.tiles);
      if (destination == transfer.source)
        return fmt::format("transfer {}: source tile {} is among its own destinations", index, destination);
      if (listed_by[destination] == index)
        return fmt::format("transfer {}: destination tile {} is listed twice", index, destination);
      listed_by[destination] = index;
    }
  }
  return "";
}

std::uint64_t endpoint_lower_bound(const ExchangePhase& phase) {
  const std::uint32_t tiles = phase.tiles;
  std::vector<std::uint64_t> sent(tiles, 0), received(tiles, 0);
  for (const Transfer& transfer : phase.transfers) {
    if (!in_phase(phase, transfer.source)) continue;
    sent[transfer.source] += transfer.words;  // a multicast word leaves its source once
    for (std::uint32_t destination : transfer.destinations)
      if (in_phase(phase, destination)) received[destination] += transfer.words;
  }
  std::uint64_t bound = 0;
  for (std::uint32_t tile = 0; tile < tiles; ++tile) bound = std::max({bound, sent[tile], received[tile]});
  return bound;
}

std::uint64_t lower_bound(const ExchangePhase& phase, const Target& target) {
  const std::uint32_t tiles = phase.tiles;
  std::uint64_t bound = endpoint_lower_bound(phase);

  std::vector<PortJob> receiver_jobs, sender_jobs;
  receiver_jobs.reserve(phase.transfers.size());
  sender_jobs.reserve(phase.transfers.size());
  for (const Transfer& transfer : phase.transfers) {
    if (transfer.words == 0 || transfer.destinations.empty() || !in_phase(phase, transfer.source)) continue;
    std::uint32_t farthest = 0;
    for (std::uint32_t destination : transfer.destinations) {
      if (!in_phase(phase, destination)) continue;
      const std::uint32_t latency = target.latency(transfer.source, destination);
      farthest = std::max(farthest, latency);
      // A word cannot arrive before `latency`: the receiver's release time.
      receiver_jobs.push_back({destination, latency, transfer.words, transfer.source});
    }
    // The transfer's last word still travels `farthest` cycles after it leaves: its tail.
    // Senders have no mux, so every job counts as the same partner.
    sender_jobs.push_back({transfer.source, farthest, transfer.words, 0});
  }
  bound = std::max(bound, one_port_bound(receiver_jobs, tiles, target.switch_cost));
  bound = std::max(bound, one_port_bound(sender_jobs, tiles, 0));
  if (target.multicast) bound = std::max(bound, multicast_clique_bound(phase, target, tiles));
  return bound;
}

ScheduleReport validate_schedule(const ExchangePhase& phase, const Schedule& schedule, const Target& target) {
  ScheduleReport report;
  report.endpoint_lower_bound = endpoint_lower_bound(phase);
  report.lower_bound = lower_bound(phase, target);
  auto reject = [&](std::string message) {
    report.valid = false;
    report.first_conflict = std::move(message);
    return report;
  };

  if (std::string problem = check_phase(phase, target); !problem.empty()) return reject("invalid phase: " + problem);

  // Every segment on its own, and how many words each transfer got.
  std::vector<std::uint64_t> scheduled_words(phase.transfers.size(), 0);
  std::size_t receive_count = 0;
  for (std::size_t index = 0; index < schedule.segments.size(); ++index) {
    const Segment& segment = schedule.segments[index];
    if (segment.transfer >= phase.transfers.size())
      return reject(fmt::format("segment {} names transfer {} but the phase has {} transfers", index, segment.transfer,
                                phase.transfers.size()));
    if (segment.words == 0)
      return reject(fmt::format("segment {} (transfer {}) carries no words; drop it", index, segment.transfer));
    if (segment.start > kLatestStartCycle)
      return reject(
          fmt::format("segment {} (transfer {}) starts at cycle {}, beyond the last "
                      "supported cycle {}",
                      index, segment.transfer, segment.start, kLatestStartCycle));
    scheduled_words[segment.transfer] += segment.words;
    receive_count += phase.transfers[segment.transfer].destinations.size();
  }
  for (std::uint32_t index = 0; index < phase.transfers.size(); ++index) {
    const std::uint64_t words = phase.transfers[index].words;
    if (scheduled_words[index] < words)
      return reject(fmt::format("transfer {} has {} of its {} words scheduled", index, scheduled_words[index], words));
    if (scheduled_words[index] > words)
      return reject(
          fmt::format("transfer {} has {} words scheduled but carries only {}", index, scheduled_words[index], words));
  }

  // Interval sweeps per tile: cost grows with segments, not with words.
  std::vector<SendInterval> sends;
  sends.reserve(schedule.segments.size());
  std::vector<ReceiveInterval> receives;
  receives.reserve(receive_count);
  for (const Segment& segment : schedule.segments) {
    const Transfer& transfer = phase.transfers[segment.transfer];
    sends.push_back({segment.start, segment.start + segment.words, transfer.source, segment.transfer});
    for (std::uint32_t destination : transfer.destinations) {
      const std::uint64_t arrival = segment.start + target.latency(transfer.source, destination);
      receives.push_back({arrival, arrival + segment.words, destination, transfer.source, segment.transfer});
      report.horizon = std::max(report.horizon, arrival + segment.words);
    }
  }

  std::optional<Conflict> conflict = find_send_conflict(sends, phase.tiles);
  if (std::optional<Conflict> receive = find_receive_conflict(receives, phase.tiles, target))
    keep_earliest(conflict, std::move(*receive));
  if (conflict) return reject(std::move(conflict->message));
  return report;
}

ExchangePhase read_phase_file(const std::string& path) {
  std::istringstream in(read_bounded_file(path, "the phase file", kMaxPhaseFileBytes));
  try {
    return PhaseFileParser(path).parse(in);
  } catch (const std::bad_alloc&) {
    throw Error(path, 0, 0, "not enough memory to hold this phase (about 30 times the file's size)");
  }
}

std::string phase_file_text(const ExchangePhase& phase) {
  std::string text = fmt::format("# Tessera exchange phase: {} transfers; SRC DST[,DST...] WORDS\ntiles {}\n",
                                 phase.transfers.size(), phase.tiles);
  for (const Transfer& transfer : phase.transfers) {
    fmt::format_to(std::back_inserter(text), "{} ", transfer.source);
    for (std::size_t i = 0; i < transfer.destinations.size(); ++i)
      fmt::format_to(std::back_inserter(text), "{}{}", i ? "," : "", transfer.destinations[i]);
    fmt::format_to(std::back_inserter(text), " {}\n", transfer.words);
  }
  return text;
}

std::string phase_file_name(std::size_t superstep) { return fmt::format("phase-{:05}.txt", superstep); }

void write_phase_file(const ExchangePhase& phase, const std::string& path) {
  write_file_atomically(path, phase_file_text(phase), "phase file");
}

void write_schedule_file(const Schedule& schedule, const std::string& path) {
  std::string text =
      "# Tessera exchange schedule: TRANSFER START WORDS (TRANSFER = 0-based transfer "
      "line of the phase file)\n";
  for (const Segment& segment : schedule.segments)
    fmt::format_to(std::back_inserter(text), "{} {} {}\n", segment.transfer, segment.start, segment.words);
  write_file_atomically(path, text, "schedule file");
}

}  // namespace tessera
