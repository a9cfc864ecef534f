// The exact time-indexed exchange model and its GLPK solve (see time_indexed_model.hpp).
//
// The question "is there a schedule with horizon at most H?" as a 0-1 program:
//   x[j][c] in {0,1}  transfer j sends a word at cycle c, for c in [0, H - 1 - farthest_j]
//                     (farthest_j: its largest latency), so every word arrives before H.
//                     Any cycles, not necessarily consecutive: the model is preemptive, as
//                     segments allow; words of a transfer are alike, sent in cycle order.
//   words:    sum_c x[j][c] = words_j                     for every transfer j
//   send:     sum_{j from s} x[j][c] <= 1                 for every sender s, cycle c
//   receive:  sum_{j to d} x[j][t - latency_jd] <= 1     for every receiver d, arrival t
//   switch:   a word from s arriving at d at t excludes words from any other source at
//             t+1 .. t+k (k: the target's switch cost), which is the receive-mux rule:
//             sum_{j: s -> d} x[j][t - l] + sum_{j: s' -> d, s' != s} x[j][t + delta - l'] <= 1
//             for every receiver d, source s, arrival t and delta in 1..k
// A multicast transfer has one x per cycle, in the receive rows of all its destinations at
// their own latencies: one send, every destination receives.
//
// Asking for a fixed horizon instead of minimising it avoids an objective whose LP
// relaxation is weak (fractional sends spread over every cycle), and every smaller horizon
// gives a smaller model: GLPK answers each question, and the search over H (solve()) turns
// the answers into the optimum and its proof.
#include "time_indexed_model.hpp"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "tessera/target.hpp"

namespace tessera::milp {
namespace {

struct Endpoint {
  std::uint32_t job, latency;
};

struct Job {
  std::uint32_t transfer, source, words, farthest;
  std::int64_t last_send;  ///< last cycle a word may leave (H - 1 - farthest)
  int first_column;        ///< GLPK column of x[job][0]
};

// Sparse rows in GLPK's 1-based triplet form.
class RowSet {
public:
  enum class Sense { at_most, at_least, equal };

  void begin(Sense sense, double bound) { bounds_.push_back({sense, bound}); }
  void add(int column, double value) {
    rows_.push_back(static_cast<int>(bounds_.size()));
    columns_.push_back(column);
    values_.push_back(value);
  }
  // Ends the row begun last, dropping it unless `keep` (a row that cannot bind).
  void end(bool keep) {
    if (keep) return;
    const int row = static_cast<int>(bounds_.size());
    while (!rows_.empty() && rows_.back() == row) {
      rows_.pop_back();
      columns_.pop_back();
      values_.pop_back();
    }
    bounds_.pop_back();
  }
  std::size_t entries_in_last_row() const {
    const int row = static_cast<int>(bounds_.size());
    std::size_t entries = 0;
    for (auto it = rows_.rbegin(); it != rows_.rend() && *it == row; ++it) ++entries;
    return entries;
  }

  void load(glp_prob* problem) const {
    glp_add_rows(problem, static_cast<int>(bounds_.size()));
    for (std::size_t row = 0; row < bounds_.size(); ++row) {
      const auto [sense, bound] = bounds_[row];
      const int index = static_cast<int>(row) + 1;
      if (sense == Sense::at_most) glp_set_row_bnds(problem, index, GLP_UP, 0.0, bound);
      if (sense == Sense::at_least) glp_set_row_bnds(problem, index, GLP_LO, bound, 0.0);
      if (sense == Sense::equal) glp_set_row_bnds(problem, index, GLP_FX, bound, bound);
    }
    // GLPK's arrays start at index 1.
    std::vector<int> ia(1, 0), ja(1, 0);
    std::vector<double> ar(1, 0.0);
    ia.insert(ia.end(), rows_.begin(), rows_.end());
    ja.insert(ja.end(), columns_.begin(), columns_.end());
    ar.insert(ar.end(), values_.begin(), values_.end());
    glp_load_matrix(problem, static_cast<int>(rows_.size()), ia.data(), ja.data(), ar.data());
  }

