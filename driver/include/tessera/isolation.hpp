// Contained plugins: an exchange scheduler or cost model run in a child `tessera-plugin-host`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/cost_model.hpp"
#include "tessera/scheduler.hpp"

namespace tessera {

struct PluginInfo;
struct PluginUse;
struct PluginLoadLimits;

/// The version of the pipe protocol between the compiler and `tessera-plugin-host`. Bump it
/// on any change to a frame or a message; both sides refuse any other version.
inline constexpr std::uint16_t kPluginHostProtocolVersion = 1;
inline constexpr std::uint64_t kDefaultMemoryLimitMb = 4096;
/// The largest `memory_limit_mb`: its bytes must fit the 64-bit RLIMIT_AS.
inline constexpr std::uint64_t kMaxMemoryLimitMb = UINT64_MAX >> 20;
/// The largest `time_limit_ms` (about 35 years): the deadline must fit the clock's 64-bit nanoseconds.
inline constexpr std::uint64_t kMaxTimeLimitMs = std::uint64_t{1} << 40;

/// The `tessera-plugin-host` executable: $TESSERA_PLUGIN_HOST if set, else beside the running
/// executable, else in ../tools, ../bin or ../../tools from it (build and install trees).
/// Throws Error listing the places tried.
std::string find_plugin_host_binary();

/// Per call, the time limit of a use: its `time_limit_ms`, or twice the budget plus 10 s.
std::uint64_t isolation_time_limit_ms(const PluginUse& use, std::uint64_t budget_ms);

/// An exchange scheduler that sends each phase to `plugin` running in one child process per
/// use (spawned on the first call, reused for later phases), under the use's time and memory
/// limits. When the child crashes, hangs, hits a limit, breaks the protocol or returns an
/// invalid schedule, the child is killed and, with a `fallback`, a warning is logged and the
/// fallback schedules this and every later phase; without one, a PluginError names the
/// plugin, the pipeline place and what happened.
std::unique_ptr<ExchangeScheduler> create_isolated_scheduler(const PluginInfo& plugin, const PluginUse& use,
                                                             std::unique_ptr<ExchangeScheduler> fallback);

/// The same for a cost model: `estimate` and `estimate_exchange` go to one child per use
/// (time limit per call: `time_limit_ms`, or 10 s); the first failure of either switches both
/// to `fallback` or is a PluginError.
std::unique_ptr<CostModel> create_isolated_cost_model(const PluginInfo& plugin, const PluginUse& use,
                                                      std::unique_ptr<CostModel> fallback);

/// What loading a library in a child showed: `loaded` (its manifest passed the host's checks),
/// `refused` (the checks failed: `message` is their Error's text) or `failed` (the child
/// crashed, hung, allocated past the limit or exited while loading: `message` says which).
struct LibraryProbe {
  enum class Outcome { loaded, refused, failed } outcome = Outcome::failed;
  std::string message;
};

/// Loads each of `files` in a child `tessera-plugin-host --probe FILE` of its own, several at
/// once, each under `limits`, so that its static initialisers and entry point run there
/// first. Returns one LibraryProbe per file, in order. Throws Error if no child can start.
std::vector<LibraryProbe> probe_plugin_libraries(const std::vector<std::string>& files, const PluginLoadLimits& limits);

/// The child's side of a probe: loads `file` with the host's checks and writes one line to
/// `report_fd`, "loaded NAME" or "refused MESSAGE"; returns the exit code.
int probe_plugin_library(const std::string& file, int report_fd);

/// The child's side: answers requests on `channel_fd` until the parent closes it. Returns
/// the process exit code. This is all `tessera-plugin-host` does.
int serve_plugin_requests(int channel_fd);

}  // namespace tessera
