// What the batteries' results say as a whole.
#include "tessera/testing/battery.hpp"

#include <algorithm>

namespace tessera::testing {

bool BatteryResult::all_passed() const { return failed() == 0; }

std::size_t BatteryResult::failed() const {
  return static_cast<std::size_t>(
      std::count_if(checks.begin(), checks.end(), [](const CheckResult& check) { return !check.outcome.passed; }));
}

std::string BatteryResult::failures() const {
  std::string lines;
  for (const CheckResult& check : checks)
    if (!check.outcome.passed) lines += check.name + ": " + check.outcome.detail + "\n";
  return lines;
}

}  // namespace tessera::testing
