// XXH64 content hashes of files and texts, and the identity of the running tessera build.
#include "fingerprint.hpp"

#include <dlfcn.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <xxhash.h>

#include "tessera/diagnostic.hpp"
#include "tessera/version.hpp"

namespace tessera::ab {

std::string hash_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot read the file to hash it");
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(), &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) XXH64_update(state.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(path + ": read error while hashing the file");
  return fmt::format("{:016x}", XXH64_digest(state.get()));
}

std::string hash_text(const std::string& text) { return fmt::format("{:016x}", XXH64(text.data(), text.size(), 0)); }

std::string self_executable() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error("cannot find the running tessera binary through /proc/self/exe: " + ec.message());
  return exe.string();
}

BuildIdentity current_build() {
  BuildIdentity identity;
  identity.version = kCoreVersion;
  std::string hashes = hash_file(self_executable());
  // The core is a shared library: a rebuilt core with the same binary is another build.
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&tessera::abi_tag), &info) != 0 && info.dli_fname)
    hashes += hash_file(info.dli_fname);
  identity.build_hash = hash_text(hashes);
  return identity;
}

}  // namespace tessera::ab
