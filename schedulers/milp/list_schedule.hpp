// A simple dense list schedule: the MILP's horizon upper bound, first incumbent and fallback.
#pragma once
#include "tessera/exchange.hpp"

namespace tessera {
struct Target;
}

namespace tessera::milp {

/// Non-preemptive, event-driven: each sender, when free, starts the transfer it can start
/// now whose heaviest receiver has the most words left (ties: a receiver already listening,
/// then the lower index), or waits for the first one that can start. Respects latency,
/// switch cost and multicast; linear in transfers times a sender's transfer count, so it
/// also serves phases far too big for the model.
tessera::Schedule list_schedule(const tessera::ExchangePhase& phase, const tessera::Target& target);

}  // namespace tessera::milp