  std::size_t rows() const { return bounds_.size(); }
  std::size_t nonzeros() const { return values_.size(); }

private:
  std::vector<std::pair<Sense, double>> bounds_;
  std::vector<int> rows_, columns_;
  std::vector<double> values_;
};

// Owns a GLPK problem so every exit path frees it.
struct Problem {
  glp_prob* handle = glp_create_prob();
  ~Problem() { glp_delete_prob(handle); }
};

}  // namespace

TimeIndexedModel::TimeIndexedModel(const tessera::ExchangePhase& phase, const tessera::Target& target,
                                   std::uint64_t lower_bound, std::uint64_t upper_bound)
    : phase_(phase), target_(target), lower_bound_(lower_bound), upper_bound_(upper_bound) {
  // The largest model is the first one tried below the incumbent.
  for (const tessera::Transfer& transfer : phase.transfers) {
    if (transfer.words == 0 || transfer.destinations.empty()) continue;
    std::uint32_t farthest = 0;
    for (std::uint32_t destination : transfer.destinations)
      farthest = std::max(farthest, target.latency(transfer.source, destination));
    if (upper_bound > farthest) variables_ += upper_bound - farthest;
  }
}

TimeIndexedModel::Verdict TimeIndexedModel::feasible(std::uint64_t horizon, std::uint64_t time_limit_ms, Effort effort,
                                                     MilpOutcome& stats) const {
  Verdict verdict;
  const auto limit = static_cast<std::int64_t>(horizon);

  // Columns: x of every transfer with words, each over the cycles its last word can leave
  // and still arrive everywhere before the horizon.
  std::vector<Job> jobs;
  std::map<std::uint32_t, std::vector<Endpoint>> incoming;  // receiver -> its transfers
  int columns = 0;
  for (std::uint32_t index = 0; index < phase_.transfers.size(); ++index) {
    const tessera::Transfer& transfer = phase_.transfers[index];
    if (transfer.words == 0 || transfer.destinations.empty()) continue;
    Job job{index, transfer.source, transfer.words, 0, 0, columns + 1};
    for (std::uint32_t destination : transfer.destinations) {
      const std::uint32_t latency = target_.latency(transfer.source, destination);
      job.farthest = std::max(job.farthest, latency);
      incoming[destination].push_back({static_cast<std::uint32_t>(jobs.size()), latency});
    }
    job.last_send = limit - 1 - job.farthest;
    // Too few cycles for its words: no schedule this short. (Not at or above the core's
    // lower bound, which counts every transfer's words plus its farthest latency.)
    if (job.last_send + 1 < static_cast<std::int64_t>(job.words)) {
      verdict.kind = Verdict::Kind::infeasible;
      return verdict;
    }
    columns += static_cast<int>(job.last_send + 1);
    jobs.push_back(job);
  }
  auto x = [&](std::uint32_t job, std::int64_t cycle) -> int {
    return cycle >= 0 && cycle <= jobs[job].last_send ? jobs[job].first_column + static_cast<int>(cycle) : 0;
  };

  RowSet rows;
  for (std::uint32_t j = 0; j < jobs.size(); ++j) {  // words
    rows.begin(RowSet::Sense::equal, jobs[j].words);
    for (std::int64_t cycle = 0; cycle <= jobs[j].last_send; ++cycle) rows.add(x(j, cycle), 1);
    rows.end(true);
  }
  std::map<std::uint32_t, std::vector<std::uint32_t>> sent_by;
  for (std::uint32_t j = 0; j < jobs.size(); ++j) sent_by[jobs[j].source].push_back(j);
  for (const auto& [sender, mine] : sent_by) {  // send
    if (mine.size() < 2) continue;
    for (std::int64_t cycle = 0; cycle < limit; ++cycle) {
      rows.begin(RowSet::Sense::at_most, 1);
      for (std::uint32_t j : mine)
        if (const int column = x(j, cycle)) rows.add(column, 1);
      rows.end(rows.entries_in_last_row() >= 2);
    }
  }
  for (const auto& [receiver, arrivals] : incoming) {  // receive
    for (std::int64_t t = 0; t < limit; ++t) {
      rows.begin(RowSet::Sense::at_most, 1);
      for (const Endpoint& e : arrivals)
        if (const int column = x(e.job, t - e.latency)) rows.add(column, 1);
      rows.end(rows.entries_in_last_row() >= 2);
    }
  }
  const std::int64_t switch_cost = target_.switch_cost;
  for (const auto& [receiver, arrivals] : incoming) {  // switch
    if (switch_cost == 0) break;
    std::vector<std::uint32_t> sources;
    for (const Endpoint& e : arrivals) sources.push_back(jobs[e.job].source);
    std::sort(sources.begin(), sources.end());
    sources.erase(std::unique(sources.begin(), sources.end()), sources.end());
    if (sources.size() < 2) continue;
    for (std::uint32_t source : sources)
      for (std::int64_t t = 0; t < limit; ++t)
        for (std::int64_t delta = 1; delta <= switch_cost && t + delta < limit; ++delta) {
          rows.begin(RowSet::Sense::at_most, 1);
          std::size_t from_source = 0, from_others = 0;
          for (const Endpoint& e : arrivals) {
            const bool same = jobs[e.job].source == source;
            if (const int column = x(e.job, (same ? t : t + delta) - e.latency)) {
              rows.add(column, 1);
              ++(same ? from_source : from_others);
            }
          }
          rows.end(from_source > 0 && from_others > 0);  // only then can it bind
        }
  }

  Problem problem;
  glp_term_out(GLP_OFF);
  glp_add_cols(problem.handle, columns);
  for (int column = 1; column <= columns; ++column) glp_set_col_kind(problem.handle, column, GLP_BV);
  // Any schedule within the horizon answers the question; the objective only guides the
  // search toward schedules that send early, which the LP's vertices round to well.
  for (const Job& job : jobs)
    for (std::int64_t cycle = 0; cycle <= job.last_send; ++cycle)
      glp_set_obj_coef(problem.handle, job.first_column + static_cast<int>(cycle), static_cast<double>(cycle + 1));
  rows.load(problem.handle);
  stats.rows = std::max(stats.rows, rows.rows());
  stats.nonzeros = std::max(stats.nonzeros, rows.nonzeros());
  stats.variables = std::max<std::uint64_t>(stats.variables, static_cast<std::uint64_t>(columns));

  const auto started = std::chrono::steady_clock::now();
  auto remaining_ms = [&]() -> int {
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    return static_cast<int>(std::max<std::int64_t>(1, static_cast<std::int64_t>(time_limit_ms) - spent));
  };
  glp_smcp simplex;
  glp_init_smcp(&simplex);
  simplex.msg_lev = GLP_MSG_OFF;
  simplex.tm_lim = remaining_ms();
  const int relaxed = glp_simplex(problem.handle, &simplex);
  if (relaxed == 0 && glp_get_status(problem.handle) == GLP_NOFEAS) {
    verdict.kind = Verdict::Kind::infeasible;  // not even fractionally
    return verdict;
  }
  if (relaxed != 0 || glp_get_status(problem.handle) != GLP_OPT) return verdict;  // unknown

  glp_iocp branching;
  glp_init_iocp(&branching);
  branching.msg_lev = GLP_MSG_OFF;
  branching.tm_lim = remaining_ms();
  // Depth first, stopping at the first schedule found (a relative gap of 100% accepts any).
  // Finding: no cuts, which beat cuts, GLPK's defaults and its feasibility pump on every
  // hard phase we measured. Refuting: clique cuts (the send, receive and switch rows are
  // cliques), which proved a 6-transfer multicast phase optimal 7x faster. (GLPK's MIP
  // presolver overran the time limit, and its proximity search ignores it.)
  branching.bt_tech = GLP_BT_DFS;
  branching.mip_gap = 1.0;
  if (effort == Effort::refute) branching.clq_cuts = GLP_ON;
  glp_intopt(problem.handle, &branching);
  const int status = glp_mip_status(problem.handle);
  if (status == GLP_NOFEAS) {
    verdict.kind = Verdict::Kind::infeasible;
    return verdict;
  }
  if (status != GLP_OPT && status != GLP_FEAS) return verdict;  // a time limit: no verdict

  // Each transfer's send cycles, merged into runs: its segments.
  verdict.kind = Verdict::Kind::feasible;
  for (const Job& job : jobs) {
    std::int64_t run_start = -1, run_words = 0;
    for (std::int64_t cycle = 0; cycle <= job.last_send + 1; ++cycle) {
      const bool sends =
          cycle <= job.last_send && glp_mip_col_val(problem.handle, job.first_column + static_cast<int>(cycle)) > 0.5;
      if (sends && run_start < 0) run_start = cycle;
      if (sends) ++run_words;
      if (!sends && run_start >= 0) {
        verdict.schedule.segments.push_back(
            {job.transfer, static_cast<std::uint64_t>(run_start), static_cast<std::uint32_t>(run_words)});
        verdict.horizon = std::max<std::uint64_t>(verdict.horizon, static_cast<std::uint64_t>(cycle) + job.farthest);
        run_start = -1;
        run_words = 0;
      }
    }
  }
  return verdict;
}

MilpOutcome TimeIndexedModel::solve(std::uint64_t time_limit_ms) const {
  const auto started = std::chrono::steady_clock::now();
  auto remaining_ms = [&]() -> std::uint64_t {
    const auto spent = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count());
    return spent < time_limit_ms ? time_limit_ms - spent : 0;
  };
  MilpOutcome outcome;
  outcome.bound = lower_bound_;
  std::uint64_t best = upper_bound_;  // the incumbent's horizon

