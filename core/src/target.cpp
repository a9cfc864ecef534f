// Loads and checks target descriptions (configs/targets/*.yaml).
#include "tessera/target.hpp"

#include <fmt/format.h>
#include <xxhash.h>

#include <cmath>
#include <cstdlib>

#include "tessera/diagnostic.hpp"
#include "tessera/strict_yaml.hpp"

namespace tessera {

namespace {
// Bounds that keep every figure derived from a float inside the integers it is cast to.
constexpr double kMaxLatencyPerColumn = 1000;  // 65536 columns x 1000 cycles < 2^32
constexpr double kMaxClockHz = 1e12;
constexpr double kMaxHostBytesPerCycle = 1e6;
constexpr std::uint32_t kMaxBaseLatency = 1'000'000;
}  // namespace

std::uint32_t Target::latency(std::uint32_t source, std::uint32_t destination) const {
  const std::int64_t distance =
      std::llabs(static_cast<std::int64_t>(column_of(source)) - static_cast<std::int64_t>(column_of(destination)));
  return exchange_base_latency + static_cast<std::uint32_t>(std::lround(exchange_latency_per_column * distance));
}

std::uint64_t Target::hash() const {
  // Every field that changes generated code or timing, in a fixed textual form.
  const std::string canonical =
      fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{:.9g}|{}|{}|{}|{}|{:.9g}|{}|{}|{}|{}|{:.9g}|{}|{}|{}|{}|{}|{}", name, tiles,
                  tiles_per_column, memory_bytes, memory_element_bytes, interleaved_start, alignment, worker_threads,
                  clock_hz, fp32_macs_per_cycle, fp16_macs_per_cycle, exchange_word_bytes, exchange_base_latency,
                  exchange_latency_per_column, switch_cost, multicast, sync_cycles, exchange_phase_overhead,
                  host_bytes_per_cycle, amp_fp32_input_channels, amp_fp32_output_channels, amp_fp16_input_channels,
                  amp_fp16_output_channels, load_bytes_per_cycle, host_call_latency_cycles);
  return XXH64(canonical.data(), canonical.size(), 0);
}

std::string check_target(const Target& t) {
  if (t.tiles == 0 || t.tiles > 65536) return "tiles must be in 1..65536";
  if (t.tiles_per_column == 0) return "tiles_per_column must be positive";
  if (t.memory_bytes == 0 || t.memory_bytes > (1ull << 32)) return "bytes_per_tile must be in 1..4 GiB";
  if (t.interleaved_start > t.memory_bytes) return "interleaved_start is past the end of tile memory";
  if (t.alignment == 0 || (t.alignment & (t.alignment - 1)) != 0 || t.alignment % 4 != 0)
    return "alignment must be a power of two and a multiple of 4";
  if (t.worker_threads == 0 || t.fp32_macs_per_cycle == 0 || t.fp16_macs_per_cycle == 0 || !(t.clock_hz > 0))
    return "compute figures must be positive";
  for (std::uint32_t value : {t.amp_fp32_input_channels, t.amp_fp32_output_channels, t.amp_fp16_input_channels,
                              t.amp_fp16_output_channels, t.load_bytes_per_cycle})
    if (value == 0 || value > 4096) return "AMP channels and load bytes per cycle must be in 1..4096";
  if ((t.amp_fp32_input_channels * t.amp_fp32_output_channels) % t.fp32_macs_per_cycle != 0 ||
      (t.amp_fp16_input_channels * t.amp_fp16_output_channels) % t.fp16_macs_per_cycle != 0)
    return "amp input_channels x output_channels must be a multiple of the MACs per cycle of the same type";
  if (t.exchange_word_bytes != 4) return "word_bytes must be 4 (32-bit words)";
  // Latencies are cast to 32 bits: the largest column distance times this must stay far below 2^32.
  if (!(t.exchange_latency_per_column >= 0 && t.exchange_latency_per_column <= kMaxLatencyPerColumn))
    return fmt::format("latency_per_column must be in 0..{}", kMaxLatencyPerColumn);
  if (t.exchange_base_latency > kMaxBaseLatency) return fmt::format("base_latency must be at most {}", kMaxBaseLatency);
  if (!(t.clock_hz <= kMaxClockHz)) return fmt::format("clock_hz must be at most {:g}", kMaxClockHz);
  if (!(t.host_bytes_per_cycle > 0 && t.host_bytes_per_cycle <= kMaxHostBytesPerCycle))
    return fmt::format("host bytes_per_cycle must be above 0 and at most {}", kMaxHostBytesPerCycle);
  if (t.host_call_latency_cycles > 100'000'000) return "call_latency_cycles must be at most 100000000";
  return "";
}

