// The ideal preemptive schedule of a phase: timed matchings of its demand graph.
#pragma once
#include <cstdint>
#include <vector>

#include "tessera/exchange.hpp"

namespace tessera::optimal {

/// Figures of one decomposition, for the log line and the tests.
struct DecompositionStats {
  std::uint64_t bound = 0;             ///< the busiest port's words (endpoint lower bound)
  std::uint64_t horizon = 0;           ///< the cycle the last word leaves
  std::uint64_t events = 0;            ///< cycles at which the running matching changed
  std::uint64_t augmenting_paths = 0;  ///< re-matchings of a critical port that moved others
  std::uint64_t splits = 0;            ///< runs cut short to make room (each an extra segment)
  std::uint64_t longest_path = 0;      ///< most edges moved by one augmenting path
  std::uint64_t stalls = 0;            ///< times a critical port found no partner (multicast)
};

/// Schedules `transfers` (indices into `phase.transfers`, each with at least one word and
/// at least one destination) preemptively for a fabric without latency or switch cost, and
/// appends the segments to `out`.
///
/// The phase is a graph with a vertex per sending and per receiving port and an edge per
/// transfer (a hyperedge for a multicast), weighted by its words, never expanded into
/// words. A matching of it runs over time; at cycle t a port is *critical* when its words
/// left equal horizon - t. Keeping every critical port matched keeps every port within the
/// horizon. Without multicast such a matching always exists (the graph padded with idle
/// edges is regular, so it has a perfect matching: König, Birkhoff-von Neumann), and the
/// horizon is the bound, the optimum of the preemptive problem (Gonzalez and Sahni 1976).
/// With multicast a critical port may find no partner; then the horizon grows.
DecompositionStats decompose_into_matchings(const ExchangePhase& phase, const std::vector<std::uint32_t>& transfers,
                                            std::vector<Segment>& out);

}  // namespace tessera::optimal
