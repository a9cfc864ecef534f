// Names for program enums and the verifier run after every pass.
#include "tessera/program.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "tessera/diagnostic.hpp"
#include "tessera/target.hpp"

namespace tessera {

const char* region_name(Region region) { return region == Region::interleaved ? "interleaved" : "standard"; }

const char* stream_kind_name(StreamKind kind) {
  switch (kind) {
    case StreamKind::weight:
      return "weight";
    case StreamKind::input:
      return "input";
    case StreamKind::output:
      return "output";
  }
  return "?";
}

namespace {

std::string check_buffers(const Program& program, const Target& target) {
  const std::size_t steps = program.supersteps.size();
  bool any_placed = false, any_unplaced = false;
  for (std::size_t i = 0; i < program.buffers.size(); ++i) {
    const Buffer& b = program.buffers[i];
    // Named only on failure: formatting a name per buffer would dominate the check.
    auto who = [&] { return fmt::format("buffer {} '{}' on tile {}", i, b.name, b.tile); };
    if (b.tile >= target.tiles) return who() + ": tile out of range";
    if (b.bytes == 0 || b.bytes % 4 != 0) return who() + ": size must be a positive multiple of 4 bytes";
    if (b.alignment == 0 || (b.alignment & (b.alignment - 1)) != 0) return who() + ": alignment is not a power of two";
    if (b.first_use > b.last_use || (steps > 0 && b.last_use >= steps))
      return who() + fmt::format(": live range {}..{} is outside the {} supersteps", b.first_use, b.last_use, steps);
    if (b.offset == kUnplaced) {
      any_unplaced = true;
      continue;
    }
    any_placed = true;
    const std::uint64_t begin = static_cast<std::uint64_t>(b.offset), end = begin + b.bytes;
    if (b.offset < 0 || begin % b.alignment != 0)
      return who() + fmt::format(": offset {} is not aligned to {}", b.offset, b.alignment);
    const std::uint64_t low = b.region == Region::interleaved ? target.interleaved_start : 0;
    const std::uint64_t high = b.region == Region::interleaved ? target.memory_bytes : target.interleaved_start;
    if (begin < low || end > high)
      return who() + fmt::format(": bytes {}..{} lie outside its {} region {}..{}", begin, end, region_name(b.region),
                                 low, high);
  }
  if (any_placed && any_unplaced) return "some buffers are placed and others are not";
  if (!any_placed) return "";
  // Buffers live at the same time must not share bytes: sweep each tile by offset.
  std::vector<std::uint32_t> order(program.buffers.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) {
    const Buffer &x = program.buffers[a], &y = program.buffers[b];
    return std::tie(x.tile, x.offset) < std::tie(y.tile, y.offset);
  });
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Buffer& a = program.buffers[order[i]];
    for (std::size_t j = i + 1; j < order.size(); ++j) {
      const Buffer& b = program.buffers[order[j]];
      if (b.tile != a.tile || b.offset >= a.offset + static_cast<std::int64_t>(a.bytes)) break;
      if (a.first_use <= b.last_use && b.first_use <= a.last_use)
        return fmt::format("buffers '{}' and '{}' on tile {} overlap in memory while both live", a.name, b.name,
                           a.tile);
    }
  }
  return "";
}

/// `who()` names the reference; called only on failure.
template <typename Who>
std::string check_ref(const Program& program, const BufferRef& ref, std::uint64_t words, const Who& who) {
  if (ref.buffer >= program.buffers.size()) return who() + fmt::format(": buffer {} does not exist", ref.buffer);
  const Buffer& b = program.buffers[ref.buffer];
  if (static_cast<std::uint64_t>(ref.word_offset) + words > b.bytes / 4)
    return who() + fmt::format(": words {}..{} overrun buffer '{}' of {} words", ref.word_offset,
                               ref.word_offset + words, b.name, b.bytes / 4);
  return "";
}

}  // namespace

