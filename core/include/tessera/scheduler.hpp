// The exchange-scheduler plugin interface. The core validates every schedule returned.
#pragma once
#include <cstdint>

#include "tessera/exchange.hpp"
#include "tessera/plugin.hpp"

namespace tessera {

struct Target;

class ExchangeScheduler : public PluginObject {
public:
  /// Checks the phase (check_phase: a malformed one is the caller's Error, and schedule_impl
  /// is not called), schedules it within about `budget_ms`, then validates the result; an
  /// invalid schedule or an exception is a PluginError naming this plugin and the first conflict.
  Schedule schedule(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms,
                    ScheduleReport* report = nullptr);

protected:
  /// Called with a phase check_phase accepted for `target`.
  virtual Schedule schedule_impl(const ExchangePhase& phase, const Target& target, std::uint64_t budget_ms) = 0;
};

}  // namespace tessera
