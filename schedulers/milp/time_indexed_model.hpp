// The exact time-indexed model of one exchange phase, solved with GLPK.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera {
struct Target;
}

namespace tessera::milp {

/// What the solver found.
struct MilpOutcome {
  bool solved = false;          ///< a schedule better than the incumbent came back
  bool optimal = false;         ///< proven optimal
  tessera::Schedule schedule;   ///< when solved
  std::uint64_t horizon = 0;    ///< of `schedule`
  std::uint64_t bound = 0;      ///< the best proven lower bound on the horizon
  std::string status;           ///< how the search ended, for the log
  std::uint64_t models = 0;     ///< feasibility models solved
  std::uint64_t variables = 0;  ///< columns, rows and nonzeros of the largest model
  std::size_t rows = 0, nonzeros = 0;
};

/// Preemptive time-indexed model (see time_indexed_model.cpp for the formulation) of the
/// question "is there a schedule with horizon at most H?", asked for H between
/// `lower_bound` and `upper_bound`, the horizon of a known schedule.
class TimeIndexedModel {
public:
  TimeIndexedModel(const tessera::ExchangePhase& phase, const tessera::Target& target, std::uint64_t lower_bound,
                   std::uint64_t upper_bound);

  /// Columns of the largest model asked (computed without building it).
  std::uint64_t variables() const { return variables_; }

  /// Searches horizons for at most `time_limit_ms`: the lower bound first, then down from
  /// the incumbent's until one is infeasible (proving the last feasible one optimal).
  MilpOutcome solve(std::uint64_t time_limit_ms) const;

private:
  struct Verdict {
    enum class Kind { unknown, feasible, infeasible } kind = Kind::unknown;
    tessera::Schedule schedule;  ///< when feasible
    std::uint64_t horizon = 0;
  };
  /// GLPK settings for a question expected to have a schedule, or expected not to.
  enum class Effort { find, refute };
  /// Builds and solves the model for `horizon`; records its size in `stats`.
  Verdict feasible(std::uint64_t horizon, std::uint64_t time_limit_ms, Effort effort, MilpOutcome& stats) const;

  const tessera::ExchangePhase& phase_;
  const tessera::Target& target_;
  std::uint64_t lower_bound_, upper_bound_;
  std::uint64_t variables_ = 0;
};

}  // namespace tessera::milp
