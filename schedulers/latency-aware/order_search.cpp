// Iterated critical-path local search on per-port job sequences (see order_search.hpp).
#include "order_search.hpp"

#include <algorithm>
#include <random>

#include "port_sequences.hpp"

namespace tessera::latency_aware {
namespace {

class SequenceSearch {
public:
  SequenceSearch(const PhaseModel& model, const std::vector<std::uint32_t>& order, const SearchLimits& limits,
                 WorkBudget& budget)
      : limits_(limits), budget_(budget), current_(model, order), best_(model, order), random_(limits.seed) {}

  SearchResult run() {
    SearchResult result;
    budget_.charge(2 * kUnitsPerBuiltEntry * current_.size());
    const bool consistent = current_.retime();
    (void)consistent;  // sequences cut from one order never contradict each other
    ++result.evaluations;
    budget_.charge(kUnitsPerTimedJob * current_.last_timed());
    copy(best_, current_);
    while (!out_of_budget(result) && best_.score().horizon > limits_.lower_bound) {
      if (descend_once(result)) continue;
      // A local optimum: keep it if it is the best so far, else go back to the best; then
      // kick the schedule off it with a few moves taken whatever they cost.
      if (current_.score() < best_.score()) {
        copy(best_, current_);
        fruitless_ = 0;
      } else {
        if (best_.score() < current_.score()) copy(current_, best_);
        if (++fruitless_ >= kPatience) break;
      }
      if (!kick(result)) break;
    }
    if (current_.score() < best_.score()) copy(best_, current_);
    result.horizon = best_.score().horizon;
    result.start = best_.start();
    return result;
  }

private:
  struct Move {
    std::uint32_t port, from, to;
  };

  // Work units (about nanoseconds, see WorkBudget): one job re-timed, one entry copied.
  static constexpr std::uint64_t kUnitsPerTimedJob = 220;
  static constexpr std::uint64_t kUnitsPerMove = 200;
  static constexpr std::uint64_t kUnitsPerCopiedEntry = 3;
  static constexpr std::uint64_t kUnitsPerChainLink = 20;
  static constexpr std::uint64_t kUnitsPerBuiltEntry = 12;
  // Local optima in a row without a new best after which the search gives up.
  static constexpr std::uint32_t kPatience = 64;

  bool out_of_budget(const SearchResult& result) const {
    return (limits_.max_rounds && result.evaluations >= limits_.max_rounds) || budget_.spent();
  }

  bool try_move(const Move& move) {
    const bool consistent = current_.try_move(move.port, move.from, move.to);
    budget_.charge(kUnitsPerMove + kUnitsPerTimedJob * current_.last_timed());
    return consistent;
  }

  void copy(PortSequences& to, const PortSequences& from) {
    to.assign(from);
    budget_.charge(kUnitsPerCopiedEntry * from.size());
  }

  // The critical path, latest first: the job finishing last, the job that held it up, and
  // so on. Consecutive links on one port form a block of back-to-back jobs there; the moves
  // re-sequence a block's ends (swap the last or first pair, or move one end past the other).
  void collect_moves() {
    moves_.clear();
    budget_.charge(kUnitsPerMove);
    std::uint32_t job = current_.last_job();
    while (job != kNone && current_.blocker(job) != kNone) {
      const std::uint32_t port = current_.blocking_port(job);
      const std::uint32_t latest = current_.index_of(job, port);
      std::uint32_t earliest = latest;
      while (job != kNone && current_.blocker(job) != kNone && current_.blocking_port(job) == port) {
        budget_.charge(kUnitsPerChainLink);
        job = current_.blocker(job);
        earliest = current_.index_of(job, port);
      }
      moves_.push_back({port, latest, latest - 1});
      if (earliest + 1 != latest) {
        moves_.push_back({port, earliest + 1, earliest});
        moves_.push_back({port, latest, earliest});
        moves_.push_back({port, earliest, latest});
      }
    }
  }

  // First improvement over the critical path's moves. Moves late in the path come first: a
  // change early in the schedule ripples through every port sequence after it and rarely
  // pays. Within a few neighbouring blocks the seed decides the order.
  bool descend_once(SearchResult& result) {
    collect_moves();
    constexpr std::size_t kShuffleWindow = 8;
    for (std::size_t first = 0; first < moves_.size(); first += kShuffleWindow)
      std::shuffle(moves_.begin() + first, moves_.begin() + std::min(moves_.size(), first + kShuffleWindow), random_);
    const Score before = current_.score();
    for (const Move& move : moves_) {
      if (out_of_budget(result)) return false;
      ++result.evaluations;
      if (!try_move(move)) continue;
      if (current_.score() < before) {
        current_.keep();
        if (current_.score() < best_.score()) ++result.improvements;
        return true;
      }
      current_.undo();
    }
    return false;
  }

  // A few adjacent swaps near the end of the critical path, kept even if they hurt.
  bool kick(SearchResult& result) {
    collect_moves();
    if (moves_.empty()) return false;
    const std::size_t reach = std::min<std::size_t>(moves_.size(), 16);
    std::uniform_int_distribution<std::size_t> pick(0, reach - 1);
    bool moved = false;
    for (int kicks = 0; kicks < 2 && !out_of_budget(result); ++kicks) {
      const Move move = moves_[pick(random_)];
      if (move.from == move.to + 1 || move.to == move.from + 1) {
        ++result.evaluations;
        if (try_move(move)) {
          current_.keep();
          moved = true;
        }
      }
    }
    return moved || !out_of_budget(result);
  }

  SearchLimits limits_;
  WorkBudget& budget_;
  PortSequences current_, best_;
  std::mt19937_64 random_;
  std::vector<Move> moves_;
  std::uint32_t fruitless_ = 0;
};

}  // namespace

SearchResult improve_order(const PhaseModel& model, const std::vector<std::uint32_t>& order, const SearchLimits& limits,
                           WorkBudget& budget) {
  return SequenceSearch(model, order, limits, budget).run();
}

}  // namespace tessera::latency_aware
