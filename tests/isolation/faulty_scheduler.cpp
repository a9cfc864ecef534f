// A scheduler that fails on purpose, in the way its `fault` option names, so the tests can
// check that `isolate: process` contains each kind of failure.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/scheduler.hpp"
#include "tessera/target.hpp"

namespace {

const char* const kFaults[] = {"none",          "segfault",   "hang",        "allocate", "stdout", "invalid-schedule",
                               "protocol-junk", "grandchild", "stderr-flood"};

// Keeps the hoarded blocks reachable so the compiler cannot drop the allocations.
std::vector<char*>* volatile hoard_sink = nullptr;

class FaultyScheduler final : public tessera::ExchangeScheduler {
public:
  tessera::Status configure(const tessera::Options& options) override {
    fault_ = options.get_string("fault");
    if (std::find(std::begin(kFaults), std::end(kFaults), fault_) == std::end(kFaults))
      return tessera::Status::failure("unknown fault '" + fault_ + "'");
    return tessera::Status::success();
  }

private:
  tessera::Schedule schedule_impl(const tessera::ExchangePhase& phase, const tessera::Target& target,
                                  std::uint64_t) override {
    if (fault_ == "segfault") {
      volatile int* nowhere = nullptr;
      *nowhere = 1;
    } else if (fault_ == "hang") {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    } else if (fault_ == "allocate") {
      auto* hoard = new std::vector<char*>;
      hoard_sink = hoard;
      for (;;) {
        constexpr std::size_t kBlock = 64u << 20;
        char* block = new char[kBlock];
        for (std::size_t page = 0; page < kBlock; page += 4096) block[page] = 1;  // resident, not just reserved
        hoard->push_back(block);
      }
    } else if (fault_ == "stdout") {
      std::printf("faulty-scheduler stdout noise: not a schedule\n");
      std::fflush(stdout);
    } else if (fault_ == "invalid-schedule") {
      tessera::Schedule garbage;  // every transfer at cycle 0, plus one that does not exist
      for (std::uint32_t t = 0; t < phase.transfers.size(); ++t)
        garbage.segments.push_back({t, 0, phase.transfers[t].words});
      garbage.segments.push_back({static_cast<std::uint32_t>(phase.transfers.size()), 0, 1});
      return garbage;
    } else if (fault_ == "grandchild" && !forked_) {
      // Leaves one process behind that holds stderr open and never ends on its own.
      forked_ = true;
      const pid_t grandchild = ::fork();
      if (grandchild == 0)
        for (;;) ::pause();
      // Said by the plugin itself, before it answers: the grandchild may be killed before it
      // would ever run, so a line of its own could be lost on a busy machine.
      std::fprintf(stderr, "faulty-scheduler grandchild pid=%d\n", static_cast<int>(grandchild));
      std::fflush(stderr);
    } else if (fault_ == "stderr-flood" && !forked_) {
      forked_ = true;  // once per compile: 8 MiB of noise
      const std::string line(1023, 'e');
      for (int i = 0; i < 8192; ++i) std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
    } else if (fault_ == "protocol-junk") {
      // Writes into the plugin host's channel (fd 3), as a plugin scribbling on fds might.
      const char junk[] = "this is not a protocol frame\n";
      if (::write(3, junk, sizeof junk - 1) < 0) std::perror("faulty-scheduler");
    }
    return serial_schedule(phase, target);
  }

  // One transfer at a time, each after the previous one has fully arrived and the receivers
  // have had time to switch: slow but always valid.
  static tessera::Schedule serial_schedule(const tessera::ExchangePhase& phase, const tessera::Target& target) {
    std::uint64_t max_latency = 0;
    for (const auto& transfer : phase.transfers)
      for (auto destination : transfer.destinations)
        max_latency = std::max<std::uint64_t>(max_latency, target.latency(transfer.source, destination));
    tessera::Schedule schedule;
    std::uint64_t cycle = 0;
    for (std::uint32_t t = 0; t < phase.transfers.size(); ++t) {
      schedule.segments.push_back({t, cycle, phase.transfers[t].words});
      cycle += phase.transfers[t].words + max_latency + target.switch_cost + 1;
    }
    return schedule;
  }

  std::string fault_;
  bool forked_ = false;
};

const TesseraOptionSpec kOptions[] = {
    {"fault", "string", "none", "none, segfault, hang, allocate, stdout, invalid-schedule or protocol-junk"},
};

}  // namespace

extern "C" const TesseraPluginManifest* faulty_scheduler_manifest() noexcept {
  static const auto manifest = tessera::make_manifest(
      TESSERA_PLUGIN_EXCHANGE_SCHEDULER, "faulty-scheduler", "0.1.0",
      "fails on purpose (crash, hang, unbounded memory, stdout noise, garbage) to test isolation", kOptions, "", "",
      &tessera::create_plugin_object<FaultyScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(faulty_scheduler_manifest)
