// Timed matchings that keep every critical port busy: the optimal preemptive schedule.
//
// Why it is optimal without multicast: pad the demand graph with idle edges until every port
// totals the bound B; the result is B-regular, so it has a perfect matching (Hall), whose real
// edges cover every port with no idle cycle to spare (a critical port). So at any cycle t,
// while every port holds at most B - t words, some matching covers all critical ports;
// running it keeps the invariant, and at t = B nothing is left.
//
// Instead of fixed idle edges (a Birkhoff-von Neumann decomposition of the padded graph), a
// port that is not critical simply may idle. That freedom is what keeps transfers whole: the
// padded decomposition splits transfers at almost every step, this one about never. The
// running matching stays in place between events, and an event
// - frees the ports of the transfers that finished;
// - matches every idle critical port, cheapest first: among its heaviest transfers (same-sized
//   transfers end together, so rounds of permutations, shifts or slices stay aligned, in
//   whatever order the phase lists them), to any idle partner, along an alternating path
//   that moves only edges matched in this event (depth-first), or along the path that
//   interrupts the fewest running transfers (0-1 breadth-first, through critical ports only,
//   ending at an idle port or at one that may idle);
// - lets freed ports take idle partners greedily, heaviest transfer first, so no transfer
//   has all its ports idle.
// A multicast transfer is a hyperedge that runs when all its ports are idle and is never
// moved; a critical port that then finds no partner stretches the horizon instead.
//
// Work stays proportional to transfers, never to words: two heaps give the next event (a
// transfer finishing, an idle port turning critical), only the ports an event touches are
// looked at, and a finished transfer marks its adjacency entries, which scans skip and
// compaction squeezes out.
#include "matching_decomposition.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace tessera::optimal {
namespace {

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

// A broken invariant here would loop or index out of bounds; fail loudly instead (the host
// reports the exception with the plugin's name).
[[noreturn]] void internal_error(const std::string& what) {
  throw std::logic_error("optimal scheduler internal error: " + what);
}

// One transfer. Vertices 0..tiles-1 are sending ports, tiles..2*tiles-1 receiving ports.
struct Edge {
  std::uint32_t sender = 0;
  std::uint32_t receiver = 0;   ///< unicast: the receiving vertex; multicast: its receiver list
  std::uint32_t remaining = 0;  ///< words left, as of the last time it left the matching
  bool multicast = false;
  bool matched = false;
  bool run_open = false;        ///< matched, or displaced in this event and perhaps taken back
  std::uint64_t end = 0;        ///< while matched: the cycle its words run out
  std::uint64_t run_start = 0;  ///< while its run is open: the cycle the run began

  std::uint32_t other(std::uint32_t vertex) const { return vertex == sender ? receiver : sender; }
};

// An entry of a port's adjacency list; `vertex` is the unicast partner or kMulticastEntry,
// `edge` is kFinished once the transfer is done. Eight bytes, as the scans read little else.
struct Neighbour {
  std::uint32_t edge, vertex;
};
constexpr std::uint32_t kMulticastEntry = kNone;
constexpr std::uint32_t kFinished = kNone;  ///< in Neighbour::edge: the transfer is done
constexpr std::uint32_t kAnyClass = 0;      ///< no transfer has 0 words

struct Port {
  std::uint64_t words = 0;  ///< left to send or receive, as of `since` while matched
  std::uint64_t since = 0;
  std::uint32_t mate = kNone;  ///< the matched edge
  std::uint32_t seen = 0;      ///< stamp of the last search that reached it
  std::uint32_t cost = 0;      ///< in that search: transfers interrupted to reach it
  std::uint32_t via = kNone;   ///< in that search: the edge leading to its mate's partner
};

// (key, id) heaps: the next transfer to finish (min by cycle), the idle port with the most
// words, which turns critical first (max by words).
using KeyedHeap = std::vector<std::pair<std::uint64_t, std::uint32_t>>;

class CriticalPortMatcher {
public:
  CriticalPortMatcher(const ExchangePhase& phase, const std::vector<std::uint32_t>& transfers,
                      std::vector<Segment>& out)
      : phase_(phase), transfers_(transfers), out_(out), tiles_(phase.tiles) {}

