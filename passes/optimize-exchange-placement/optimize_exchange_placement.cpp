// optimize-exchange-placement: swaps identically shaped work units between tiles when that shortens the scheduled
// exchange.
//
// Exchange cost in this machine model depends on which tiles send and receive (column
// distance latency, receive-mux switches, endpoint load), not on byte addresses. So a move
// relocates a work unit: buffers plus the codelet calls that use them (connected through
// calls, on-tile copies included), swapped with a unit of the same shape on another tile so
// per-tile memory and compute stay the same. Each candidate is scheduled by the exchange
// scheduler plugin on the phases it changes, and kept only if their horizons' sum drops.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tessera/lowering.hpp"
#include "tessera/option_table.hpp"
#include "tessera/pass.hpp"

namespace {

using tessera::Program;
using tessera::Status;

/// A movable unit: buffers of one tile joined by the codelet calls that use them.
struct Unit {
  std::uint32_t tile = 0;
  std::vector<std::uint32_t> buffers;                          ///< ascending
  std::vector<std::pair<std::uint32_t, std::uint32_t>> calls;  ///< (superstep, index in compute)
  std::uint32_t shape = 0;                                     ///< units of equal shape may swap
  bool movable = true;                    ///< false when a call reaches a buffer on another tile (not a plan we make)
  std::vector<std::uint32_t> supersteps;  ///< whose copies touch it, ascending
};

class UnionFind {
public:
  explicit UnionFind(std::size_t size) : parent_(size) { std::iota(parent_.begin(), parent_.end(), 0u); }
  std::uint32_t find(std::uint32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(std::uint32_t a, std::uint32_t b) {
    a = find(a), b = find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

private:
  std::vector<std::uint32_t> parent_;
};

/// The units of a program, each buffer in exactly one, and their shapes.
std::vector<Unit> find_units(const Program& program, std::vector<std::uint32_t>& unit_of_buffer) {
  UnionFind sets(program.buffers.size());
  for (const tessera::Superstep& step : program.supersteps)
    for (const tessera::CodeletCall& call : step.compute)
      for (const tessera::BufferRef& ref : call.operands) sets.join(call.operands.front().buffer, ref.buffer);

  std::vector<Unit> units;
  std::vector<std::uint32_t> unit_of_root(program.buffers.size(), std::numeric_limits<std::uint32_t>::max());
  unit_of_buffer.assign(program.buffers.size(), 0);
  for (std::uint32_t b = 0; b < program.buffers.size(); ++b) {
    std::uint32_t& unit = unit_of_root[sets.find(b)];
    if (unit == std::numeric_limits<std::uint32_t>::max()) {
      unit = static_cast<std::uint32_t>(units.size());
      units.emplace_back();
      units.back().tile = program.buffers[b].tile;
    }
    units[unit].buffers.push_back(b);
    units[unit].movable &= program.buffers[b].tile == units[unit].tile;
    unit_of_buffer[b] = unit;
  }
  for (std::uint32_t s = 0; s < program.supersteps.size(); ++s) {
    const tessera::Superstep& step = program.supersteps[s];
    for (std::uint32_t i = 0; i < step.compute.size(); ++i) {
      if (step.compute[i].operands.empty()) continue;
      Unit& unit = units[unit_of_buffer[step.compute[i].operands.front().buffer]];
      unit.calls.push_back({s, i});
      unit.movable &= step.compute[i].tile == unit.tile;
    }
    for (const tessera::Copy& copy : step.copies)
      for (std::uint32_t buffer : {copy.source.buffer, copy.destination.buffer}) {
        std::vector<std::uint32_t>& steps = units[unit_of_buffer[buffer]].supersteps;
        if (steps.empty() || steps.back() != s) steps.push_back(s);
      }
  }

  // Shape: everything memory and compute see, with buffers named by their position in the unit.
  std::map<std::vector<std::uint64_t>, std::uint32_t> shapes;
  for (Unit& unit : units) {
    std::vector<std::uint64_t> key;
    for (std::uint32_t b : unit.buffers) {
      const tessera::Buffer& buffer = program.buffers[b];
      key.insert(key.end(), {buffer.bytes, static_cast<std::uint64_t>(buffer.region), buffer.alignment,
                             buffer.first_use, buffer.last_use});
    }
    for (const auto& [s, i] : unit.calls) {
      const tessera::CodeletCall& call = program.supersteps[s].compute[i];
      key.insert(key.end(), {~std::uint64_t{0}, s, static_cast<std::uint64_t>(call.codelet)});
      key.insert(key.end(), call.params.begin(), call.params.end());
      for (const tessera::BufferRef& ref : call.operands) {
        const auto position =
            std::lower_bound(unit.buffers.begin(), unit.buffers.end(), ref.buffer) - unit.buffers.begin();
        key.insert(key.end(), {static_cast<std::uint64_t>(position), ref.word_offset});
      }
    }
    unit.shape = shapes.emplace(std::move(key), static_cast<std::uint32_t>(shapes.size())).first->second;
  }
  return units;
}

/// Units a round looks at when the critical tile's own swaps look no better.
constexpr std::size_t kWholePhaseUnits = 64;

class OptimizeExchangePlacement final : public tessera::Pass {
public:
  static const tessera::OptionTable<OptimizeExchangePlacement>& option_table() {
    using Self = OptimizeExchangePlacement;
    static const tessera::OptionTable<Self> table{
        tessera::option("max_attempts", &Self::max_attempts_, 24,
                        "candidate swaps scheduled at most (the deterministic limit)")
            .range(0, 10000000),
        tessera::option("time_budget_ms", &Self::time_budget_ms_, 3000,
                        "stop trying candidates after this many milliseconds (a safety stop; logged as "
                        "stopped=time_budget)")
            .range(0, 10000000),
        tessera::option("partners_per_unit", &Self::partners_per_unit_, 3,
                        "swap partners tried per unit of a critical tile: those that most lower a port estimate "
                        "(words, switches, latency) of the tiles the swap touches")
            .range(0, 10000000),
        tessera::option("max_estimates", &Self::max_estimates_, 256,
                        "swaps whose port estimate is computed per round at most (bounds the search)")
            .range(0, 10000000),
    };
    return table;
  }
  Status configure(const tessera::Options& options) override { return option_table().assign(options, *this); }

protected:
  Status run_impl(tessera::CompilationState& state, tessera::PassContext& context) override {
    if (state.facts.count(tessera::facts::storage))
      return Status::failure(
          "optimize-exchange-placement moves buffers between tiles, so it must run before "
          "place-storage: put it after select-finalist and before place-storage in the pipeline");
    const auto started = std::chrono::steady_clock::now();
    deadline_ = started + std::chrono::milliseconds(time_budget_ms_);
    Program& program = state.program;
    context_ = &context;
    program_ = &program;

    units_ = find_units(program, unit_of_buffer_);
    std::map<std::uint32_t, std::vector<std::uint32_t>> by_shape;  // shape -> units
    for (std::uint32_t u = 0; u < units_.size(); ++u)
      if (units_[u].movable) by_shape[units_[u].shape].push_back(u);
    std::size_t swappable = 0;
    for (const auto& entry : by_shape) swappable += entry.second.size() > 1 ? entry.second.size() : 0;

    // Baseline: every phase scheduled once.
    phases_.assign(program.supersteps.size(), {});
    std::uint64_t baseline_total = 0;
    for (std::uint32_t s = 0; s < program.supersteps.size(); ++s) {
      if (program.supersteps[s].copies.empty()) continue;
      schedule_phase(s, phases_[s]);
      baseline_total += phases_[s].horizon;
    }

    std::uint64_t attempts = 0, accepted = 0;
    std::string stopped = "no_candidates";
    std::vector<bool> exhausted(program.supersteps.size(), false);
    auto out_of_time = [&] {
      return std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(time_budget_ms_);
    };
    while (true) {
      if (attempts >= static_cast<std::uint64_t>(max_attempts_)) {
        stopped = "max_attempts";
        break;
      }
      if (out_of_time()) {
        stopped = "time_budget";
        break;
      }
      // The longest phase not yet exhausted, and the tile its last word reaches.
      std::uint32_t phase = 0;
      bool found = false;
      for (std::uint32_t s = 0; s < phases_.size(); ++s)
        if (!exhausted[s] && phases_[s].horizon > 0 && (!found || phases_[s].horizon > phases_[phase].horizon)) {
          phase = s;
          found = true;
        }
      if (!found) break;
      const std::uint32_t critical = phases_[phase].critical_tile;

      // Swaps around the critical tile first; if none looks better, any swap in the phase.
      std::vector<Candidate> tried = candidates(phase, critical, false, by_shape);
      if (tried.empty()) tried = candidates(phase, critical, true, by_shape);
      bool improved = false;
      for (const Candidate& candidate : tried) {
        if (attempts >= static_cast<std::uint64_t>(max_attempts_) || out_of_time()) break;
        ++attempts;
        if (try_swap(phase, candidate)) {
          ++accepted;
          improved = true;
          break;
        }
      }
      // A phase whose critical tile no swap helps is done; an accepted swap may change its critical tile.
      if (!improved) exhausted[phase] = true;
    }

    std::uint64_t final_total = 0;
    for (const PhaseState& p : phases_) final_total += p.horizon;
    const auto elapsed_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
    context.info(
        "optimized exchange placement units={} swappable_units={} attempts={} accepted={} "
        "baseline_cycles={} final_cycles={} stopped={} elapsed_ms={}",
        units_.size(), swappable, attempts, accepted, baseline_total, final_total, stopped, elapsed_ms);
    return Status::success();
  }

private:
  struct PhaseState {
    std::uint64_t horizon = 0;
    std::uint32_t critical_tile = 0;  ///< the tile whose last word arrives or leaves last
  };
  struct Estimate {
    std::uint64_t max = 0, sum = 0;
    bool operator<(const Estimate& other) const { return max != other.max ? max < other.max : sum < other.sum; }
  };
  struct Candidate {
    std::uint32_t unit = 0, partner = 0;
    Estimate estimate;  ///< port_estimate of the tiles it touches, after the swap
  };
  struct Ports {
    std::uint64_t received = 0, in_latency = 0, out_latency = 0;
    std::vector<std::uint32_t> senders;
    std::vector<std::pair<std::uint64_t, std::uint32_t>> sent_ranges;  ///< (buffer, word offset), words
  };

  /// Schedules superstep `s`'s phase as it stands and records its horizon and critical tile.
  void schedule_phase(std::uint32_t s, PhaseState& out) {
    const tessera::Target& target = context_->target;
    const tessera::ExchangePhase phase = tessera::physical_phase(*program_, program_->supersteps[s], target);
    tessera::ScheduleReport report;
    const tessera::Schedule schedule =
        context_->scheduler.schedule(phase, target, context_->schedule_budget_ms, &report);
    out.horizon = report.horizon;
    std::vector<std::uint64_t> end(target.tiles, 0);
    for (const tessera::Segment& segment : schedule.segments) {
      const tessera::Transfer& transfer = phase.transfers[segment.transfer];
      const std::uint64_t last_sent = segment.start + segment.words;
      end[transfer.source] = std::max(end[transfer.source], last_sent);
      for (std::uint32_t d : transfer.destinations)
        end[d] = std::max(end[d], last_sent + target.latency(transfer.source, d));
    }
    out.critical_tile = static_cast<std::uint32_t>(std::max_element(end.begin(), end.end()) - end.begin());
  }

  /// The largest latency between `tile` and any of `peers`.
  std::uint64_t farthest(std::uint32_t tile, const std::vector<std::uint32_t>& peers) const {
    std::uint64_t latency = 0;
    for (std::uint32_t peer : peers) latency = std::max<std::uint64_t>(latency, context_->target.latency(tile, peer));
    return latency;
  }

  /// A cheap stand-in for the horizon near some tiles of one phase: per tile, the larger of
  /// its receive port (words, a switch per extra sender, the farthest sender's latency) and
  /// its send port (distinct words, the farthest receiver's latency); max and sum over
  /// `tiles`. Only `copies` are looked at: they must include every copy touching those tiles.
  Estimate port_estimate(std::uint32_t s, const std::vector<std::uint32_t>& copies,
                         const std::vector<std::uint32_t>& tiles) {
    const tessera::Target& target = context_->target;
    const tessera::Superstep& step = program_->supersteps[s];
    for (std::uint32_t tile : tiles) ports_[tile] = {};
    for (std::uint32_t index : copies) {
      const tessera::Copy& copy = step.copies[index];
      const std::uint32_t from = program_->buffers[copy.source.buffer].tile;
      const std::uint32_t to = program_->buffers[copy.destination.buffer].tile;
      const std::uint64_t latency = target.latency(from, to);
      if (affected_[to]) {
        Ports& port = ports_[to];
        port.received += copy.words;
        port.senders.push_back(from);
        port.in_latency = std::max(port.in_latency, latency);
      }
      if (affected_[from]) {
        Ports& port = ports_[from];
        port.sent_ranges.push_back({(std::uint64_t{copy.source.buffer} << 32) | copy.source.word_offset, copy.words});
        port.out_latency = std::max(port.out_latency, latency);
      }
    }
    Estimate estimate;
    for (std::uint32_t tile : tiles) {
      Ports& port = ports_[tile];
      std::sort(port.senders.begin(), port.senders.end());
      const auto senders = std::unique(port.senders.begin(), port.senders.end()) - port.senders.begin();
      std::sort(port.sent_ranges.begin(), port.sent_ranges.end());
      port.sent_ranges.erase(std::unique(port.sent_ranges.begin(), port.sent_ranges.end()), port.sent_ranges.end());
      std::uint64_t sent = 0;
      for (const auto& range : port.sent_ranges) sent += target.multicast ? range.second : 0;
      if (!target.multicast)
        for (std::uint32_t index : copies)
          sent += program_->buffers[step.copies[index].source.buffer].tile == tile ? step.copies[index].words : 0;
      const std::uint64_t receive =
          port.received == 0 ? 0 : port.received + target.switch_cost * std::uint64_t(senders - 1) + port.in_latency;
      const std::uint64_t send = sent == 0 ? 0 : sent + port.out_latency;
      estimate.max = std::max({estimate.max, receive, send});
      estimate.sum += std::max(receive, send);
    }
    return estimate;
  }

  /// Swaps of a unit on the critical tile, or exchanging with it in `phase`, with a unit of
  /// the same shape on another tile that lower the port estimate of the tiles they touch
  /// (sum lower, max not higher), the lowest first, at most partners_per_unit per unit. The
  /// scheduler, not this estimate, decides.
  std::vector<Candidate> candidates(std::uint32_t phase, std::uint32_t critical, bool whole_phase,
                                    const std::map<std::uint32_t, std::vector<std::uint32_t>>& by_shape) {
    const tessera::Superstep& step = program_->supersteps[phase];
    const std::uint32_t tiles = context_->target.tiles;
    std::vector<std::vector<std::uint32_t>> copies_of_tile(tiles), peers_of_unit(units_.size());
    for (std::uint32_t i = 0; i < step.copies.size(); ++i) {
      const tessera::Copy& copy = step.copies[i];
      const std::uint32_t from = program_->buffers[copy.source.buffer].tile;
      const std::uint32_t to = program_->buffers[copy.destination.buffer].tile;
      copies_of_tile[from].push_back(i);
      if (to != from) copies_of_tile[to].push_back(i);
      peers_of_unit[unit_of_buffer_[copy.source.buffer]].push_back(to);
      peers_of_unit[unit_of_buffer_[copy.destination.buffer]].push_back(from);
    }
    for (std::vector<std::uint32_t>& list : peers_of_unit) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
    ports_.assign(tiles, {});
    affected_.assign(tiles, false);

    // The units that set the critical tile's finish (its own and those it exchanges with),
    // or with `whole_phase` the kWholePhaseUnits units of the phase farthest from their peers.
    std::vector<bool> focus(units_.size(), false);
    for (std::uint32_t i : whole_phase ? std::vector<std::uint32_t>() : copies_of_tile[critical]) {
      focus[unit_of_buffer_[step.copies[i].source.buffer]] = true;
      focus[unit_of_buffer_[step.copies[i].destination.buffer]] = true;
    }
    if (whole_phase) {
      // The units farthest from their peers, a bounded number of them.
      std::vector<std::pair<std::uint64_t, std::uint32_t>> far;  // (-latency, unit): farthest first
      for (std::uint32_t u = 0; u < units_.size(); ++u)
        if (units_[u].movable && !peers_of_unit[u].empty())
          far.push_back({~farthest(units_[u].tile, peers_of_unit[u]), u});
      const std::size_t kept = std::min<std::size_t>(far.size(), kWholePhaseUnits);
      std::partial_sort(far.begin(), far.begin() + static_cast<std::ptrdiff_t>(kept), far.end());
      for (std::size_t i = 0; i < kept; ++i) focus[far[i].second] = true;
    }
    std::uint64_t estimates = 0;
    std::vector<Candidate> all;
    for (std::uint32_t u = 0; u < units_.size(); ++u) {
      const Unit& unit = units_[u];
      if (!focus[u] || !unit.movable) continue;
      if (estimates >= static_cast<std::uint64_t>(max_estimates_) || std::chrono::steady_clock::now() >= deadline_)
        break;
      std::vector<Candidate> mine;
      // Pre-screen partners by the farthest peer the unit would have there (cheap), then
      // estimate ports only for the closest few.
      const std::uint32_t here = unit.tile;
      std::vector<std::pair<std::uint64_t, std::uint32_t>> screened;  // (farthest peer latency, partner)
      for (std::uint32_t p : by_shape.at(unit.shape))
        if (p != u && units_[p].tile != here) screened.push_back({farthest(units_[p].tile, peers_of_unit[u]), p});
      const std::size_t kept = std::min(screened.size(), 4 * static_cast<std::size_t>(partners_per_unit_));
      std::partial_sort(screened.begin(), screened.begin() + static_cast<std::ptrdiff_t>(kept), screened.end());
      screened.resize(kept);
      for (const auto& [screen_latency, p] : screened) {
        const std::uint32_t other = units_[p].tile;
        // Estimates are cheap but not free on 10^5 copies: bounded in count and by the time budget.
        if (++estimates > static_cast<std::uint64_t>(max_estimates_) || std::chrono::steady_clock::now() >= deadline_)
          break;
        // The tiles whose ports the swap changes, and every copy touching them.
        std::vector<std::uint32_t> touched = {here, other};
        touched.insert(touched.end(), peers_of_unit[u].begin(), peers_of_unit[u].end());
        touched.insert(touched.end(), peers_of_unit[p].begin(), peers_of_unit[p].end());
        std::sort(touched.begin(), touched.end());
        touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
        std::vector<std::uint32_t> copies;
        for (std::uint32_t tile : touched) {
          affected_[tile] = true;
          copies.insert(copies.end(), copies_of_tile[tile].begin(), copies_of_tile[tile].end());
        }
        std::sort(copies.begin(), copies.end());
        copies.erase(std::unique(copies.begin(), copies.end()), copies.end());
        const Estimate before = port_estimate(phase, copies, touched);
        move_unit(u, other);
        move_unit(p, here);
        const Estimate after = port_estimate(phase, copies, touched);
        move_unit(u, here);
        move_unit(p, other);
        for (std::uint32_t tile : touched) affected_[tile] = false;
        if (after.max <= before.max && after.sum < before.sum) mine.push_back({u, p, after});
      }
      std::stable_sort(mine.begin(), mine.end(),
                       [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
      if (mine.size() > static_cast<std::size_t>(partners_per_unit_))
        mine.resize(static_cast<std::size_t>(partners_per_unit_));
      all.insert(all.end(), mine.begin(), mine.end());
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
    return all;
  }

  void move_unit(std::uint32_t u, std::uint32_t tile) {
    units_[u].tile = tile;
    for (std::uint32_t b : units_[u].buffers) program_->buffers[b].tile = tile;
    for (const auto& [s, i] : units_[u].calls) program_->supersteps[s].compute[i].tile = tile;
  }

  /// Applies the swap, schedules the phases it changes, and keeps it only if their horizons'
  /// sum drops. A swap that would put both ends of a copy on one tile is refused unscheduled.
  bool try_swap(std::uint32_t phase, const Candidate& candidate) {
    const std::uint32_t a = candidate.unit, b = candidate.partner;
    const std::uint32_t tile_a = units_[a].tile, tile_b = units_[b].tile;
    std::vector<std::uint32_t> affected;
    std::set_union(units_[a].supersteps.begin(), units_[a].supersteps.end(), units_[b].supersteps.begin(),
                   units_[b].supersteps.end(), std::back_inserter(affected));
    move_unit(a, tile_b);
    move_unit(b, tile_a);

    bool same_tile_copy = false;
    for (std::uint32_t s : affected)
      for (const tessera::Copy& copy : program_->supersteps[s].copies)
        same_tile_copy |= program_->buffers[copy.source.buffer].tile == program_->buffers[copy.destination.buffer].tile;

    std::uint64_t baseline = 0, candidate_cycles = 0;
    std::vector<PhaseState> scheduled(affected.size());
    for (std::size_t i = 0; i < affected.size(); ++i) {
      baseline += phases_[affected[i]].horizon;
      if (!same_tile_copy) schedule_phase(affected[i], scheduled[i]);
      candidate_cycles += scheduled[i].horizon;
    }
    const bool accepted = !same_tile_copy && candidate_cycles < baseline;
    context_->info(
        "optimize exchange placement phase={} baseline_cycles={} candidate_cycles={} accepted={} "
        "tiles={},{} affected_phases={} estimate={}{}",
        phase, baseline, same_tile_copy ? baseline : candidate_cycles, accepted, tile_a, tile_b, affected.size(),
        candidate.estimate.max, same_tile_copy ? " refused=same_tile_copy" : "");
    if (accepted) {
      for (std::size_t i = 0; i < affected.size(); ++i) phases_[affected[i]] = scheduled[i];
    } else {
      move_unit(a, tile_a);
      move_unit(b, tile_b);
    }
    return accepted;
  }

  std::int64_t max_attempts_ = 0, time_budget_ms_ = 0, partners_per_unit_ = 0, max_estimates_ = 0;  // set by configure
  tessera::PassContext* context_ = nullptr;
  Program* program_ = nullptr;
  std::vector<Unit> units_;
  std::vector<std::uint32_t> unit_of_buffer_;
  std::vector<PhaseState> phases_;
  std::chrono::steady_clock::time_point deadline_;
  std::vector<Ports> ports_;    ///< per tile, scratch of port_estimate
  std::vector<bool> affected_;  ///< per tile, the tiles port_estimate looks at
};

}  // namespace

extern "C" const TesseraPluginManifest* optimize_exchange_placement_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_PASS, "optimize-exchange-placement", "0.1.0",
      "swaps identically shaped work units (buffers and their codelet calls) between tiles when the scheduled "
      "exchange gets shorter",
      OptimizeExchangePlacement::option_table(), tessera::facts::plan, "exchange-placement",
      &tessera::create_plugin_object<OptimizeExchangePlacement>);
  return &manifest;
}
TESSERA_PLUGIN(optimize_exchange_placement_manifest)
