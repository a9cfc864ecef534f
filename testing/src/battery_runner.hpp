// Private to the batteries: runs checks through BatteryOptions' runner and collects results.
#pragma once
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <utility>

#include "tessera/testing/battery.hpp"

namespace tessera::testing::detail {

using Clock = std::chrono::steady_clock;

inline std::int64_t milliseconds_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

class Battery {
public:
  explicit Battery(const BatteryOptions& options) : options_(options) {}

  void record(const std::string& name, CheckOutcome outcome) {
    result_.checks.push_back({name, std::move(outcome)});
    if (options_.on_result) options_.on_result(result_.checks.back());
  }
  void run(const std::string& name, const std::function<CheckOutcome()>& check) {
    record(name, options_.runner ? options_.runner(check) : run_here(check));
  }
  BatteryResult take() { return std::move(result_); }

private:
  static CheckOutcome run_here(const std::function<CheckOutcome()>& check) {
    try {
      return check();
    } catch (const std::exception& e) {
      return CheckOutcome::fail(e.what());
    } catch (...) {
      return CheckOutcome::fail("an exception that is not a std::exception escaped");
    }
  }

  const BatteryOptions& options_;
  BatteryResult result_;
};

}  // namespace tessera::testing::detail