  DecompositionStats run() {
    build_edges();
    if (stats_.bound == 0) return stats_;
    build_adjacency();

    horizon_ = stats_.bound;
    now_ = 0;
    for (std::uint32_t vertex = 0; vertex < 2 * tiles_; ++vertex)
      if (ports_[vertex].words > 0) touched_.push_back(vertex);
    handle_event();
    while (true) {
      std::uint64_t next = ends_.empty() ? kNever : ends_.front().first;
      drop_stale_idle();
      // An idle port turns critical when the time left falls to its words; one that already
      // is (it found no partner) waits for the next transfer to finish.
      if (!idle_.empty() && horizon_ - idle_.front().first > now_)
        next = std::min(next, horizon_ - idle_.front().first);
      if (next == kNever) break;
      now_ = next;
      while (!ends_.empty() && ends_.front().first == now_) {
        std::pop_heap(ends_.begin(), ends_.end(), std::greater<>());
        const auto [end, index] = ends_.back();
        ends_.pop_back();
        if (edges_[index].matched && edges_[index].end == end) finish(index);
      }
      handle_event();
    }
    for (const Port& port : ports_)
      if (port.words != 0) internal_error("a port still has words after the last event");
    stats_.horizon = now_;
    if (multicast_edges_ == 0 && stats_.horizon != stats_.bound)
      internal_error(fmt::format("the schedule ends at cycle {}, not at the bound {}", stats_.horizon, stats_.bound));
    return stats_;
  }

private:
  void build_edges() {
    ports_.assign(2 * std::size_t{tiles_}, Port{});
    edges_.resize(transfers_.size());
    for (std::size_t i = 0; i < transfers_.size(); ++i) {
      const Transfer& transfer = phase_.transfers[transfers_[i]];
      Edge& edge = edges_[i];
      edge.sender = transfer.source;
      edge.remaining = transfer.words;
      ports_[transfer.source].words += transfer.words;
      if (transfer.destinations.size() == 1) {
        edge.receiver = tiles_ + transfer.destinations.front();
      } else {
        edge.multicast = true;
        edge.receiver = static_cast<std::uint32_t>(multicast_begin_.size());
        multicast_begin_.push_back(static_cast<std::uint32_t>(multicast_receivers_.size()));
        ++multicast_edges_;
      }
      for (std::uint32_t destination : transfer.destinations) {
        ports_[tiles_ + destination].words += transfer.words;
        if (edge.multicast) multicast_receivers_.push_back(tiles_ + destination);
      }
    }
    multicast_begin_.push_back(static_cast<std::uint32_t>(multicast_receivers_.size()));
    for (const Port& port : ports_) stats_.bound = std::max(stats_.bound, port.words);
  }

  // Calls `visit(vertex)` for every port of the edge.
  template <typename Visit>
  void for_each_port(const Edge& edge, Visit visit) const {
    visit(edge.sender);
    if (!edge.multicast) {
      visit(edge.receiver);
      return;
    }
    for (std::uint32_t k = multicast_begin_[edge.receiver]; k < multicast_begin_[edge.receiver + 1]; ++k)
      visit(multicast_receivers_[k]);
  }

  // A multicast to more receivers than this is listed only at its sender: were a broadcast
  // in every receiver's list, every freed receiver would check it. It watches one busy port
  // instead (see wake_watchers). Narrower ones are listed at every port, where the scans
  // weigh them against unicast transfers by size, which packs them better.
  static constexpr std::uint32_t kWideMulticast = 16;
  bool is_wide(const Edge& edge) const {
    return edge.multicast && multicast_begin_[edge.receiver + 1] - multicast_begin_[edge.receiver] > kWideMulticast;
  }

  // Calls `visit(vertex)` for the ports whose adjacency lists hold the edge.
  template <typename Visit>
  void for_each_listing_port(const Edge& edge, Visit visit) const {
    if (is_wide(edge)) visit(edge.sender);
    else for_each_port(edge, visit);
  }

