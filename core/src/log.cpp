// Named loggers sharing one set of sinks.
#include "tessera/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace tessera {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::default_logger()->clone(name);
  spdlog::register_logger(created);
  return created;
}

void configure_logging(const std::string& level) {
  // Logs go to stderr so stdout carries only the tools' key=value result lines.
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(spdlog::color_mode::never);
  auto root = std::make_shared<spdlog::logger>("tessera", sink);
  spdlog::set_default_logger(root);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %5l %v", spdlog::pattern_time_type::utc);
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::apply_all([&](std::shared_ptr<spdlog::logger> l) { l->sinks() = root->sinks(); });
}

}  // namespace tessera
