// The lowered per-tile program: buffers, compute steps, supersteps and exchange phases.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/exchange.hpp"
#include "tessera/graph.hpp"

namespace tessera {

enum class Region : std::uint8_t { standard = 0, interleaved = 1 };
const char* region_name(Region);

inline constexpr std::int64_t kUnplaced = -1;

/// A piece of one tile's memory. Live from superstep `first_use` to `last_use` inclusive.
struct Buffer {
  std::string name;
  std::uint32_t tile = 0;
  std::uint32_t bytes = 0;
  Region region = Region::standard;
  std::uint32_t alignment = 8;
  std::uint32_t first_use = 0;
  std::uint32_t last_use = 0;
  std::int64_t offset = kUnplaced;  ///< byte offset in tile memory, set by place-storage
};

/// A word position inside a buffer.
struct BufferRef {
  std::uint32_t buffer = 0;
  std::uint32_t word_offset = 0;
};

/// One codelet invocation on one tile.
struct CodeletCall {
  std::uint32_t tile = 0;
  Codelet codelet = Codelet::copy;
  std::vector<BufferRef> operands;
  std::vector<std::uint32_t> params;
};

/// Logical data movement: `words` words from one buffer into a buffer on another tile.
struct Copy {
  BufferRef source;
  BufferRef destination;
  std::uint32_t words = 0;
};

/// Compute on every tile, a barrier, then one exchange phase.
struct Superstep {
  std::string label;
  std::vector<CodeletCall> compute;
  std::vector<Copy> copies;  ///< planned by select-finalist
  ExchangePhase exchange;    ///< concrete transfers with addresses: lower-exchanges
  Schedule schedule;         ///< from the exchange-scheduler plugin, validated by the core
};

enum class StreamKind : std::uint8_t {
  weight = 0,  ///< host to device at initialize
  input = 1,   ///< host to device at every run
  output = 2,  ///< device to host at every run
};
const char* stream_kind_name(StreamKind);

/// A block [rows x cols] of a 2-D tensor (1-D tensors are one row), packed row-major
/// into a buffer from `destination`.
struct HostSlice {
  BufferRef destination;
  std::uint32_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;
  bool transposed = false;  ///< stored [cols, rows]: weights laid out as their matmul streams them
};

struct HostStream {
  std::string tensor;
  StreamKind kind = StreamKind::input;
  std::uint32_t rows = 0, cols = 0;
  std::vector<HostSlice> slices;  ///< together they cover the tensor (replicas allowed)
  DType dtype = DType::float32;   ///< element type in tile memory; the host converts
};

struct Program {
  std::vector<Buffer> buffers;
  std::vector<Superstep> supersteps;
  std::vector<HostStream> streams;
};

/// Checks references, shapes and (when placed) addresses of a program. Returns the first
/// problem found, or "" when the program is well formed.
std::string verify_program(const Program& program, const struct Target& target);

/// The most bytes one tile holds at once: buffers live from first_use to last_use, each
/// rounded up to its alignment, as no allocator can pack them tighter (a lower bound on what
/// place-storage needs, known before placement). Throws Error on a buffer whose last_use
/// comes before its first_use.
std::uint64_t peak_live_bytes(const Program& program);

/// Per tile, the support memory its calls need: the code of each distinct codelet it runs and
/// a vertex state per call (tile_support_bytes counts an emitted image the same way, plus its
/// exchange descriptors). Calls on tiles past `tiles` are not counted.
std::vector<std::uint64_t> call_support_bytes(const Program& program, std::uint32_t tiles);
/// Per tile, an estimate of its exchange descriptors before the phases are scheduled: a send
/// entry per copy it sources and a receive entry per copy it takes (exact for copies sent in
/// one segment each; emit-tile-code logs the emitted count).
std::vector<std::uint64_t> copy_descriptor_bytes(const Program& program, std::uint32_t tiles);

}  // namespace tessera