  // Each vertex's edges as one slice of `adjacency_`, heaviest first (phase order among
  // equals). Entries carry the partner and are marked in place when their transfer
  // finishes, so a scan reads the slice in order and the ports, never the edges.
  void build_adjacency() {
    adjacency_begin_.assign(2 * std::size_t{tiles_} + 1, 0);
    for (const Edge& edge : edges_)
      for_each_listing_port(edge, [&](std::uint32_t vertex) { ++adjacency_begin_[vertex + 1]; });
    for (std::uint32_t vertex = 0; vertex < 2 * tiles_; ++vertex)
      adjacency_begin_[vertex + 1] += adjacency_begin_[vertex];
    struct Sortable {
      Neighbour entry;
      std::uint32_t words;
    };
    std::vector<Sortable> sortable(adjacency_begin_.back());
    live_begin_.assign(adjacency_begin_.begin(), adjacency_begin_.end() - 1);
    live_end_ = live_begin_;
    for (std::uint32_t index = 0; index < edges_.size(); ++index) {
      const Edge& edge = edges_[index];
      for_each_listing_port(edge, [&](std::uint32_t vertex) {
        const std::uint32_t partner =
            edge.multicast ? kMulticastEntry : (vertex == edge.sender ? edge.receiver : edge.sender);
        sortable[live_end_[vertex]++] = {{index, partner}, edge.remaining};
      });
    }
    for (std::uint32_t vertex = 0; vertex < 2 * tiles_; ++vertex)
      std::stable_sort(sortable.begin() + adjacency_begin_[vertex], sortable.begin() + live_end_[vertex],
                       [](const Sortable& x, const Sortable& y) { return x.words > y.words; });
    adjacency_.resize(sortable.size());
    entry_words_.resize(sortable.size());
    for (std::size_t position = 0; position < sortable.size(); ++position) {
      adjacency_[position] = sortable[position].entry;
      entry_words_[position] = sortable[position].words;
    }
    sortable = {};
    // Each edge records where its entries are, to mark them when it finishes.
    entry_begin_.assign(edges_.size() + 1, 0);
    for (const Neighbour& entry : adjacency_) ++entry_begin_[entry.edge + 1];
    for (std::size_t index = 0; index < edges_.size(); ++index) entry_begin_[index + 1] += entry_begin_[index];
    entry_positions_.resize(adjacency_.size());
    entry_slots_.resize(adjacency_.size());
    std::vector<std::uint32_t> fill(entry_begin_.begin(), entry_begin_.end() - 1);
    for (std::uint32_t position = 0; position < adjacency_.size(); ++position) {
      entry_slots_[position] = fill[adjacency_[position].edge]++;
      entry_positions_[entry_slots_[position]] = position;
    }
    finished_entries_.assign(2 * std::size_t{tiles_}, 0);
    busy_.assign(2 * std::size_t{tiles_}, 0);
    watchers_.assign(2 * std::size_t{tiles_}, {});
    watched_port_.assign(edges_.size(), kNone);
    for (std::uint32_t index = 0; index < edges_.size(); ++index)
      if (is_wide(edges_[index])) {
        watch(index, edges_[index].sender);
        ++wide_multicast_edges_;
      }
  }

  void watch(std::uint32_t index, std::uint32_t vertex) {
    watched_port_[index] = vertex;
    watchers_[vertex].push_back(index);
  }

  // The idle `vertex` was a port some wide multicasts waited for (as with watched literals
  // in a SAT solver): each starts if all its ports are now idle, else watches a port still
  // busy. So a wide multicast is looked at only when a port it waits for frees. Entries of
  // multicasts that started, finished or moved on are dropped here.
  void wake_watchers(std::uint32_t vertex) {
    std::vector<std::uint32_t>& list = watchers_[vertex];
    std::size_t kept = 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::uint32_t index = list[i];
      const Edge& edge = edges_[index];
      if (watched_port_[index] != vertex || edge.matched || edge.remaining == 0) continue;
      if (!is_idle(vertex)) {  // taken by an earlier multicast of this list: keep waiting here
        list[kept++] = index;
        continue;
      }
      std::uint32_t busy = kNone;
      for_each_port(edge, [&](std::uint32_t port) {
        if (busy == kNone && !is_idle(port)) busy = port;
      });
      if (busy == kNone) {
        enter(index);
        list[kept++] = index;  // dropped on a later wake, as it is matched or finished
      } else {
        watch(index, busy);
      }
    }
    list.resize(kept);
  }

  // Squeezes the finished entries out of `vertex`'s live slice once they are a quarter of
  // it, keeping the order; called only before a scan of the slice starts, as it moves
  // entries. Scans then stay proportional to live transfers.
  void compact(std::uint32_t vertex) {
    const std::uint32_t live = live_end_[vertex] - live_begin_[vertex];
    if (finished_entries_[vertex] < 8 || 4 * finished_entries_[vertex] < live) return;
    std::uint32_t kept = live_begin_[vertex];
    for (std::uint32_t position = live_begin_[vertex]; position < live_end_[vertex]; ++position) {
      if (adjacency_[position].edge == kFinished) continue;
      entry_positions_[entry_slots_[position]] = kept;
      adjacency_[kept] = adjacency_[position];
      entry_words_[kept] = entry_words_[position];
      entry_slots_[kept++] = entry_slots_[position];
    }
    live_end_[vertex] = kept;
    finished_entries_[vertex] = 0;
  }

