// A scheduler whose static initialiser fails on purpose, in the way TESSERA_LOAD_FAULT names
// (built once per fault), so the tests can check that the host loads libraries in a child first.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "tessera/scheduler.hpp"

#define TESSERA_FAULT_CRASH 1
#define TESSERA_FAULT_HANG 2
#define TESSERA_FAULT_EXIT 3
#define TESSERA_FAULT_ALLOCATE 4

namespace {

volatile std::uintptr_t nowhere = 0;

// Keeps the hoarded blocks reachable so the compiler cannot drop the allocations.
std::vector<char*>* volatile hoard_sink = nullptr;

struct FailWhileLoading {
  FailWhileLoading() {
#if TESSERA_LOAD_FAULT == TESSERA_FAULT_CRASH
    *reinterpret_cast<volatile int*>(nowhere) = 1;  // an address the compiler cannot see is null
#elif TESSERA_LOAD_FAULT == TESSERA_FAULT_HANG
    for (;;) ::pause();
#elif TESSERA_LOAD_FAULT == TESSERA_FAULT_EXIT
    std::exit(0);  // the worst case: a clean-looking exit status with nothing done
#elif TESSERA_LOAD_FAULT == TESSERA_FAULT_ALLOCATE
    // 1 GiB blocks, never touched: address space, not memory, so the limit is reached at once.
    auto* hoard = new std::vector<char*>;
    hoard_sink = hoard;
    for (;;) hoard->push_back(new char[std::size_t{1} << 30]);
#else
#error "TESSERA_LOAD_FAULT must name a fault"
#endif
  }
} fail_while_loading;

class NeverScheduler final : public tessera::ExchangeScheduler {
  tessera::Schedule schedule_impl(const tessera::ExchangePhase&, const tessera::Target&, std::uint64_t) override {
    return {};
  }
};

}  // namespace

extern "C" const TesseraPluginManifest* load_fault_manifest() noexcept {
  static const auto manifest =
      tessera::make_manifest(TESSERA_PLUGIN_EXCHANGE_SCHEDULER, TESSERA_LOAD_FAULT_NAME, "0.1.0",
                             "fails in a static initialiser, to test loading in a child", "", "",
                             &tessera::create_plugin_object<NeverScheduler>);
  return &manifest;
}
TESSERA_PLUGIN(load_fault_manifest)
