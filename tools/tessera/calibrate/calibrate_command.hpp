// `tessera calibrate --target T -o TABLE`: microbenchmarks on the simulator, fitted into the
// table the `calibrated` cost model reads.
#pragma once
#include <string>
#include <vector>

namespace tessera::cli {

struct CalibrateRequest {
  std::string target;
  std::string output;
  std::string scheduler = "greedy";  ///< the exchange scheduler the exchange formula measures
  std::vector<std::string> plugin_paths;
  std::string lock_path;  ///< empty: the default device lock
};

/// Builds and runs the microbenchmarks, fits the formulas, writes the table atomically and
/// prints one line per formula. Throws Error on a user-facing problem.
int calibrate_command(const CalibrateRequest& request);

}  // namespace tessera::cli
