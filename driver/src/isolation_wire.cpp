// The plugin-host protocol: encodings of targets, phases, programs and options.
#include "isolation_protocol.hpp"

namespace tessera::isolation {

void put_target(Writer& out, const Target& t) {
  out.put_string(t.name);
  out.put_string(t.source_file);
  for (std::uint32_t v : {t.tiles, t.tiles_per_column, t.memory_element_bytes, t.alignment, t.worker_threads,
                          t.fp32_macs_per_cycle, t.fp16_macs_per_cycle, t.exchange_word_bytes, t.exchange_base_latency,
                          t.switch_cost, t.sync_cycles, t.exchange_phase_overhead})
    out.put(v);
  out.put(t.memory_bytes);
  out.put(t.interleaved_start);
  out.put(t.clock_hz);
  out.put(t.exchange_latency_per_column);
  out.put(t.host_bytes_per_cycle);
  out.put(static_cast<std::uint8_t>(t.multicast));
}

Target get_target(Reader& in) {
  Target t;
  t.name = in.get_string();
  t.source_file = in.get_string();
  for (std::uint32_t* field : {&t.tiles, &t.tiles_per_column, &t.memory_element_bytes, &t.alignment, &t.worker_threads,
                               &t.fp32_macs_per_cycle, &t.fp16_macs_per_cycle, &t.exchange_word_bytes,
                               &t.exchange_base_latency, &t.switch_cost, &t.sync_cycles, &t.exchange_phase_overhead})
    *field = in.get<std::uint32_t>();
  t.memory_bytes = in.get<std::uint64_t>();
  t.interleaved_start = in.get<std::uint64_t>();
  t.clock_hz = in.get<double>();
  t.exchange_latency_per_column = in.get<double>();
  t.host_bytes_per_cycle = in.get<double>();
  t.multicast = in.get<std::uint8_t>() != 0;
  return t;
}

void put_phase(Writer& out, const ExchangePhase& phase) {
  out.put(phase.tiles);
  out.put(static_cast<std::uint32_t>(phase.transfers.size()));
  for (const Transfer& transfer : phase.transfers) {
    out.put(transfer.source);
    out.put(transfer.words);
    out.put(transfer.source_address);
    out.put(static_cast<std::uint32_t>(transfer.destinations.size()));
    for (auto tile : transfer.destinations) out.put(tile);
    out.put(static_cast<std::uint32_t>(transfer.destination_addresses.size()));
    for (auto address : transfer.destination_addresses) out.put(address);
  }
}

ExchangePhase get_phase(Reader& in) {
  ExchangePhase phase;
  phase.tiles = in.get<std::uint32_t>();
  phase.transfers.resize(in.get_count(20));
  for (Transfer& transfer : phase.transfers) {
    transfer.source = in.get<std::uint32_t>();
    transfer.words = in.get<std::uint32_t>();
    transfer.source_address = in.get<std::uint32_t>();
    transfer.destinations.resize(in.get_count(4));
    for (auto& tile : transfer.destinations) tile = in.get<std::uint32_t>();
    transfer.destination_addresses.resize(in.get_count(4));
    for (auto& address : transfer.destination_addresses) address = in.get<std::uint32_t>();
  }
  return phase;
}

void put_ref(Writer& out, const BufferRef& ref) {
  out.put(ref.buffer);
  out.put(ref.word_offset);
}

BufferRef get_ref(Reader& in) {
  BufferRef ref;
  ref.buffer = in.get<std::uint32_t>();
  ref.word_offset = in.get<std::uint32_t>();
  return ref;
}

// The whole Program a cost model sees: buffers, supersteps (compute calls, copies, exchange
// phase, schedule) and host streams.
void put_program(Writer& out, const Program& program) {
  out.put(static_cast<std::uint32_t>(program.buffers.size()));
  for (const Buffer& b : program.buffers) {
    out.put_string(b.name);
    for (std::uint32_t v : {b.tile, b.bytes, b.alignment, b.first_use, b.last_use}) out.put(v);
    out.put(static_cast<std::uint8_t>(b.region));
    out.put(b.offset);
  }
  out.put(static_cast<std::uint32_t>(program.supersteps.size()));
  for (const Superstep& step : program.supersteps) {
    out.put_string(step.label);
    out.put(static_cast<std::uint32_t>(step.compute.size()));
    for (const CodeletCall& call : step.compute) {
      out.put(call.tile);
      out.put(static_cast<std::uint16_t>(call.codelet));
      out.put(static_cast<std::uint32_t>(call.operands.size()));
      for (const BufferRef& ref : call.operands) put_ref(out, ref);
      out.put(static_cast<std::uint32_t>(call.params.size()));
      for (auto param : call.params) out.put(param);
    }
    out.put(static_cast<std::uint32_t>(step.copies.size()));
    for (const Copy& copy : step.copies) {
      put_ref(out, copy.source);
      put_ref(out, copy.destination);
      out.put(copy.words);
    }
    put_phase(out, step.exchange);
    out.put(static_cast<std::uint32_t>(step.schedule.segments.size()));
    for (const Segment& segment : step.schedule.segments) {
      out.put(segment.transfer);
      out.put(segment.start);
      out.put(segment.words);
    }
  }
  out.put(static_cast<std::uint32_t>(program.streams.size()));
  for (const HostStream& stream : program.streams) {
    out.put_string(stream.tensor);
    out.put(static_cast<std::uint8_t>(stream.kind));
    out.put(stream.rows);
    out.put(stream.cols);
    out.put(static_cast<std::uint32_t>(stream.slices.size()));
    for (const HostSlice& slice : stream.slices) {
      put_ref(out, slice.destination);
      for (std::uint32_t v : {slice.row_begin, slice.rows, slice.col_begin, slice.cols}) out.put(v);
      out.put(static_cast<std::uint8_t>(slice.transposed ? 1 : 0));
    }
  }
}

Program get_program(Reader& in) {
  Program program;
  program.buffers.resize(in.get_count(33));
  for (Buffer& b : program.buffers) {
    b.name = in.get_string();
    for (std::uint32_t* v : {&b.tile, &b.bytes, &b.alignment, &b.first_use, &b.last_use}) *v = in.get<std::uint32_t>();
    b.region = static_cast<Region>(in.get<std::uint8_t>());
    b.offset = in.get<std::int64_t>();
  }
  program.supersteps.resize(in.get_count(24));
  for (Superstep& step : program.supersteps) {
    step.label = in.get_string();
    step.compute.resize(in.get_count(14));
    for (CodeletCall& call : step.compute) {
      call.tile = in.get<std::uint32_t>();
      call.codelet = static_cast<Codelet>(in.get<std::uint16_t>());
      call.operands.resize(in.get_count(8));
      for (BufferRef& ref : call.operands) ref = get_ref(in);
      call.params.resize(in.get_count(4));
      for (auto& param : call.params) param = in.get<std::uint32_t>();
    }
    step.copies.resize(in.get_count(20));
    for (Copy& copy : step.copies) {
      copy.source = get_ref(in);
      copy.destination = get_ref(in);
      copy.words = in.get<std::uint32_t>();
    }
    step.exchange = get_phase(in);
    step.schedule.segments.resize(in.get_count(16));
    for (Segment& segment : step.schedule.segments) {
      segment.transfer = in.get<std::uint32_t>();
      segment.start = in.get<std::uint64_t>();
      segment.words = in.get<std::uint32_t>();
    }
  }
  program.streams.resize(in.get_count(17));
  for (HostStream& stream : program.streams) {
    stream.tensor = in.get_string();
    stream.kind = static_cast<StreamKind>(in.get<std::uint8_t>());
    stream.rows = in.get<std::uint32_t>();
    stream.cols = in.get<std::uint32_t>();
    stream.slices.resize(in.get_count(25));
    for (HostSlice& slice : stream.slices) {
      slice.destination = get_ref(in);
      for (std::uint32_t* v : {&slice.row_begin, &slice.rows, &slice.col_begin, &slice.cols})
        *v = in.get<std::uint32_t>();
      slice.transposed = in.get<std::uint8_t>() != 0;
    }
  }
  return program;
}

void put_options(Writer& out, const Options& options) {
  out.put(static_cast<std::uint32_t>(options.values.size()));
  for (const auto& [name, value] : options.values) {
    out.put_string(name);
    out.put(static_cast<std::uint8_t>(value.index()));
    std::visit(
        [&](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) out.put_string(v);
          else if constexpr (std::is_same_v<std::decay_t<decltype(v)>, MapOption>) {
            out.put_string(v.yaml);
            out.put_string(v.file);
            out.put(v.first_line);
          } else if constexpr (std::is_same_v<std::decay_t<decltype(v)>, bool>) out.put(static_cast<std::uint8_t>(v));
          else out.put(v);
        },
        value);
  }
  // Where each was given, so the child's refusal of one names its place.
  out.put(static_cast<std::uint32_t>(options.places.size()));
  for (const auto& [name, place] : options.places) {
    out.put_string(name);
    out.put_string(place);
  }
}

Options get_options(Reader& in) {
  Options options;
  const auto count = in.get_count(6);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string name = in.get_string();
    switch (in.get<std::uint8_t>()) {
      case 0:
        options.values[name] = in.get<std::uint8_t>() != 0;
        break;
      case 1:
        options.values[name] = in.get<std::int64_t>();
        break;
      case 2:
        options.values[name] = in.get<double>();
        break;
      case 3:
        options.values[name] = in.get_string();
        break;
      case 4: {
        MapOption map;
        map.yaml = in.get_string();
        map.file = in.get_string();
        map.first_line = in.get<std::int64_t>();
        options.values[name] = std::move(map);
        break;
      }
      default:
        throw ProtocolError("option '" + name + "' has an unknown type tag");
    }
  }
  const auto places = in.get_count(8);
  for (std::uint32_t i = 0; i < places; ++i) {
    std::string name = in.get_string();
    options.places[name] = in.get_string();
  }
  return options;
}

}  // namespace tessera::isolation