  // The first live entry of `vertex`'s list at or after `position`, which it moves there;
  // null at the end. Finished transfers are skipped, and trimmed off the ends of the live
  // slice; nothing moves, so the order the scans rely on stays.
  const Neighbour* next_live(std::uint32_t vertex, std::uint32_t& position) {
    for (; position < live_end_[vertex]; ++position) {
      const Neighbour& entry = adjacency_[position];
      if (entry.edge != kFinished) return &entry;
      if (position == live_begin_[vertex]) {
        ++live_begin_[vertex];
        --finished_entries_[vertex];
      }
    }
    while (live_end_[vertex] > live_begin_[vertex] && adjacency_[live_end_[vertex] - 1].edge == kFinished) {
      --live_end_[vertex];
      --finished_entries_[vertex];
    }
    return nullptr;
  }

  std::uint64_t words_left(std::uint32_t vertex) const {
    const Port& port = ports_[vertex];
    return port.mate == kNone ? port.words : port.words - (now_ - port.since);
  }
  // No idle cycle to spare: it must be busy from now until the horizon.
  bool is_critical(std::uint32_t vertex) const { return words_left(vertex) == horizon_ - now_; }
  // Read from a byte per port, which stays in the first-level cache during scans.
  bool is_idle(std::uint32_t vertex) const { return !busy_[vertex]; }
  void set_mate(std::uint32_t vertex, std::uint32_t index) {
    ports_[vertex].mate = index;
    busy_[vertex] = index != kNone;
  }

  // Brings the port's words up to now_, before its matched edge changes.
  void settle(std::uint32_t vertex) {
    Port& port = ports_[vertex];
    if (port.mate != kNone) port.words -= now_ - port.since;
    port.since = now_;
  }

  void drop_stale_idle() {
    while (!idle_.empty()) {
      const auto [words, vertex] = idle_.front();
      if (is_idle(vertex) && ports_[vertex].words == words) return;
      std::pop_heap(idle_.begin(), idle_.end());
      idle_.pop_back();
    }
  }

  void handle_event() {
    ++stats_.events;
    // A critical port left idle (it found no partner) stretches the horizon as time passes.
    drop_stale_idle();
    if (!idle_.empty()) horizon_ = std::max(horizon_, now_ + idle_.front().first);
    while (!idle_.empty() && idle_.front().first == horizon_ - now_) {
      critical_.push_back(idle_.front().second);
      std::pop_heap(idle_.begin(), idle_.end());
      idle_.pop_back();
      drop_stale_idle();
    }
    for (std::uint32_t vertex : touched_)
      if (is_idle(vertex) && ports_[vertex].words > 0 && is_critical(vertex)) critical_.push_back(vertex);
    // Critical ports first, so free partners go where they are needed.
    for (std::uint32_t vertex : critical_)
      if (is_idle(vertex) && !match_in_class(vertex) && !match_directly(vertex) && !augment_without_splits(vertex) &&
          !augment_from(vertex, kAnyClass))
        ++stats_.stalls;
    // touched_ may grow here: a path's last port is left idle and joins it.
    for (std::size_t i = 0; i < touched_.size(); ++i) {
      const std::uint32_t vertex = touched_[i];
      if (!is_idle(vertex)) continue;
      if (wide_multicast_edges_ > 0) wake_watchers(vertex);
      if (is_idle(vertex) && ports_[vertex].words > 0) match_directly(vertex);
    }
    for (std::uint32_t index : displaced_) {
      Edge& edge = edges_[index];
      if (edge.matched || !edge.run_open) continue;  // taken back, or already closed
      stats_.splits += now_ > edge.run_start;        // a run cut short: one more segment
      close_run(index);
    }
    displaced_.clear();
    for (const std::vector<std::uint32_t>* list : {&touched_, &critical_})
      for (std::uint32_t vertex : *list)
        if (is_idle(vertex) && ports_[vertex].words > 0) {
          idle_.emplace_back(ports_[vertex].words, vertex);
          std::push_heap(idle_.begin(), idle_.end());
        }
    touched_.clear();
    critical_.clear();
  }

