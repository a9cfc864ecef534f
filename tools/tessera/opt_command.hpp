// `tessera opt STATE --pass NAME -o OUT`: one pass on a saved compilation state, mlir-opt style.
#pragma once
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tessera::cli {

struct OptRequest {
  std::string state;                 ///< a .tstate from --dump-after, a reproducer or an earlier opt
  std::string pipeline;              ///< plugin paths, the cost model and scheduler, pass options
  std::vector<std::string> passes;   ///< run in order
  std::vector<std::string> options;  ///< KEY=VALUE for the (single) pass
  std::string output;                ///< the state after the passes
  std::string dump;                  ///< also write the text dump here
  std::string package;               ///< also write the package (the state must have tile images)
  std::string dump_filter;
  bool print = false;  ///< print the text dump on stdout
};

CLI::App* add_opt_command(CLI::App& app, OptRequest& request);
/// Runs the passes with verification; prints `state=OUT passes=... changed=... elapsed_ms=...`.
/// Throws Error on a bad state, an unknown pass or option, a missing fact or a failed pass
/// (no output is written then).
int opt_command(const OptRequest& request);

}  // namespace tessera::cli
