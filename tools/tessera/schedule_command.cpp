// `tessera schedule PHASE --target T --scheduler NAME`: one phase, one scheduler, one line.
#include "schedule_command.hpp"

#include <chrono>

#include <fmt/format.h>

#include "json_output.hpp"
#include "tessera/diagnostic.hpp"
#include "tessera/exchange.hpp"
#include "tessera/output_file.hpp"
#include "tessera/session.hpp"
#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace tessera::cli {

int schedule_command(const ScheduleRequest& request) {
  check_output_file(request.emit, "the schedule (--emit)",
                    {{request.phase, "the phase file"}, {request.target, "the target"}});
  check_output_file(
      request.json_path, "the JSON record (--json)",
      {{request.phase, "the phase file"}, {request.target, "the target"}, {request.emit, "the schedule (--emit)"}});
  const Target target = load_target(request.target);
  const ExchangePhase phase = read_phase_file(request.phase);
  if (phase.tiles > target.tiles)
    throw Error(request.phase +
                fmt::format(": the phase has {} tiles but target '{}' has {}", phase.tiles, target.name, target.tiles));

  PluginHost host;
  find_plugins(host, request.plugin_paths);
  const PluginInfo* info = host.find(request.scheduler);
  if (!info || info->kind != PluginKind::exchange_scheduler)
    throw Error("--scheduler: " + host.unknown_plugin_message(request.scheduler, PluginKind::exchange_scheduler));
  Options given;
  for (const auto& option : request.options) {
    const auto equals = option.find('=');
    if (equals == std::string::npos || equals == 0) throw Error("--option '" + option + "': expected KEY=VALUE");
    given.values[option.substr(0, equals)] = option.substr(equals + 1);
  }
  auto scheduler = host.create_scheduler(*info, host.resolve_options(*info, given, "--option"));

  ScheduleReport report;
  const auto start = std::chrono::steady_clock::now();
  Schedule schedule = scheduler->schedule(phase, target, request.budget_ms, &report);  // validated by the core
  const auto elapsed =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  if (!request.emit.empty()) write_schedule_file(schedule, request.emit);
  if (!request.json_path.empty())
    write_json(request.json_path, schedule_json(phase, schedule, report, scheduler->plugin_name(), elapsed));
  const double ratio = report.lower_bound ? static_cast<double>(report.horizon) / report.lower_bound : 1.0;
  fmt::print(
      "transfers={} endpoint_lower_bound={} lower_bound={} horizon={} lower_bound_gap={} ratio={:.3f} "
      "segments={} elapsed_ms={} valid=true\n",
      phase.transfers.size(), report.endpoint_lower_bound, report.lower_bound, report.horizon,
      report.horizon - report.lower_bound, ratio, schedule.segments.size(), elapsed);
  return 0;
}

}  // namespace tessera::cli
