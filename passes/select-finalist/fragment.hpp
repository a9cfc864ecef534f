// An operation's program fragment: built per candidate, costed alone, appended to the program if chosen.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "distribution.hpp"
#include "tessera/codelets.hpp"
#include "tessera/graph.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace tessera::select_finalist {

/// How long a new buffer must keep its bytes, which decides what storage may share them.
enum class Lifetime : std::uint8_t {
  transient,      ///< from its first to its last use in the program
  from_start,     ///< written by the host before superstep 0 of every run (inputs)
  whole_program,  ///< written once at initialize and read by every run (weights)
};

/// How the planner orients matmuls (codelets.hpp MatmulOrientation): pinned, or per call the
/// faster of the two by the machine model.
enum class OrientationChoice : std::uint8_t { automatic, as_is, swapped };

/// The orientation param of a matmul call of this shape under `choice`.
std::uint32_t matmul_orientation(Codelet codelet, std::uint32_t m, std::uint32_t k, std::uint32_t n,
                                 const Target& target, OrientationChoice choice);

/// A matmul by constant weights: the codelet reading them in the layout the orientation
/// streams (constant_weight_matmul), and the orientation (the faster under `choice`).
struct WeightMatmul {
  Codelet codelet = Codelet::matmul;
  std::uint32_t orientation = 0;
};
WeightMatmul weight_matmul(bool half_weights, std::uint32_t m, std::uint32_t k, std::uint32_t n, const Target& target,
                           OrientationChoice choice);

inline constexpr std::uint32_t kNewBuffer = std::numeric_limits<std::uint32_t>::max();

/// A tensor's distribution made by a fragment.
struct TensorDistribution {
  std::uint32_t tensor = 0;
  Distribution distribution;
};

/// Superstep 0 of a fragment is where an op's inputs are gathered. When the program has
/// supersteps it stands for the last one: its compute is appended to that superstep's
/// compute and its copies to that superstep's exchange. On an empty program it becomes a
/// superstep of its own if it has work, and is dropped if not. Supersteps 1.. are the op's.
struct Fragment {
  Program program;                                 ///< buffers and supersteps in fragment indices
  std::vector<std::uint32_t> program_buffer;       ///< per buffer: program index, or kNewBuffer
  std::vector<Lifetime> lifetime;                  ///< per buffer (existing buffers: transient)
  std::vector<std::uint32_t> first_use, last_use;  ///< per buffer, fragment superstep indices
  bool extends_last_superstep = true;              ///< superstep 0 is the program's last superstep
  std::vector<TensorDistribution> distributions;   ///< pieces naming fragment buffers
};

/// Per-tile bytes in each region.
struct TileBytes {
  std::uint64_t standard = 0;
  std::uint64_t interleaved = 0;
  std::uint64_t support = 0;  ///< of standard: code, vertex states, descriptors, which only it holds
  std::uint64_t total() const { return standard + interleaved; }
};

/// Bytes a buffer takes once aligned.
inline std::uint64_t aligned_bytes(const Buffer& buffer) {
  const std::uint64_t a = buffer.alignment == 0 ? 1 : buffer.alignment;
  return (std::uint64_t{buffer.bytes} + a - 1) / a * a;
}

/// The region a buffer goes to: the preferred one unless the target lacks it.
Region region_for(Region preferred, const Target& target);

/// Builds a Fragment: new buffers, existing buffers it reads, compute, copies and host
/// stream slices, tracking every buffer's first and last use.
class FragmentBuilder {
public:
  /// `own_supersteps` supersteps follow the gather superstep 0.
  FragmentBuilder(const Program& program, std::uint32_t own_supersteps);

