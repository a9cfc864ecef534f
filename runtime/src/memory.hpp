// Host memory for the big arrays the runtime fills once: zeroed mappings and huge-page advice.
#pragma once
#include <fmt/format.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "tessera/diagnostic.hpp"

namespace tessera::runtime::detail {

/// Asks the kernel to back the whole 2 MiB pages inside [data, data + bytes) with huge pages,
/// so writing them first costs a page fault per 2 MiB rather than per 4 KiB. Advice only:
/// where transparent huge pages are off, nothing changes.
inline void advise_huge_pages(const void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (start + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (start + bytes) & ~(kHugePage - 1);
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

/// Zero-filled floats from an anonymous mapping: a page costs nothing until it is written
/// (the kernel zeroes it then, so nothing is written twice), in huge pages where allowed.
class ZeroedFloats {
public:
  ZeroedFloats() = default;
  explicit ZeroedFloats(std::uint64_t count) : bytes_(count * sizeof(float)) {
    if (bytes_ == 0) return;
    void* mapping = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
      throw Error(fmt::format("cannot allocate {} bytes of zeroed memory: {}", bytes_, std::strerror(errno)));
    advise_huge_pages(mapping, bytes_);
    data_ = static_cast<float*>(mapping);
  }
  ZeroedFloats(ZeroedFloats&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  ZeroedFloats& operator=(ZeroedFloats&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ZeroedFloats(const ZeroedFloats&) = delete;
  ZeroedFloats& operator=(const ZeroedFloats&) = delete;
  ~ZeroedFloats() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  float* data() const { return data_; }

private:
  float* data_ = nullptr;
  std::uint64_t bytes_ = 0;
};

}  // namespace tessera::runtime::detail
