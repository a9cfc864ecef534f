// Named loggers (tessera.<area>) that share the process's sinks and pattern.
#pragma once
#include <memory>
#include <string>

#include <spdlog/logger.h>

namespace tessera {

/// The logger called `name` ("tessera.build", "tessera.runtime", ...), created on first use
/// from the default logger's sinks and level.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

/// Sets the process-wide log pattern used by every Tessera tool: UTC time, level, message.
void configure_logging(const std::string& level = "info");

}  // namespace tessera