  void label(std::uint32_t superstep, std::string label);
  /// The fragment index of an existing program buffer the fragment reads.
  std::uint32_t existing(std::uint32_t program_buffer);
  /// A new buffer of `words` 32-bit words (packed_words() for float16 data). Sizes beyond a buffer's 32-bit byte count
  /// are clamped and flagged: such a fragment can never fit (see oversized()).
  std::uint32_t create(std::string name, std::uint32_t tile, std::uint64_t words, Region region,
                       std::uint32_t alignment, Lifetime lifetime);
  void call(std::uint32_t superstep, std::uint32_t tile, Codelet codelet, std::vector<BufferRef> operands,
            std::vector<std::uint32_t> params);
  /// c = a * b by a matmul `codelet`, params {m, k, n, orientation}. Swapped, the AMP leaves
  /// c^T: into a scratch buffer beside c (its region and alignment), which a transpose call
  /// then lays out into c.
  void call_matmul(std::uint32_t superstep, std::uint32_t tile, Codelet codelet, BufferRef a, BufferRef b, BufferRef c,
                   std::vector<std::uint32_t> params);
  /// Moves `rows` rows of `width` words, row r from from.word_offset + r * from_stride to
  /// to.word_offset + r * to_stride. Across tiles: copies in `superstep`'s exchange. On one
  /// tile (the exchange cannot send to itself): copy codelets at the start of the next
  /// superstep's compute. Rows contiguous on both sides move as one block.
  void move_rows(std::uint32_t superstep, BufferRef from, std::uint32_t from_stride, BufferRef to,
                 std::uint32_t to_stride, std::uint32_t rows, std::uint32_t width);
  /// Adds a host slice filling `buffer` from `word_offset` with the block of `tensor` ([cols, rows]
  /// when `transposed`).
  void host_slice(const Tensor& tensor, StreamKind kind, std::uint32_t buffer, std::uint32_t row_begin,
                  std::uint32_t rows, std::uint32_t col_begin, std::uint32_t cols, bool transposed = false,
                  std::uint32_t word_offset = 0);

  const Buffer& buffer(std::uint32_t index) const { return fragment_.program.buffers[index]; }
  /// The fragment so far: once laid out, its weights and operand buffers are there; building
  /// adds compute, copies and a swapped matmul's scratch buffers.
  const Fragment& laid_out() const { return fragment_; }
  bool oversized() const { return oversized_; }
  /// The most bytes of new transient buffers (the op's temporaries) on any one tile.
  std::uint64_t peak_temporary_bytes(std::uint32_t tiles) const;

  /// Completes the fragment; `distributions` are the tensors it computes or spreads.
  Fragment finish(std::vector<TensorDistribution> distributions);

private:
  void use(std::uint32_t buffer, std::uint32_t superstep);

  const Program& program_;
  Fragment fragment_;
  std::vector<std::vector<CodeletCall>> prologue_;  ///< on-tile copies, run first in a superstep
  std::vector<std::uint32_t> existing_index_;       ///< program buffer -> fragment index + 1
  bool oversized_ = false;
};

/// Bytes a fragment's new buffers (aligned) take on each tile, by region.
std::vector<TileBytes> new_buffer_bytes(const Fragment& fragment, std::uint32_t tiles);

/// Bytes a built fragment adds on each tile, by region: its new buffers (aligned) and, in the
/// standard region, the support memory place-storage reserves for its calls and copies (code
/// is counted per fragment: a little more than once per tile; a multicast copy group takes one
/// send entry, as lower-exchanges sends it).
std::vector<TileBytes> new_bytes(const Fragment& fragment, const Target& target);

/// Per-run host input cycles of a fragment's streams: input slices cross the host link at
/// every run (weights only once, at initialize).
std::uint64_t host_input_cycles(const Program& fragment, const Target& target);

/// Appends a fragment to the program (see Fragment for superstep 0) and returns its
/// distributions in program buffer indices. New whole-program buffers are appended to
/// `whole_program_buffers`; their last use is fixed once the program is complete.
std::vector<TensorDistribution> commit_fragment(Fragment&& fragment, Program& program,
                                                std::vector<std::uint32_t>& whole_program_buffers);

}  // namespace tessera::select_finalist
