// Whether the tests run under AddressSanitizer, which changes how a crashing child dies.
#pragma once

namespace tessera::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

/// The signal that ends a process whose code segfaults: the sanitizers report it, then abort
/// (abort_on_error=1 in ASAN_OPTIONS and UBSAN_OPTIONS of make test-sanitize).
inline constexpr int kSegfaultSignal = kAddressSanitizer ? 6 : 11;

}  // namespace tessera::testing
