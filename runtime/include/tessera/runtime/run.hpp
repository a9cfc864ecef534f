// run_package: read a package, lock and load the device, stream, run, check numerics, profile.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/runtime/device.hpp"
#include "tessera/runtime/reference.hpp"

namespace tessera {
struct Package;
}

namespace tessera::runtime {

struct RunOptions {
  std::string package_path;  ///< the .tpkg to run (run_package(options))
  std::string verify_key;    ///< key file: refuse a package not signed with it
  std::string backend = "sim";
  std::string lock_path;              ///< empty: default_lock_path()
  std::uint64_t lock_timeout_ms = 0;  ///< 0: wait for the device as long as it takes
  /// The most memory the run may take (tiles' buffers and host tensors), checked before any is
  /// allocated; 0: the host's physical memory, or less under ulimit -v / -d.
  std::uint64_t host_memory_limit = 0;
  /// When set, the model's weights: called once the device has loaded the package (and a
  /// releasing run has freed its tile images), instead of taking `weights`, so that a large
  /// model's weights are not read while its program is held twice.
  std::function<HostTensors()> read_weights;
  std::string profile_path;                 ///< empty: no profile file
  std::string trace_path;                   ///< empty: no Chrome trace
  bool check_numerics = true;               ///< run the float64 reference and compare
  double atol = kDefaultAbsoluteTolerance;  ///< see reference.hpp for why these values
  double rtol = kDefaultRelativeTolerance;
  /// Values of the model's weights by name (an imported model's, read from its file). Empty:
  /// the weights are generated from the model's seed (YAML models).
  HostTensors weights;
  /// Inputs given by name (`--input`); the others are generated from the model's seed.
  HostTensors inputs;
  /// Expected outputs by name (`--expect`), compared element by element with the device's.
  HostTensors expected;
  double expect_atol = kDefaultExpectAbsoluteTolerance;
  double expect_rtol = kDefaultExpectRelativeTolerance;
};

struct RunResult {
  CycleCounts cycles;
  std::uint64_t host_initialize_bytes = 0;
  std::uint64_t host_run_bytes = 0;
  std::uint64_t host_run_cycles = 0;  ///< run's streams over the host link (bandwidth and call latency)
  /// One run call as the host sees it: its input and output streams over the host link, and
  /// the device's supersteps (the two never overlap: inputs land before superstep 0).
  std::uint64_t end_to_end_cycles() const { return cycles.total() + host_run_cycles; }
  NumericalReport numerics;  ///< empty when check_numerics is false
  bool numerics_checked = false;
  std::uint32_t tiles = 0;
  std::uint64_t profile_samples = 0;
  std::string profile_path;  ///< where the profile was written, or empty
  std::uint64_t words_exchanged = 0;
  std::uint64_t words_unreceived = 0;
  /// What the device holds: per tile the union of its buffer-table entries (device_bytes), and
  /// the float32 values of the weights, inputs and outputs the host holds (host_tensor_bytes).
  std::uint64_t device_bytes = 0;
  std::uint64_t host_tensor_bytes = 0;
  /// The program's own tile memory: code, vertex states and exchange descriptors (tile_support_bytes).
  std::uint64_t device_support_bytes = 0;
  HostTensors outputs;

  ExpectationReport expectation;  ///< against options.expected, when given
  bool expectation_checked = false;
  std::vector<std::string> generated_inputs;  ///< inputs no value was given for (seeded values)

  bool passed() const { return (!numerics_checked || numerics.passed) && (!expectation_checked || expectation.passed); }
};

/// Reads options.package_path and runs it (see the other overload). Errors in the
/// package name its path.
RunResult run_package(const RunOptions& options);

/// The first half of that: checks that no output file (profile, trace, lock) is the package,
/// and reads options.package_path, logging it.
Package read_package_to_run(const RunOptions& options);

/// Runs an in-memory package: takes the device lock, opens and attaches the device,
/// loads the package, streams weights (initialize) and inputs (run), executes, reads the
/// outputs, compares them with the float64 reference, writes the profile. Logs each step
/// through the "tessera.runtime" logger. Does not print the summary lines.
RunResult run_package(const Package& package, const RunOptions& options,
                      const std::string& package_name = "<in-memory package>");

/// The same, freeing `package`'s tile images once the device has loaded them (kept when
/// options.trace_path asks for a trace, which reads them): the device then holds the only copy
/// of the program. The graph, streams and target stay. options.weights are moved into the
/// host's tensors (left empty), not copied.
RunResult run_package_releasing_tiles(Package& package, RunOptions& options, const std::string& package_name);

}  // namespace tessera::runtime