  // First the lower bound itself, with a third of the time: when it is feasible (the ideal
  // target, most easy phases) that proves the optimum at once. Then down from the best
  // schedule: each feasible horizon improves it, the first infeasible one proves it optimal.
  // Each question is asked for finding first, then (if undecided) for refuting, with half
  // its time each.
  bool tried_bound = false;
  while (outcome.bound < best && remaining_ms() > 0) {
    const std::uint64_t horizon = tried_bound ? best - 1 : outcome.bound;
    const std::uint64_t slice = tried_bound ? remaining_ms() : remaining_ms() / 3;
    Verdict verdict = feasible(horizon, std::max<std::uint64_t>(slice / 2, 1), Effort::find, outcome);
    ++outcome.models;
    if (verdict.kind == Verdict::Kind::unknown && remaining_ms() > 0) {
      const std::uint64_t rest = tried_bound ? remaining_ms() : slice - slice / 2;
      verdict = feasible(horizon, std::max<std::uint64_t>(rest, 1), Effort::refute, outcome);
      ++outcome.models;
    }
    if (verdict.kind == Verdict::Kind::feasible) {
      outcome.solved = true;
      outcome.schedule = verdict.schedule;
      outcome.horizon = verdict.horizon;
      best = verdict.horizon;
    } else if (verdict.kind == Verdict::Kind::infeasible) {
      outcome.bound = horizon + 1;
    } else if (tried_bound) {
      outcome.status = fmt::format("time limit deciding horizon {}", horizon);
      break;
    }
    tried_bound = true;
  }
  outcome.optimal = outcome.bound >= best;
  if (outcome.status.empty()) outcome.status = outcome.optimal ? "optimal" : "time limit";
  return outcome;
}

}  // namespace tessera::milp