  bool all_ports_idle(const Edge& edge) const {
    bool idle = true;
    for_each_port(edge, [&](std::uint32_t vertex) { idle = idle && is_idle(vertex); });
    return idle;
  }

  // Matches the idle `vertex` to its first transfer, in the list's order, whose ports are
  // idle; with `class_words`, only among transfers of that many words.
  bool match_directly(std::uint32_t vertex, std::uint32_t class_words = kAnyClass) {
    compact(vertex);
    for (std::uint32_t position = live_begin_[vertex];; ++position) {
      const Neighbour* entry = next_live(vertex, position);
      if (!entry || (class_words != kAnyClass && entry_words_[position] < class_words)) return false;
      if (class_words != kAnyClass && entry_words_[position] != class_words) continue;
      if (entry->vertex == kMulticastEntry ? all_ports_idle(edges_[entry->edge]) : is_idle(entry->vertex)) {
        enter(entry->edge);
        return true;
      }
    }
  }

  // Matches the idle critical `vertex` among the transfers of its heaviest size, directly or
  // by moving only transfers matched in this event. Transfers of one size end together, so
  // a phase made of same-sized rounds (permutations, shifts, slices) is scheduled round by
  // round, whatever order it lists them in; a lighter transfer taken too early would end in
  // the middle of the next round and interrupt it.
  bool match_in_class(std::uint32_t vertex) {
    std::uint32_t position = live_begin_[vertex];
    if (!next_live(vertex, position)) return false;
    const std::uint32_t words = entry_words_[position];
    return match_directly(vertex, words) || augment_from(vertex, words);
  }

  // Depth-first search with look-ahead (Duff, Kaya and Uçar 2011) for an alternating path
  // from the idle critical `root` that moves only edges matched in this event, so it splits
  // nothing: from each port, first an idle partner ends the path, else the search goes on
  // from the critical mate of a partner whose edge is fresh (a mate that may idle ends it).
  // When an event has re-matched many ports, such a path is usually short, and going deep
  // finds it after far fewer scans than a breadth-first search; when none exists, the 0-1
  // breadth-first search below looks for the cheapest path.
  bool augment_without_splits(std::uint32_t root) {
    new_search();
    ports_[root].seen = stamp_;
    ports_[root].via = kNone;
    frames_.clear();
    frames_.push_back({root, kNone});
    while (!frames_.empty()) {
      Frame& frame = frames_.back();
      const std::uint32_t from = frame.vertex;
      if (frame.position == kNone) {  // first visit: look ahead for an idle partner
        compact(from);
        frame.position = live_begin_[from];
        for (std::uint32_t position = live_begin_[from];; ++position) {
          const Neighbour* entry = next_live(from, position);
          if (!entry) break;
          if (entry->vertex != kMulticastEntry && entry->edge != ports_[from].mate && is_idle(entry->vertex)) {
            flip_path(root, from, entry->edge, false);
            return true;
          }
        }
      }
      const Neighbour* entry = next_live(from, frame.position);
      if (!entry) {
        frames_.pop_back();
        continue;
      }
      ++frame.position;
      const std::uint32_t neighbour = entry->vertex;
      if (neighbour == kMulticastEntry || entry->edge == ports_[from].mate) continue;
      const std::uint32_t blocking = ports_[neighbour].mate;
      if (blocking == kNone || edges_[blocking].multicast || !is_fresh(blocking)) continue;
      const std::uint32_t next = edges_[blocking].other(neighbour);
      if (!is_critical(next)) {
        flip_path(root, from, entry->edge, true);
        return true;
      }
      if (ports_[next].seen == stamp_) continue;
      ports_[next].seen = stamp_;
      ports_[next].via = entry->edge;
      frames_.push_back({next, kNone});
    }
    return false;
  }

  // A new stamp, so ports seen by earlier searches count as unseen.
  void new_search() {
    if (++stamp_ != 0) return;
    for (Port& port : ports_) port.seen = 0;
    stamp_ = 1;
  }

  // Taking an edge out costs a segment unless its run began in this very event.
  bool is_fresh(std::uint32_t index) const { return edges_[index].run_start == now_; }