Target load_target(const std::string& path) {
  using namespace yaml;
  YAML::Node root = load_file(path);
  require_map(path, root, "a target");
  check_keys(path, root, {"name", "tiles", "tiles_per_column", "memory", "compute", "exchange", "sync_cycles", "host"});
  Target t;
  t.source_file = path;
  t.name = get_name(path, root, "name");
  t.tiles = get_uint32(path, root, "tiles");
  t.tiles_per_column = get_uint32_or(path, root, "tiles_per_column", 1);
  t.sync_cycles = get_uint32_or(path, root, "sync_cycles", t.sync_cycles);
  if (t.tiles == 0 || t.tiles > 65536) fail(path, root["tiles"], "'tiles' must be in 1..65536");
  if (t.tiles_per_column == 0) fail(path, root["tiles_per_column"], "'tiles_per_column' must be positive");

  YAML::Node memory = root["memory"];
  if (!memory.IsDefined()) fail(path, root, "missing required key 'memory'");
  require_map(path, memory, "'memory'");
  check_keys(path, memory, {"bytes_per_tile", "element_bytes", "interleaved_start", "alignment"});
  t.memory_bytes = get_uint(path, memory, "bytes_per_tile");
  t.memory_element_bytes = get_uint32_or(path, memory, "element_bytes", t.memory_element_bytes);
  t.interleaved_start = get_uint_or(path, memory, "interleaved_start", t.memory_bytes);
  t.alignment = get_uint32_or(path, memory, "alignment", t.alignment);
  if (t.memory_bytes == 0 || t.memory_bytes > (1ull << 32))
    fail(path, memory["bytes_per_tile"], "'bytes_per_tile' must be in 1..4 GiB");
  if (t.interleaved_start > t.memory_bytes)
    fail(path, memory["interleaved_start"], "'interleaved_start' is past the end of tile memory");
  if (t.alignment == 0 || (t.alignment & (t.alignment - 1)) != 0 || t.alignment % 4 != 0)
    fail(path, memory["alignment"], "'alignment' must be a power of two and a multiple of 4");

  if (YAML::Node compute = root["compute"]; compute.IsDefined()) {
    require_map(path, compute, "'compute'");
    check_keys(
        path, compute,
        {"worker_threads", "clock_hz", "fp32_macs_per_cycle", "fp16_macs_per_cycle", "amp_fp32_input_channels",
         "amp_fp32_output_channels", "amp_fp16_input_channels", "amp_fp16_output_channels", "load_bytes_per_cycle"});
    t.worker_threads = get_uint32_or(path, compute, "worker_threads", t.worker_threads);
    t.clock_hz = get_number_or(path, compute, "clock_hz", t.clock_hz);
    t.fp32_macs_per_cycle = get_uint32_or(path, compute, "fp32_macs_per_cycle", t.fp32_macs_per_cycle);
    t.fp16_macs_per_cycle = get_uint32_or(path, compute, "fp16_macs_per_cycle", t.fp16_macs_per_cycle);
    const auto small = [&](const char* key, std::uint32_t fallback) {
      const std::uint32_t value = get_uint32_or(path, compute, key, fallback);
      if (value == 0 || value > 4096) fail(path, compute[key], fmt::format("'{}' must be in 1..4096", key));
      return value;
    };
    t.amp_fp32_input_channels = small("amp_fp32_input_channels", t.amp_fp32_input_channels);
    t.amp_fp32_output_channels = small("amp_fp32_output_channels", t.amp_fp32_output_channels);
    t.amp_fp16_input_channels = small("amp_fp16_input_channels", t.amp_fp16_input_channels);
    t.amp_fp16_output_channels = small("amp_fp16_output_channels", t.amp_fp16_output_channels);
    t.load_bytes_per_cycle = small("load_bytes_per_cycle", t.load_bytes_per_cycle);
    if (t.worker_threads == 0 || t.fp32_macs_per_cycle == 0 || t.fp16_macs_per_cycle == 0 || !(t.clock_hz > 0))
      fail(path, compute, "compute figures must be positive");
    if (!(t.clock_hz <= kMaxClockHz))
      fail(path, compute["clock_hz"], fmt::format("'clock_hz' must be at most {:g}", kMaxClockHz));
    // A pass's MACs per row over the peak rate is the worker cycles per row: it must be whole.
    if ((t.amp_fp32_input_channels * t.amp_fp32_output_channels) % t.fp32_macs_per_cycle != 0 ||
        (t.amp_fp16_input_channels * t.amp_fp16_output_channels) % t.fp16_macs_per_cycle != 0)
      fail(path, compute,
           "amp input_channels x output_channels must be a multiple of the MACs per cycle of the same type");
  }
  if (YAML::Node exchange = root["exchange"]; exchange.IsDefined()) {
    require_map(path, exchange, "'exchange'");
    check_keys(path, exchange,
               {"word_bytes", "base_latency", "latency_per_column", "switch_cost", "multicast", "phase_overhead"});
    t.exchange_word_bytes = get_uint32_or(path, exchange, "word_bytes", 4);
    t.exchange_base_latency = get_uint32_or(path, exchange, "base_latency", 0);
    t.exchange_latency_per_column = get_number_or(path, exchange, "latency_per_column", 0);
    t.switch_cost = get_uint32_or(path, exchange, "switch_cost", 0);
    t.multicast = get_bool_or(path, exchange, "multicast", false);
    t.exchange_phase_overhead = get_uint32_or(path, exchange, "phase_overhead", t.exchange_phase_overhead);
    if (t.exchange_word_bytes != 4) fail(path, exchange["word_bytes"], "'word_bytes' must be 4 (32-bit words)");
    if (t.exchange_base_latency > kMaxBaseLatency)
      fail(path, exchange["base_latency"], fmt::format("'base_latency' must be at most {}", kMaxBaseLatency));
    if (!(t.exchange_latency_per_column >= 0 && t.exchange_latency_per_column <= kMaxLatencyPerColumn))
      fail(path, exchange["latency_per_column"],
           fmt::format("'latency_per_column' must be in 0..{} (cycles per column of distance)", kMaxLatencyPerColumn));
  }
  if (YAML::Node host = root["host"]; host.IsDefined()) {
    require_map(path, host, "'host'");
    check_keys(path, host, {"bytes_per_cycle", "call_latency_cycles"});
    t.host_bytes_per_cycle = get_number_or(path, host, "bytes_per_cycle", t.host_bytes_per_cycle);
    const std::uint64_t latency = get_uint_or(path, host, "call_latency_cycles", t.host_call_latency_cycles);
    if (latency > 100'000'000)
      fail(path, host["call_latency_cycles"], "'call_latency_cycles' must be at most 100000000");
    t.host_call_latency_cycles = static_cast<std::uint32_t>(latency);
    if (!(t.host_bytes_per_cycle > 0 && t.host_bytes_per_cycle <= kMaxHostBytesPerCycle))
      fail(path, host["bytes_per_cycle"],
           fmt::format("'bytes_per_cycle' must be above 0 and at most {}", kMaxHostBytesPerCycle));
  }
  return t;
}

}  // namespace tessera