std::string verify_program(const Program& program, const Target& target) {
  if (auto problem = check_buffers(program, target); !problem.empty()) return problem;
  for (std::size_t s = 0; s < program.supersteps.size(); ++s) {
    const Superstep& step = program.supersteps[s];
    for (std::size_t c = 0; c < step.compute.size(); ++c) {
      const CodeletCall& call = step.compute[c];
      auto who = [&] {
        return fmt::format("superstep {} call {} ({} on tile {})", s, c, codelet_name(call.codelet), call.tile);
      };
      if (call.tile >= target.tiles) return who() + ": tile out of range";
      if (call.operands.size() != codelet_operand_count(call.codelet) ||
          call.params.size() != codelet_param_count(call.codelet))
        return who() + fmt::format(": needs {} operands and {} params, has {} and {}",
                                   codelet_operand_count(call.codelet), codelet_param_count(call.codelet),
                                   call.operands.size(), call.params.size());
      for (std::uint32_t o = 0; o < call.operands.size(); ++o) {
        const BufferRef& ref = call.operands[o];
        auto words = codelet_operand_words(call.codelet, call.params, o);
        if (auto problem = check_ref(program, ref, words, [&] { return who() + fmt::format(" operand {}", o); });
            !problem.empty())
          return problem;
        const Buffer& b = program.buffers[ref.buffer];
        if (b.tile != call.tile)
          return who() + fmt::format(": operand {} is buffer '{}' on tile {}", o, b.name, b.tile);
        if (s < b.first_use || s > b.last_use)
          return who() + fmt::format(": operand {} buffer '{}' is not live in superstep {}", o, b.name, s);
      }
    }
    for (std::size_t c = 0; c < step.copies.size(); ++c) {
      const Copy& copy = step.copies[c];
      auto who = [&] { return fmt::format("superstep {} copy {}", s, c); };
      if (copy.words == 0) return who() + ": copies no words";
      if (auto p = check_ref(program, copy.source, copy.words, [&] { return who() + " source"; }); !p.empty()) return p;
      if (auto p = check_ref(program, copy.destination, copy.words, [&] { return who() + " destination"; }); !p.empty())
        return p;
      if (program.buffers[copy.source.buffer].tile == program.buffers[copy.destination.buffer].tile)
        return who() + ": source and destination are on the same tile (use a copy codelet)";
    }
    for (std::size_t t = 0; t < step.exchange.transfers.size(); ++t) {
      const Transfer& transfer = step.exchange.transfers[t];
      auto who = [&] { return fmt::format("superstep {} transfer {}", s, t); };
      if (transfer.source >= target.tiles || transfer.destinations.empty() ||
          transfer.destination_addresses.size() != transfer.destinations.size())
        return who() + ": bad source or destinations";
      for (auto d : transfer.destinations)
        if (d >= target.tiles || d == transfer.source) return who() + fmt::format(": bad destination tile {}", d);
    }
  }
  for (const auto& stream : program.streams) {
    for (std::size_t i = 0; i < stream.slices.size(); ++i) {
      const HostSlice& slice = stream.slices[i];
      auto who = [&] { return fmt::format("stream '{}' slice {}", stream.tensor, i); };
      if (slice.row_begin + slice.rows > stream.rows || slice.col_begin + slice.cols > stream.cols)
        return who() + ": block lies outside the tensor";
      if (slice.transposed && stream.kind == StreamKind::output)
        return who() + ": an output slice cannot be transposed";
      if (auto p = check_ref(program, slice.destination,
                             packed_words(std::uint64_t(slice.rows) * slice.cols, stream.dtype), who);
          !p.empty())
        return p;
    }
  }
  return "";
}

}  // namespace tessera

namespace tessera {

std::uint64_t peak_live_bytes(const Program& program) {
  struct Change {
    std::uint32_t tile;
    std::uint64_t superstep;
    std::int64_t bytes;
  };
  std::vector<Change> changes;
  changes.reserve(program.buffers.size() * 2);
  for (std::size_t index = 0; index < program.buffers.size(); ++index) {
    const Buffer& buffer = program.buffers[index];
    if (buffer.last_use < buffer.first_use)
      throw Error(fmt::format("buffer {} ('{}') is last used in superstep {} before its first use in {}", index,
                              buffer.name, buffer.last_use, buffer.first_use));
    const std::uint64_t alignment = std::max<std::uint32_t>(buffer.alignment, 1);
    const auto bytes = static_cast<std::int64_t>((buffer.bytes + alignment - 1) / alignment * alignment);
    changes.push_back({buffer.tile, buffer.first_use, bytes});
    changes.push_back({buffer.tile, std::uint64_t{buffer.last_use} + 1, -bytes});
  }
  // Within one (tile, superstep) all frees and allocations apply before the peak is read.
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    return a.tile != b.tile ? a.tile < b.tile : a.superstep < b.superstep;
  });
  std::int64_t peak = 0, live = 0;
  for (std::size_t i = 0; i < changes.size(); ++i) {
    if (i > 0 && changes[i].tile != changes[i - 1].tile) live = 0;
    live += changes[i].bytes;
    const bool step_ends = i + 1 == changes.size() || changes[i + 1].tile != changes[i].tile ||
                           changes[i + 1].superstep != changes[i].superstep;
    if (step_ends) peak = std::max(peak, live);
  }
  return static_cast<std::uint64_t>(peak);
}

std::vector<std::uint64_t> call_support_bytes(const Program& program, std::uint32_t tiles) {
  static_assert(kCodeletCount <= 32, "codelets_run holds one bit per codelet");
  std::vector<std::uint64_t> bytes(tiles, 0);
  std::vector<std::uint32_t> codelets_run(tiles, 0);  // one bit per codelet id: its code is held once
  for (const Superstep& step : program.supersteps)
    for (const CodeletCall& call : step.compute) {
      if (call.tile >= tiles) continue;
      const std::uint32_t bit = 1u << static_cast<std::uint32_t>(call.codelet);
      if (!(codelets_run[call.tile] & bit)) bytes[call.tile] += codelet_code_bytes(call.codelet);
      codelets_run[call.tile] |= bit;
      bytes[call.tile] += vertex_state_bytes(call.codelet);
    }
  return bytes;
}

std::vector<std::uint64_t> copy_descriptor_bytes(const Program& program, std::uint32_t tiles) {
  std::vector<std::uint64_t> bytes(tiles, 0);
  for (const Superstep& step : program.supersteps)
    for (const Copy& copy : step.copies) {
      if (copy.source.buffer >= program.buffers.size() || copy.destination.buffer >= program.buffers.size()) continue;
      const std::uint32_t source = program.buffers[copy.source.buffer].tile;
      const std::uint32_t destination = program.buffers[copy.destination.buffer].tile;
      if (source < tiles) bytes[source] += kSendDescriptorBytes;
      if (destination < tiles) bytes[destination] += kReceiveDescriptorBytes;
    }
  return bytes;
}

}  // namespace tessera
