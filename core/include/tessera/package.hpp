// The package file (.tpkg): what a device loads. Versioned, checksummed, written atomically.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/codelets.hpp"
#include "tessera/graph.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace tessera {

/// Format version of the package file; a reader refuses any other (5: pow's exponent; 6: a
/// matmul's batch; 7: heads and column slices; 8: windows and clip bounds; 9: an op's function and
/// alpha, gather ops' shape and runs, int32 and bool tensors, typed ops, and an imported model's import
/// options after its sha256).
inline constexpr std::uint32_t kPackageFormatVersion = 9;

/// Exchange cycles at or past this are refused by the reader and the simulator, so a cycle
/// plus a word count, or a difference of two cycles, never wraps around.
inline constexpr std::uint64_t kMaxExchangeCycle = std::uint64_t{1} << 62;

struct TileBufferEntry {
  std::uint32_t offset = 0;
  std::uint32_t bytes = 0;
  Region region = Region::standard;
};

/// A codelet call with operands resolved to byte addresses in this tile's memory.
struct TileCodeletCall {
  Codelet codelet = Codelet::copy;
  std::vector<std::uint32_t> addresses;
  std::vector<std::uint32_t> params;
};

/// `words` words from `address` leave this tile on cycles [cycle, cycle + words).
struct TileSend {
  std::uint64_t cycle = 0;
  std::uint32_t address = 0;
  std::uint32_t words = 0;
};

/// `words` words from `sender` arrive on cycles [arrival, arrival + words) and are
/// stored from `address`.
struct TileReceive {
  std::uint64_t arrival = 0;
  std::uint32_t sender = 0;
  std::uint32_t address = 0;
  std::uint32_t words = 0;
};

struct TileSuperstep {
  std::vector<TileCodeletCall> compute;
  std::vector<TileSend> sends;        ///< sorted by cycle
  std::vector<TileReceive> receives;  ///< sorted by arrival
};

struct TileImage {
  std::uint32_t tile = 0;
  std::vector<TileBufferEntry> buffers;
  std::vector<TileSuperstep> supersteps;  ///< the same count on every tile
};

/// What a tile's image needs in tile memory beside its buffers (the package's support memory,
/// kept in the standard region, above the data): the code of each distinct codelet the tile
/// runs, a vertex state per call, and an exchange descriptor per send and receive entry.
struct SupportBytes {
  std::uint64_t code = 0, vertex_state = 0, exchange_descriptors = 0;
  std::uint64_t total() const { return code + vertex_state + exchange_descriptors; }
};
SupportBytes tile_support_bytes(const TileImage& image);

/// A block of a host tensor at a byte address of a tile.
struct PackageSlice {
  std::uint32_t tile = 0;
  std::uint32_t address = 0;
  std::uint32_t row_begin = 0, rows = 0, col_begin = 0, cols = 0;
  bool transposed = false;  ///< the block is stored [cols, rows] (input and weight streams only)
};

struct PackageStream {
  std::string tensor;
  StreamKind kind = StreamKind::input;
  std::uint32_t rows = 0, cols = 0;
  std::vector<PackageSlice> slices;
  DType dtype = DType::float32;  ///< how the slices are packed in tile memory (float16: two a word)
};

/// Compile-time figures carried along for reports.
struct PackageEstimates {
  std::uint64_t estimated_cycles = 0;
  std::uint64_t estimated_exchange_cycles = 0;
  std::uint64_t scheduled_exchange_cycles = 0;  ///< sum of the schedules' horizons
  std::uint64_t exchange_lower_bound = 0;       ///< sum of the phases' lower bounds
  std::uint64_t peak_tile_bytes = 0;
};

struct Package {
  std::string compiler_version;
  Target target;                  ///< the whole machine description, so a package stands alone
  std::uint64_t target_hash = 0;  ///< target.hash() at compile time; the reader checks it
  std::uint32_t codelet_set_version = kCodeletSetVersion;
  std::vector<std::string> superstep_labels;
  PackageEstimates estimates;
  Graph graph;  ///< the model as written, for the host (initial values) and the reference
  std::vector<PackageStream> streams;
  std::vector<TileImage> tiles;  ///< one per target tile, in tile order
};

/// A secret for HMAC-SHA256 package signatures (`tessera compile --sign`, `tessera run --verify`).
struct PackageKey {
  std::string path;    ///< the key file, named in errors
  std::string secret;  ///< its bytes
};
inline constexpr std::size_t kMinPackageKeyBytes = 32;
inline constexpr std::size_t kMaxPackageKeyBytes = 4096;

/// Reads a key file: a regular file (not a symlink) owned by the user, neither readable nor
/// writable by group or others, of kMinPackageKeyBytes to kMaxPackageKeyBytes. Throws Error
/// naming the file, what is wrong and the fix.
PackageKey read_package_key(const std::string& path);

/// Writes the package with an AtomicFileWriter (output_file.hpp): a failure or a signal never
/// leaves a partial package. With a key, a 40-byte trailer after the last section holds the
/// HMAC-SHA256 of every byte before it (readers without a key skip it). Throws Error naming the path.
void write_package(const Package& package, const std::string& path, const PackageKey* signing_key = nullptr);

/// Async-signal-safe: remove_temporary_files() (output_file.hpp), kept for SDK users.
void remove_package_temporary() noexcept;

/// Reads and checks magic, version, section table, sizes and checksums; throws Error
/// naming the file and the first problem. With a key, the package must carry a signature
/// made with it, checked (constant-time) before any section is decoded: an unsigned,
/// changed or otherwise-signed package is refused.
Package read_package(const std::string& path, const PackageKey* verify_key = nullptr);

}  // namespace tessera
