// Per-area log levels (TESSERA_LOG=build=debug,runtime=info), like LLVM's -debug-only.
#pragma once
#include <string>

namespace tessera {

/// Applies a filter "AREA=LEVEL,...,LEVEL": AREA is a logger name with or without its
/// "tessera." prefix ("build", "scheduler.milp"); an area covers the loggers under it, also those
/// created later by tessera::logger. A bare LEVEL sets every other logger's level, unless
/// `bare_level_too` is false (a command line chose it). `origin` names the text's source in
/// errors ("TESSERA_LOG"). Throws Error on an unknown level or an entry without an area.
void set_log_areas(const std::string& filter, const std::string& origin, bool bare_level_too = true);

}  // namespace tessera
