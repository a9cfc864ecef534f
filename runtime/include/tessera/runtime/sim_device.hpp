// The simulator backend: executes a package's tile images with real bytes and exact exchange timing.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/runtime/device.hpp"

namespace tessera::runtime {

/// Runs a package on simulated tiles. `load` checks the whole package against the
/// target it carries (buffer tables, operand bounds and aliasing, every exchange word's
/// sender, cycle and receiver, receive-mux switch cost, host slices) and throws
/// tessera::Error naming the superstep, tile and cycle of the first problem. `run`
/// computes codelets natively on float32 data and moves every exchange word.
class SimDevice final : public Device {
public:
  SimDevice();
  ~SimDevice() override;
  std::string backend() const override { return "sim"; }

  /// Bytes of simulated memory held for `tile`: those its buffer-table entries cover (to
  /// whole words), not the gaps between them. An address outside them is refused at load.
  std::uint64_t tile_memory_bytes(std::uint32_t tile) const;
  /// Sum of tile_memory_bytes over all tiles.
  std::uint64_t allocated_bytes() const;
  /// Reads `words` float32 values from byte `address` of `tile` (tests and tools).
  std::vector<float> read_words(std::uint32_t tile, std::uint32_t address, std::uint32_t words) const;

protected:
  void attach_impl() override;
  void load_impl(const Package& package) override;
  /// Frees each superstep's calls and exchange lists once decoded, returning their pages.
  void load_releasing_impl(Package& package) override;
  void initialize_impl(const HostTensors& weights) override;
  HostTensors run_impl(const HostTensors& inputs, ExecutionProfile& profile) override;

private:
  /// Loads `package`; when `releasing` (the same package) is given, frees each superstep once decoded.
  void load_package(const Package& package, Package* releasing);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::runtime
