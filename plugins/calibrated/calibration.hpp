// The calibrated cost model's formulas: features per codelet and per exchange phase, and the
// table of fitted coefficients `tessera calibrate` writes and the `calibrated` plugin reads.
#pragma once
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/exchange.hpp"

namespace tessera {
struct Program;
struct Superstep;
struct Target;
}  // namespace tessera

namespace tessera::calibration {

/// Version of the table file's layout; a reader refuses any other.
inline constexpr std::uint32_t kTableFormatVersion = 1;

using Features = std::vector<double>;

/// One codelet's line of the feature table: what its cycles are fitted on (cycles =
/// coefficients . features) and the shapes `tessera calibrate` measures it at.
struct CodeletLine {
  Codelet codelet;
  const char* feature_names;  ///< comma-separated, written into the table
  Features (*features)(std::span<const std::uint32_t> params, const Target& target);
  std::vector<std::vector<std::uint32_t>> shapes;  ///< params of the microbenchmark calls
};

/// The line of `codelet`, or null when the feature table has none (calibrate refuses that).
const CodeletLine* codelet_line(Codelet codelet);

/// Names of the exchange features, and their values for one phase: a constant (phase
/// overhead) and the core's strongest cheap lower bound on its horizon (endpoint words,
/// receive-mux switches, latency), so the fit measures the scheduler against that bound.
const char* exchange_feature_names();
Features exchange_features(const ExchangePhase& phase, const Target& target);

/// cycles = sum of coefficients[i] * features[i], fitted on `samples` measurements.
struct Formula {
  std::vector<std::string> features;
  std::vector<double> coefficients;
  std::uint64_t samples = 0;
  double max_relative_error = 0;  ///< over the samples the fit was made on

  double cycles(const Features& values) const;
};

struct Table {
  std::string file;  ///< where it was read from (messages)
  std::string target;
  std::uint64_t target_hash = 0;
  std::uint32_t codelet_set_version = 0;
  std::string scheduler;                    ///< the exchange scheduler the exchange formula was measured with
  std::map<std::string, Formula> codelets;  ///< by codelet_name
  Formula exchange;
  double barrier_cycles = 0;
};

/// The table as YAML (deterministic: same table, same bytes).
std::string table_yaml(const Table& table);
/// Reads and checks a table file; throws Error naming the file and place. A missing file's
/// message says which command makes it.
Table read_table(const std::string& path, const std::string& make_command);

/// Splits "a,b" into {"a", "b"}.
std::vector<std::string> split_names(const char* names);

}  // namespace tessera::calibration