  // Looks for the alternating path from the idle critical `root` that interrupts the fewest
  // running transfers: a 0-1 breadth-first search in which moving a matched unicast edge
  // costs 1, or 0 when it was matched in this event. From a critical port, an edge to an
  // idle port ends the search; an edge to a port whose mate may idle ends it once that
  // mate's edge is moved; a mate that must stay busy is searched from next. Searching only
  // from critical ports keeps the search small. Without multicast a path always exists:
  // some matching covers every critical port, and its symmetric difference with the running
  // one holds one. Multicast edges are never moved. False when no path exists.
  bool augment_from(std::uint32_t root, std::uint32_t class_words) {
    const bool in_class = class_words != kAnyClass;
    new_search();
    level_now_.clear();
    level_next_.clear();
    level_now_.push_back(root);
    ports_[root].seen = stamp_;
    ports_[root].cost = 0;
    ports_[root].via = kNone;
    for (std::uint32_t level = 0; !level_now_.empty(); ++level) {
      std::uint32_t detour_edge = kNone, detour_from = kNone;
      // level_now_ grows while it is read: moves that cost nothing stay on this level.
      for (std::size_t i = 0; i < level_now_.size(); ++i) {
        const std::uint32_t from = level_now_[i];
        if (ports_[from].cost != level) continue;  // reached more cheaply since
        compact(from);
        for (std::uint32_t position = live_begin_[from];; ++position) {
          const Neighbour* entry = next_live(from, position);
          if (!entry) break;
          const std::uint32_t index = entry->edge, neighbour = entry->vertex;
          if (in_class && entry_words_[position] != class_words) {
            if (entry_words_[position] < class_words) break;
            continue;
          }
          if (neighbour == kMulticastEntry || index == ports_[from].mate) continue;
          const std::uint32_t blocking = ports_[neighbour].mate;
          if (blocking == kNone) {
            flip_path(root, from, index, false);
            return true;
          }
          if (edges_[blocking].multicast || (in_class && !is_fresh(blocking))) continue;
          const std::uint32_t cost = level + (is_fresh(blocking) ? 0 : 1);
          const std::uint32_t next = edges_[blocking].other(neighbour);
          if (!is_critical(next)) {
            if (cost == level) {
              flip_path(root, from, index, true);
              return true;
            }
            if (detour_edge == kNone) {
              detour_edge = index;
              detour_from = from;
            }
            continue;
          }
          Port& port = ports_[next];
          if (port.seen == stamp_ && port.cost <= cost) continue;
          port.seen = stamp_;
          port.cost = cost;
          port.via = index;
          (cost == level ? level_now_ : level_next_).push_back(next);
        }
      }
      // A detour costs level + 1, as much as any idle port found deeper, and is shorter.
      if (detour_edge != kNone) {
        flip_path(root, detour_from, detour_edge, true);
        return true;
      }
      level_now_.swap(level_next_);
      level_next_.clear();
    }
    if (!in_class && multicast_edges_ == 0)
      internal_error(fmt::format("no alternating path from critical port {} at cycle {}", root, now_));
    return false;
  }

  // Matches `last_edge` (from `deepest` to a port that is idle, or whose mate is moved off
  // and left idle when `leaves_mate_idle`), and shifts every port on the way back to `root`
  // onto the edge that led to it.
  void flip_path(std::uint32_t root, std::uint32_t deepest, std::uint32_t last_edge, bool leaves_mate_idle) {
    path_displace_.clear();
    path_enter_.clear();
    path_enter_.push_back(last_edge);
    std::uint32_t left_idle = kNone;
    if (leaves_mate_idle) {
      const std::uint32_t end = edges_[last_edge].other(deepest);
      path_displace_.push_back(ports_[end].mate);
      left_idle = edges_[ports_[end].mate].other(end);
    }
    for (std::uint32_t vertex = deepest; vertex != root;) {
      const std::uint32_t mate = ports_[vertex].mate;
      const std::uint32_t via = ports_[vertex].via;
      path_displace_.push_back(mate);
      path_enter_.push_back(via);
      vertex = edges_[via].other(edges_[mate].other(vertex));
    }
    for (std::uint32_t index : path_displace_) displace(index);
    for (std::uint32_t index : path_enter_) enter(index);
    if (left_idle != kNone) touched_.push_back(left_idle);
    ++stats_.augmenting_paths;
    stats_.longest_path = std::max<std::uint64_t>(stats_.longest_path, path_displace_.size());
  }

