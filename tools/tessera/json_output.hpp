// `--json FILE`: what compile, run and schedule measured, as one JSON document (docs/json-output.md).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tessera/exchange.hpp"
#include "tessera/pass.hpp"
#include "tessera/runtime/run.hpp"

namespace tessera::cli {

struct CompileResult;

/// Schema names, bumped when a field changes meaning or goes.
inline constexpr const char* kCompileJsonSchema = "tessera.compile/1";
inline constexpr const char* kRunJsonSchema = "tessera.run/1";
inline constexpr const char* kScheduleJsonSchema = "tessera.schedule/1";

nlohmann::json compile_json(const CompileResult& result);
nlohmann::json run_json(const runtime::RunResult& result, const std::string& package_path);
nlohmann::json schedule_json(const ExchangePhase& phase, const Schedule& schedule, const ScheduleReport& report,
                             const std::string& scheduler, std::int64_t elapsed_ms);

/// Writes `document` to `path` atomically (core/output_file), indented.
void write_json(const std::string& path, const nlohmann::json& document);

}  // namespace tessera::cli
