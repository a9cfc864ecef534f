// The JSON documents behind `--json`: built from the records commands keep, never from log text.
#include "json_output.hpp"

#include "compile.hpp"
#include "tessera/output_file.hpp"

namespace tessera::cli {

using nlohmann::json;

json compile_json(const CompileResult& r) {
  json document = {{"schema", kCompileJsonSchema},
                   {"package", r.package_path},
                   {"tiles", r.tiles},
                   {"supersteps", r.supersteps},
                   {"estimated_cycles", r.estimates.estimated_cycles},
                   {"estimated_exchange_cycles", r.estimates.estimated_exchange_cycles},
                   {"scheduled_exchange_cycles", r.estimates.scheduled_exchange_cycles},
                   {"exchange_lower_bound", r.estimates.exchange_lower_bound},
                   {"peak_tile_bytes", r.estimates.peak_tile_bytes},
                   {"compile_ms", r.compile_ms}};
  json& passes = document["passes"] = json::array();
  for (const PassTiming& t : r.record.timings)
    passes.push_back({{"pass", t.pass},
                      {"wall_ms", t.wall_ms},
                      {"verify_ms", t.verify_ms},
                      {"cost_model_ms", t.cost_model_ms},
                      {"cost_model_calls", t.cost_model_calls},
                      {"scheduler_ms", t.scheduler_ms},
                      {"scheduler_calls", t.scheduler_calls}});
  json& statistics = document["statistics"] = json::array();
  for (const Statistic& s : r.record.statistics)
    statistics.push_back({{"pass", s.pass}, {"name", s.name}, {"value", s.value}});
  json& plans = document["plans"] = json::array();
  for (const PlanRemark& p : r.record.plans)
    plans.push_back({{"op", p.op},
                     {"op_kind", p.op_kind},
                     {"plan", p.plan},
                     {"column_groups", p.column_groups},
                     {"depth_groups", p.depth_groups},
                     {"row_groups", p.row_groups},
                     {"candidates", p.candidates},
                     {"estimated_cycles", p.estimated_cycles}});
  json& schedules = document["schedules"] = json::array();
  for (const ScheduleRemark& s : r.record.schedules)
    schedules.push_back({{"phase", s.phase},
                         {"scheduler", s.scheduler},
                         {"transfers", s.transfers},
                         {"words", s.words},
                         {"widest_multicast", s.widest_multicast},
                         {"segments", s.segments},
                         {"horizon", s.horizon},
                         {"endpoint_lower_bound", s.endpoint_lower_bound},
                         {"lower_bound", s.lower_bound},
                         {"elapsed_ms", s.elapsed_ms}});
  return document;
}

json run_json(const runtime::RunResult& r, const std::string& package_path) {
  json document = {{"schema", kRunJsonSchema},
                   {"package", package_path},
                   {"tiles", r.tiles},
                   {"device_cycles", r.cycles.total()},
                   {"end_to_end_cycles", r.end_to_end_cycles()},
                   {"compute_cycles", r.cycles.compute},
                   {"exchange_cycles", r.cycles.exchange},
                   {"sync_cycles", r.cycles.sync},
                   {"host_cycles", r.host_run_cycles},
                   {"words_exchanged", r.words_exchanged},
                   {"words_unreceived", r.words_unreceived}};
  document["numerics"] = r.numerics_checked ? json{{"max_abs_error", r.numerics.max_abs_error},
                                                   {"tolerance", r.numerics.tolerance},
                                                   {"passed", r.numerics.passed}}
                                            : json(nullptr);
  return document;
}

json schedule_json(const ExchangePhase& phase, const Schedule& schedule, const ScheduleReport& report,
                   const std::string& scheduler, std::int64_t elapsed_ms) {
  return {{"schema", kScheduleJsonSchema},       {"scheduler", scheduler},
          {"transfers", phase.transfers.size()}, {"segments", schedule.segments.size()},
          {"horizon", report.horizon},           {"endpoint_lower_bound", report.endpoint_lower_bound},
          {"lower_bound", report.lower_bound},   {"elapsed_ms", elapsed_ms}};
}

void write_json(const std::string& path, const json& document) {
  write_file_atomically(path, document.dump(2) + "\n", "the JSON record (--json)");
}

}  // namespace tessera::cli
