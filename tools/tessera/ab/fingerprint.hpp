// Content hashes (XXH64) that identify packages, suites, arms and the tessera build in A/B results.
#pragma once
#include <cstdint>
#include <string>

namespace tessera::ab {

/// XXH64 of a file's bytes as 16 hex digits. Throws Error naming the file if it cannot be read.
std::string hash_file(const std::string& path);

/// XXH64 of `text` as 16 hex digits.
std::string hash_text(const std::string& text);

/// Identifies the tessera build running now: the core version and a hash of this binary and
/// of the libtessera_core it loaded, so results from another build are never mixed in.
struct BuildIdentity {
  std::string version;
  std::string build_hash;
  bool operator==(const BuildIdentity&) const = default;
};
BuildIdentity current_build();

/// The running binary (/proc/self/exe), for child processes.
std::string self_executable();

}  // namespace tessera::ab
