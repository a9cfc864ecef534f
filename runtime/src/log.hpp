// The runtime's spdlog logger, "tessera.runtime" (private to the runtime library).
#pragma once
#include <spdlog/logger.h>

namespace tessera::runtime::detail {

/// The "tessera.runtime" logger (tessera::logger: shares the driver's sinks and level).
spdlog::logger& logger();

}  // namespace tessera::runtime::detail
