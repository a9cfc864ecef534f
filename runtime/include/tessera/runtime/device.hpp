// The device interface a runtime drives: attach, load a package, initialise weights, run.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tessera {
struct Package;
}

namespace tessera::runtime {

/// Host-side tensors by name, row-major float32 (1-D tensors are one row).
using HostTensors = std::map<std::string, std::vector<float>>;

/// Simulated device cycles of one run (host streaming not included).
struct CycleCounts {
  std::uint64_t compute = 0;   ///< sum over supersteps of the slowest tile's codelet cycles
  std::uint64_t exchange = 0;  ///< sum over phases that send: horizon + phase overhead
  std::uint64_t sync = 0;      ///< one barrier per superstep
  std::uint64_t total() const { return compute + exchange + sync; }
};

/// What one superstep cost, per tile where it differs between tiles.
struct SuperstepProfile {
  std::string label;
  std::vector<std::uint64_t> tile_compute_cycles;  ///< one per tile
  std::uint64_t compute_cycles = 0;                ///< max of tile_compute_cycles
  std::uint32_t busiest_tile = 0;                  ///< a tile reaching compute_cycles
  std::uint64_t sync_cycles = 0;
  std::uint64_t exchange_horizon = 0;  ///< last arrival (or last send) cycle + 1; 0 if no sends
  std::uint64_t exchange_cycles = 0;   ///< horizon + phase overhead when any tile sends
  std::uint64_t words_sent = 0;        ///< words leaving tiles (a multicast word counts once)
  std::uint64_t words_received = 0;    ///< words stored by receivers
  std::uint64_t words_unreceived = 0;  ///< sent words no tile listened to
};

struct ExecutionProfile {
  std::string target_name;
  std::uint32_t tiles = 0;
  double clock_hz = 0;
  std::vector<SuperstepProfile> supersteps;
  CycleCounts cycles;
  /// Number of (tile, superstep) compute records.
  std::uint64_t samples() const;
};

/// A device running one package at a time. The public calls check the order
/// (attach, load, initialize, then run any number of times) and log; backends implement
/// the protected hooks. Errors a package can cause are tessera::Error naming the place.
class Device {
public:
  virtual ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  /// The backend's name, e.g. "sim".
  virtual std::string backend() const = 0;

  void attach();
  /// Checks and loads the package's tile images; the package need not outlive the call.
  void load(const Package& package);
  /// The same, consuming the tile images' supersteps (their codelet calls and exchange lists,
  /// the bulk of a large package) so the program is not held twice while it is decoded. Their
  /// buffer tables, the graph, the streams and the target stay; on an error, some supersteps
  /// may be gone.
  void load_releasing(Package& package);
  /// Host-to-device streams of weight tensors (by tensor name).
  void initialize(const HostTensors& weights);
  /// Streams the inputs, executes every superstep, and streams the outputs back.
  HostTensors run(const HostTensors& inputs);
  /// The profile of the latest run (empty before the first run).
  const ExecutionProfile& profile() const { return profile_; }

  bool attached() const { return state_ >= State::attached; }

protected:
  Device() = default;
  virtual void attach_impl() = 0;
  virtual void load_impl(const Package& package) = 0;
  /// Default: load_impl, then the supersteps are dropped.
  virtual void load_releasing_impl(Package& package);
  virtual void initialize_impl(const HostTensors& weights) = 0;
  virtual HostTensors run_impl(const HostTensors& inputs, ExecutionProfile& profile) = 0;

private:
  enum class State { detached, attached, loaded, initialized };
  State state_ = State::detached;
  ExecutionProfile profile_;
};

/// Creates a device of the named backend ("sim"); throws Error listing the backends.
std::unique_ptr<Device> open_device(const std::string& backend);

}  // namespace tessera::runtime
