// Local parallel execution of A/B work items with memory-aware admission of simulator runs.
#include "executor_local.hpp"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tessera/diagnostic.hpp"
#include "tessera/log.hpp"

namespace tessera::ab {

bool MemoryGate::admits(std::int64_t kib) {
  std::lock_guard lock(mutex_);
  return fits(kib);
}

void MemoryGate::acquire(std::int64_t kib) {
  std::unique_lock lock(mutex_);
  freed_.wait(lock, [&] { return fits(kib); });
  reserved_kib_ += kib;
  ++running_;
}

void MemoryGate::release(std::int64_t kib) {
  {
    std::lock_guard lock(mutex_);
    reserved_kib_ -= kib;
    --running_;
  }
  freed_.notify_all();
}

std::int64_t expected_run_kib(const ResultsDir& results, const Manifest& manifest, const SuiteEntry& entry,
                              const Target& target) {
  std::int64_t measured = 0;
  for (const ArmInfo& arm : manifest.arms)
    for (std::uint32_t repeat = 0; repeat < manifest.repeat; ++repeat)
      if (auto record = results.read_record(entry.id, arm.name, repeat); record && record->run.performed)
        measured = std::max(measured, record->run.process.peak_rss_kib);
  return measured > 0 ? measured : static_cast<std::int64_t>(std::uint64_t{target.tiles} * target.memory_bytes / 1024);
}

MemoryReservation reserve_run(MemoryGate* gate, const ResultsDir& results, const Manifest& manifest,
                              const SuiteEntry& entry, const Target& target) {
  return {gate, gate ? expected_run_kib(results, manifest, entry, target) : 0};
}

std::int64_t available_memory_kib() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);)
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      std::int64_t kib = 0;
      fields >> kib;
      return kib;
    }
  return 0;
}

RunnerStats run_local(const Manifest& manifest, const ResultsDir& results, const std::vector<WorkItem>& items,
                      const RunnerOptions& options, unsigned jobs, bool lock_given) {
  if (jobs <= 1) return run_work(manifest, results, items, options);
  // A model's items stay together and in plan order: the twin's package is compared with the
  // baseline's, and an arm's repeat-0 run follows its compile.
  std::map<std::size_t, std::vector<WorkItem>> by_model;
  std::vector<std::size_t> order;
  for (const WorkItem& item : items) {
    if (!by_model.count(item.entry)) order.push_back(item.entry);
    by_model[item.entry].push_back(item);
  }
  MemoryGate gate(available_memory_kib());
  logger("tessera.ab")
      ->info("local executor jobs={} models={} items={} memory_budget_kib={}", jobs, order.size(), items.size(),
             gate.budget_kib());
  std::atomic<std::size_t> next{0};
  std::mutex merge;
  RunnerStats total;
  std::exception_ptr failure;
  auto worker = [&](unsigned slot) {
    RunnerOptions mine = options;
    mine.memory = &gate;
    // Each worker drives its own simulated device, so runs are not serialised on one lock.
    if (!lock_given) mine.lock_path = results.absolute("device-" + std::to_string(slot) + ".lock");
    try {
      for (std::size_t at = next++; at < order.size(); at = next++) {
        const RunnerStats stats = run_work(manifest, results, by_model.at(order[at]), mine);
        std::lock_guard lock(merge);
        total += stats;
      }
    } catch (...) {
      std::lock_guard lock(merge);
      if (!failure) failure = std::current_exception();
      next = order.size();  // the others finish their model and stop
    }
  };
  std::vector<std::thread> workers;
  for (unsigned slot = 0; slot < std::min<std::size_t>(jobs, order.size()); ++slot) workers.emplace_back(worker, slot);
  for (std::thread& thread : workers) thread.join();
  if (failure) std::rethrow_exception(failure);
  return total;
}

}  // namespace tessera::ab