  void enter(std::uint32_t index) {
    Edge& edge = edges_[index];
    for_each_port(edge, [&](std::uint32_t vertex) {
      settle(vertex);
      set_mate(vertex, index);
    });
    edge.matched = true;
    // Moved off and taken back in the same event: the run goes on, its end (and the heap
    // entry for it) unchanged.
    if (edge.run_open) return;
    edge.run_open = true;
    edge.run_start = now_;
    edge.end = now_ + edge.remaining;
    ends_.emplace_back(edge.end, index);
    std::push_heap(ends_.begin(), ends_.end(), std::greater<>());
  }

  // Takes a matched unicast edge out at now_. Its run stays open until the event ends, in
  // case another path takes it back.
  void displace(std::uint32_t index) {
    Edge& edge = edges_[index];
    for_each_port(edge, [&](std::uint32_t vertex) {
      settle(vertex);
      set_mate(vertex, kNone);
    });
    edge.matched = false;
    edge.remaining = static_cast<std::uint32_t>(edge.end - now_);
    displaced_.push_back(index);
  }

  void finish(std::uint32_t index) {
    Edge& edge = edges_[index];
    for_each_port(edge, [&](std::uint32_t vertex) {
      settle(vertex);
      set_mate(vertex, kNone);
      touched_.push_back(vertex);
    });
    edge.matched = false;
    edge.remaining = 0;
    for (std::uint32_t k = entry_begin_[index]; k < entry_begin_[index + 1]; ++k)
      adjacency_[entry_positions_[k]].edge = kFinished;
    for_each_listing_port(edge, [&](std::uint32_t vertex) { ++finished_entries_[vertex]; });
    close_run(index);
  }

  // The transfer's next words left its source over [run_start, now_): one segment.
  void close_run(std::uint32_t index) {
    Edge& edge = edges_[index];
    edge.run_open = false;
    if (now_ > edge.run_start)
      out_.push_back(Segment{transfers_[index], edge.run_start, static_cast<std::uint32_t>(now_ - edge.run_start)});
  }

  const ExchangePhase& phase_;
  const std::vector<std::uint32_t>& transfers_;
  std::vector<Segment>& out_;
  const std::uint32_t tiles_;
  DecompositionStats stats_;

  std::vector<Edge> edges_;                                           ///< edges_[i] is transfers_[i]
  std::vector<std::uint32_t> multicast_begin_, multicast_receivers_;  ///< receiver vertices
  std::uint64_t multicast_edges_ = 0, wide_multicast_edges_ = 0;
  std::vector<Port> ports_;
  std::vector<std::uint8_t> busy_;  ///< per port: matched
  std::vector<Neighbour> adjacency_;
  std::vector<std::uint32_t> adjacency_begin_, live_begin_, live_end_;
  std::vector<std::uint32_t> entry_words_;  ///< parallel to adjacency_: the transfer's words, the list order
  std::vector<std::uint32_t> entry_slots_;  ///< parallel to adjacency_: where entry_positions_ records it
  std::vector<std::uint32_t> entry_begin_, entry_positions_;  ///< each edge's adjacency entries
  std::vector<std::uint32_t> finished_entries_;               ///< per vertex: finished entries in its live slice
  std::vector<std::vector<std::uint32_t>> watchers_;          ///< per port: multicasts that may wait for it
  std::vector<std::uint32_t> watched_port_;                   ///< per multicast edge: the port it waits for

  std::uint64_t now_ = 0;
  std::uint64_t horizon_ = 0;             ///< the bound, stretched while a critical port finds no partner
  KeyedHeap ends_;                        ///< (end cycle, edge), min-heap
  KeyedHeap idle_;                        ///< (words, port) of idle ports, max-heap
  std::vector<std::uint32_t> touched_;    ///< ports freed or left idle in this event
  std::vector<std::uint32_t> critical_;   ///< idle critical ports to match in this event
  std::vector<std::uint32_t> displaced_;  ///< edges moved off in this event
  std::vector<std::uint32_t> level_now_, level_next_, path_displace_, path_enter_;
  struct Frame {
    std::uint32_t vertex;
    std::uint32_t position;  ///< next entry of its list to descend through; kNone before the look-ahead
  };
  std::vector<Frame> frames_;  ///< the depth-first search's path
  std::uint32_t stamp_ = 0;
};

}  // namespace

DecompositionStats decompose_into_matchings(const ExchangePhase& phase, const std::vector<std::uint32_t>& transfers,
                                            std::vector<Segment>& out) {
  return CriticalPortMatcher(phase, transfers, out).run();
}

}  // namespace tessera::optimal
