// The Device base class: call-order checks around the backend hooks, and the backend factory.
#include "tessera/runtime/device.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "log.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"
#include "tessera/package.hpp"
#include "tessera/runtime/sim_device.hpp"

namespace tessera::runtime {

namespace detail {
spdlog::logger& logger() { return *tessera::logger("tessera.runtime"); }
}  // namespace detail

std::uint64_t ExecutionProfile::samples() const {
  std::uint64_t total = 0;
  for (const SuperstepProfile& step : supersteps) total += step.tile_compute_cycles.size();
  return total;
}

Device::~Device() = default;

// Calling out of order is a bug in the driver, not something a package or user causes.
void Device::attach() {
  if (state_ != State::detached) return;
  attach_impl();
  state_ = State::attached;
}

void Device::load(const Package& package) {
  if (state_ == State::detached) throw std::logic_error("Device::load before attach");
  load_impl(package);
  state_ = State::loaded;
  profile_ = {};
}

void Device::load_releasing(Package& package) {
  if (state_ == State::detached) throw std::logic_error("Device::load before attach");
  load_releasing_impl(package);
  state_ = State::loaded;
  profile_ = {};
}

void Device::load_releasing_impl(Package& package) {
  load_impl(package);
  for (TileImage& image : package.tiles) std::vector<TileSuperstep>().swap(image.supersteps);
}

void Device::initialize(const HostTensors& weights) {
  if (state_ < State::loaded) throw std::logic_error("Device::initialize before load");
  initialize_impl(weights);
  state_ = State::initialized;
}

HostTensors Device::run(const HostTensors& inputs) {
  if (state_ < State::initialized) throw std::logic_error("Device::run before initialize");
  ExecutionProfile profile;
  HostTensors outputs = run_impl(inputs, profile);
  profile_ = std::move(profile);
  return outputs;
}

std::unique_ptr<Device> open_device(const std::string& backend) {
  if (backend == "sim") return std::make_unique<SimDevice>();
  throw Error(fmt::format("unknown device backend '{}'; available backends: sim", backend));
}

}  // namespace tessera::runtime
