// The machine a program is compiled for, loaded from configs/targets/*.yaml.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

/// A tile-based BSP accelerator. All cycle figures are tile clock cycles.
struct Target {
  std::string name;
  std::string source_file;  ///< the YAML it was loaded from
  std::uint32_t tiles = 0;
  std::uint32_t tiles_per_column = 1;  ///< latency grows with the distance between columns
  std::uint64_t memory_bytes = 0;      ///< SRAM per tile
  std::uint32_t memory_element_bytes = 16384;
  std::uint64_t interleaved_start = 0;  ///< byte offset where the interleaved region begins
  std::uint32_t alignment = 8;          ///< minimum buffer alignment in bytes
  std::uint32_t worker_threads = 6;
  double clock_hz = 1.325e9;
  std::uint32_t fp32_macs_per_cycle = 16;  ///< AMP peak, float32 inputs and partials
  std::uint32_t fp16_macs_per_cycle = 32;  ///< AMP peak, half inputs with float32 partials
  /// One AMP pass multiplies input_channels of k by output_channels of n for every field row.
  std::uint32_t amp_fp32_input_channels = 8, amp_fp32_output_channels = 16;
  std::uint32_t amp_fp16_input_channels = 16, amp_fp16_output_channels = 8;
  std::uint32_t load_bytes_per_cycle = 16;  ///< tile memory to the AMP (ld128) per cycle
  std::uint32_t exchange_word_bytes = 4;    ///< one word sent per tile per cycle
  std::uint32_t exchange_base_latency = 0;  ///< cycles from send to arrival, same column
  double exchange_latency_per_column = 0;   ///< extra cycles per column of distance
  std::uint32_t switch_cost = 0;            ///< idle cycles a receiver needs to change source
  bool multicast = false;                   ///< one send may arrive at several receivers
  std::uint32_t sync_cycles = 90;           ///< one barrier
  std::uint32_t exchange_phase_overhead = 100;
  double host_bytes_per_cycle = 16;            ///< host link bandwidth
  std::uint32_t host_call_latency_cycles = 0;  ///< fixed cost of one host exchange call

  std::uint32_t column_of(std::uint32_t tile) const { return tile / tiles_per_column; }
  /// Cycles from a word leaving `source` to it arriving at `destination`.
  std::uint32_t latency(std::uint32_t source, std::uint32_t destination) const;
  /// Stable 64-bit hash of every field that affects code generation.
  std::uint64_t hash() const;
};

/// Loads and checks a target YAML; throws Error naming the file and the place.
Target load_target(const std::string& path);

/// The first rule a target description breaks (what load_target checks: positive counts,
/// memory of 1 byte to 4 GiB, power-of-two alignment, AMP shapes, 32-bit exchange words...),
/// or "" when it is consistent. For descriptions read back from packages and state files.
std::string check_target(const Target& target);

}  // namespace tessera
