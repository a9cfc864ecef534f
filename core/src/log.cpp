// Named loggers sharing one set of sinks, with per-area levels (TESSERA_LOG).
#include "tessera/log.hpp"
#include "tessera/log_filter.hpp"

#include <map>
#include <mutex>
#include <sstream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "tessera/diagnostic.hpp"
#include "tessera/yaml_text.hpp"

namespace tessera {

namespace {

std::mutex area_mutex;
std::map<std::string, spdlog::level::level_enum> area_levels;  // full logger names ("tessera.build")

// The level of the most specific area covering `name`, if any ("tessera.scheduler" covers
// "tessera.scheduler.milp").
bool area_level(const std::string& name, spdlog::level::level_enum& level) {
  std::size_t best = 0;
  bool found = false;
  for (const auto& [area, area_level] : area_levels) {
    const bool covers = name == area || (name.size() > area.size() && name.compare(0, area.size(), area) == 0 &&
                                         name[area.size()] == '.');
    if (covers && area.size() >= best) {
      best = area.size();
      level = area_level;
      found = true;
    }
  }
  return found;
}

spdlog::level::level_enum parse_level(const std::string& text, const std::string& where) {
  static const std::vector<std::string> names{"trace", "debug", "info", "warn", "error", "off"};
  for (const std::string& name : names)
    if (text == name) return spdlog::level::from_str(name);
  std::string message = where + ": unknown log level " + echoed_token(text);
  if (const std::string near = nearest_name(text, names); !near.empty()) message += "; did you mean '" + near + "'?";
  throw Error(message + " (levels: trace, debug, info, warn, error, off)");
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::default_logger()->clone(name);
  {
    std::lock_guard lock(area_mutex);
    spdlog::level::level_enum level;
    if (area_level(name, level)) created->set_level(level);
  }
  // Two threads may create the same logger at once: the second one takes the first one's.
  try {
    spdlog::register_logger(created);
  } catch (const spdlog::spdlog_ex&) {
    if (auto existing = spdlog::get(name)) return existing;
    throw;
  }
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

void set_log_areas(const std::string& filter, const std::string& origin, bool bare_level_too) {
  std::map<std::string, spdlog::level::level_enum> areas;
  bool has_default = false;
  auto default_level = spdlog::level::info;
  std::stringstream entries(filter);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    if (entry.empty()) continue;
    const std::string where = origin + " entry " + echoed_token(entry);
    const std::size_t equals = entry.find('=');
    if (equals == std::string::npos) {
      default_level = parse_level(entry, where);
      has_default = true;
      continue;
    }
    std::string area = entry.substr(0, equals);
    if (area.empty())
      throw Error(where + ": no area before '=' (write AREA=LEVEL, e.g. " + origin + "=build=debug,runtime=info)");
    if (area != "tessera" && area.rfind("tessera.", 0) != 0) area = "tessera." + area;
    areas[area] = parse_level(entry.substr(equals + 1), where);
  }
  std::lock_guard lock(area_mutex);
  if (has_default && bare_level_too) spdlog::set_level(default_level);
  for (const auto& [area, level] : areas) area_levels[area] = level;
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) {
    spdlog::level::level_enum level;
    if (area_level(l->name(), level)) l->set_level(level);
  });
}

}  // namespace tessera
