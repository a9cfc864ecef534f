// Building program fragments and appending the chosen one to the program.
#include "fragment.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

#include "tessera/lowering.hpp"

namespace tessera::select_finalist {

namespace {
constexpr std::uint32_t kUnused = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kLargestBufferWords = std::numeric_limits<std::uint32_t>::max() / 4;
}  // namespace

std::uint32_t matmul_orientation(Codelet codelet, std::uint32_t m, std::uint32_t k, std::uint32_t n,
                                 const Target& target, OrientationChoice choice) {
  const MatmulOrientation chosen = choice == OrientationChoice::automatic
                                       ? faster_matmul_orientation(codelet, m, k, n, target)
                                   : choice == OrientationChoice::swapped ? MatmulOrientation::swapped
                                                                          : MatmulOrientation::as_is;
  return static_cast<std::uint32_t>(chosen);
}

WeightMatmul weight_matmul(bool half_weights, std::uint32_t m, std::uint32_t k, std::uint32_t n, const Target& target,
                           OrientationChoice choice) {
  auto call = [&](MatmulOrientation orientation) {
    return WeightMatmul{constant_weight_matmul(half_weights, orientation), static_cast<std::uint32_t>(orientation)};
  };
  if (choice != OrientationChoice::automatic)
    return call(choice == OrientationChoice::swapped ? MatmulOrientation::swapped : MatmulOrientation::as_is);
  const WeightMatmul as_is = call(MatmulOrientation::as_is), swapped = call(MatmulOrientation::swapped);
  const std::uint32_t as_is_params[] = {m, k, n, as_is.orientation}, swapped_params[] = {m, k, n, swapped.orientation};
  // Ties keep as_is: its outputs leave the AMP as rows of c, no transpose after.
  return matmul_product_cycles(swapped.codelet, swapped_params, target) <
                 matmul_product_cycles(as_is.codelet, as_is_params, target)
             ? swapped
             : as_is;
}

Region region_for(Region preferred, const Target& target) {
  const bool has_standard = target.interleaved_start > 0;
  const bool has_interleaved = target.interleaved_start < target.memory_bytes;
  if (preferred == Region::interleaved && !has_interleaved) return Region::standard;
  if (preferred == Region::standard && !has_standard) return Region::interleaved;
  return preferred;
}

FragmentBuilder::FragmentBuilder(const Program& program, std::uint32_t own_supersteps)
    : program_(program), existing_index_(program.buffers.size(), 0) {
  fragment_.program.supersteps.resize(own_supersteps + 1);
  prologue_.resize(own_supersteps + 1);
}

void FragmentBuilder::label(std::uint32_t superstep, std::string label) {
  fragment_.program.supersteps.at(superstep).label = std::move(label);
}

std::uint32_t FragmentBuilder::existing(std::uint32_t program_buffer) {
  std::uint32_t& slot = existing_index_.at(program_buffer);
  if (slot != 0) return slot - 1;
  const auto index = static_cast<std::uint32_t>(fragment_.program.buffers.size());
  fragment_.program.buffers.push_back(program_.buffers[program_buffer]);
  fragment_.program_buffer.push_back(program_buffer);
  fragment_.lifetime.push_back(Lifetime::transient);
  fragment_.first_use.push_back(kUnused);
  fragment_.last_use.push_back(0);
  slot = index + 1;
  return index;
}

std::uint32_t FragmentBuilder::create(std::string name, std::uint32_t tile, std::uint64_t words, Region region,
                                      std::uint32_t alignment, Lifetime lifetime) {
  assert(words > 0 && "buffers hold at least one word");
  if (words > kLargestBufferWords) {
    oversized_ = true;
    words = kLargestBufferWords;
  }
  Buffer buffer;
  buffer.name = std::move(name);
  buffer.tile = tile;
  buffer.bytes = static_cast<std::uint32_t>(words * 4);
  buffer.region = region;
  buffer.alignment = alignment;
  const auto index = static_cast<std::uint32_t>(fragment_.program.buffers.size());
  fragment_.program.buffers.push_back(std::move(buffer));
  fragment_.program_buffer.push_back(kNewBuffer);
  fragment_.lifetime.push_back(lifetime);
  fragment_.first_use.push_back(kUnused);
  fragment_.last_use.push_back(0);
  return index;
}

void FragmentBuilder::use(std::uint32_t buffer, std::uint32_t superstep) {
  std::uint32_t& first = fragment_.first_use[buffer];
  first = first == kUnused ? superstep : std::min(first, superstep);
  fragment_.last_use[buffer] = std::max(fragment_.last_use[buffer], superstep);
}

void FragmentBuilder::call(std::uint32_t superstep, std::uint32_t tile, Codelet codelet,
                           std::vector<BufferRef> operands, std::vector<std::uint32_t> params) {
  for (const BufferRef& ref : operands) use(ref.buffer, superstep);
  fragment_.program.supersteps.at(superstep).compute.push_back({tile, codelet, std::move(operands), std::move(params)});
}

void FragmentBuilder::call_matmul(std::uint32_t superstep, std::uint32_t tile, Codelet codelet, BufferRef a,
                                  BufferRef b, BufferRef c, std::vector<std::uint32_t> params) {
  if (!matmul_leaves_transpose(params)) {
    call(superstep, tile, codelet, {a, b, c}, std::move(params));
    return;
  }
  const std::uint32_t m = params[0], n = params[2];
  const Buffer out = buffer(c.buffer);  // a copy: create() may move the buffers
  const std::uint32_t scratch =
      create(out.name + ".t", tile, std::uint64_t{m} * n, out.region, out.alignment, Lifetime::transient);
  call(superstep, tile, codelet, {a, b, {scratch, 0}}, std::move(params));
  call(superstep, tile, Codelet::transpose, {{scratch, 0}, c}, {n, m});
}

void FragmentBuilder::move_rows(std::uint32_t superstep, BufferRef from, std::uint32_t from_stride, BufferRef to,
                                std::uint32_t to_stride, std::uint32_t rows, std::uint32_t width) {
  if (rows == 0 || width == 0) return;
  const bool contiguous = rows == 1 || (from_stride == width && to_stride == width);
  const std::uint32_t blocks = contiguous ? 1 : rows;
  const std::uint32_t words = contiguous ? rows * width : width;
  const std::uint32_t from_tile = buffer(from.buffer).tile, to_tile = buffer(to.buffer).tile;
  for (std::uint32_t r = 0; r < blocks; ++r) {
    const BufferRef source{from.buffer, from.word_offset + r * from_stride};
    const BufferRef destination{to.buffer, to.word_offset + r * to_stride};
    if (from_tile != to_tile) {
      use(from.buffer, superstep);
      use(to.buffer, superstep);
      fragment_.program.supersteps.at(superstep).copies.push_back({source, destination, words});
    } else {
      const std::uint32_t next = superstep + 1;
      use(from.buffer, next);
      use(to.buffer, next);
      prologue_.at(next).push_back({from_tile, Codelet::copy, {source, destination}, {words}});
    }
  }
}

void FragmentBuilder::host_slice(const Tensor& tensor, StreamKind kind, std::uint32_t buffer, std::uint32_t row_begin,
                                 std::uint32_t rows, std::uint32_t col_begin, std::uint32_t cols, bool transposed,
                                 std::uint32_t word_offset) {
  auto& streams = fragment_.program.streams;
  auto stream = std::find_if(streams.begin(), streams.end(),
                             [&](const HostStream& s) { return s.tensor == tensor.name && s.kind == kind; });
  if (stream == streams.end()) {
    HostStream created;
    created.tensor = tensor.name;
    created.kind = kind;
    created.rows = static_cast<std::uint32_t>(tensor.rows());
    created.cols = static_cast<std::uint32_t>(tensor.cols());
    created.dtype = tensor.dtype;
    streams.push_back(std::move(created));
    stream = streams.end() - 1;
  }
  stream->slices.push_back({{buffer, word_offset}, row_begin, rows, col_begin, cols, transposed});
}

std::vector<TileBytes> new_buffer_bytes(const Fragment& fragment, std::uint32_t tiles) {
  std::vector<TileBytes> bytes(tiles);
  const auto& buffers = fragment.program.buffers;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (fragment.program_buffer[i] != kNewBuffer) continue;
    TileBytes& tile = bytes.at(buffers[i].tile);
    (buffers[i].region == Region::interleaved ? tile.interleaved : tile.standard) += aligned_bytes(buffers[i]);
  }
  return bytes;
}

std::vector<TileBytes> new_bytes(const Fragment& fragment, const Target& target) {
  const std::uint32_t tiles = target.tiles;
  std::vector<TileBytes> bytes = new_buffer_bytes(fragment, tiles);
  const std::vector<std::uint64_t> support = call_support_bytes(fragment.program, tiles);
  const std::vector<std::uint64_t> descriptors = exchange_descriptor_bytes(fragment.program, tiles, target.multicast);
  for (std::uint32_t tile = 0; tile < tiles; ++tile) {
    bytes[tile].support = support[tile] + descriptors[tile];
    bytes[tile].standard += bytes[tile].support;
  }
  return bytes;
}

std::uint64_t FragmentBuilder::peak_temporary_bytes(std::uint32_t tiles) const {
  std::vector<std::uint64_t> bytes(tiles, 0);
  const auto& buffers = fragment_.program.buffers;
  for (std::size_t i = 0; i < buffers.size(); ++i)
    if (fragment_.program_buffer[i] == kNewBuffer && fragment_.lifetime[i] == Lifetime::transient)
      bytes.at(buffers[i].tile) += aligned_bytes(buffers[i]);
  return bytes.empty() ? 0 : *std::max_element(bytes.begin(), bytes.end());
}

Fragment FragmentBuilder::finish(std::vector<TensorDistribution> distributions) {
  auto& supersteps = fragment_.program.supersteps;
  for (std::size_t s = 0; s < supersteps.size(); ++s) {
    if (prologue_[s].empty()) continue;
    auto& compute = supersteps[s].compute;
    prologue_[s].insert(prologue_[s].end(), std::make_move_iterator(compute.begin()),
                        std::make_move_iterator(compute.end()));
    compute = std::move(prologue_[s]);
  }
  fragment_.extends_last_superstep = !program_.supersteps.empty();
  if (!fragment_.extends_last_superstep && supersteps.size() > 1 && supersteps[0].compute.empty() &&
      supersteps[0].copies.empty()) {
    // Nothing to gather on an empty program: superstep 0 would be an idle barrier.
    supersteps.erase(supersteps.begin());
    for (std::size_t i = 0; i < fragment_.first_use.size(); ++i) {
      if (fragment_.first_use[i] == kUnused) continue;
      assert(fragment_.first_use[i] > 0 && "superstep 0 had no work");
      --fragment_.first_use[i];
      --fragment_.last_use[i];
    }
  }
  // Give the standalone fragment consistent live ranges, for the cost model.
  auto& buffers = fragment_.program.buffers;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const bool used = fragment_.first_use[i] != kUnused;
    const bool host_filled = fragment_.lifetime[i] != Lifetime::transient;
    buffers[i].first_use = host_filled || !used ? 0 : fragment_.first_use[i];
    buffers[i].last_use = fragment_.lifetime[i] == Lifetime::whole_program
                              ? static_cast<std::uint32_t>(supersteps.size() - 1)
                              : fragment_.last_use[i];
    buffers[i].offset = kUnplaced;
  }
  fragment_.distributions = std::move(distributions);
  return std::move(fragment_);
}

std::uint64_t host_input_cycles(const Program& fragment, const Target& target) {
  std::uint64_t bytes = 0;
  for (const HostStream& stream : fragment.streams)
    if (stream.kind == StreamKind::input)
      for (const HostSlice& slice : stream.slices) bytes += std::uint64_t{slice.rows} * slice.cols * 4;
  if (bytes == 0 || target.host_bytes_per_cycle <= 0) return 0;
  return static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / target.host_bytes_per_cycle));
}

std::vector<TensorDistribution> commit_fragment(Fragment&& fragment, Program& program,
                                                std::vector<std::uint32_t>& whole_program_buffers) {
  const auto base = static_cast<std::uint32_t>(program.supersteps.size());
  assert(fragment.extends_last_superstep == (base > 0));
  // Fragment superstep j runs as program superstep first + j.
  const std::uint32_t first = fragment.extends_last_superstep ? base - 1 : base;
  auto program_step = [&](std::uint32_t j) { return first + j; };

  std::vector<std::uint32_t> index(fragment.program.buffers.size());
  for (std::size_t i = 0; i < index.size(); ++i) {
    const bool used = fragment.first_use[i] != kUnused;
    if (fragment.program_buffer[i] != kNewBuffer) {
      index[i] = fragment.program_buffer[i];
      Buffer& existing = program.buffers[index[i]];
      if (used) existing.last_use = std::max(existing.last_use, program_step(fragment.last_use[i]));
      continue;
    }
    assert(used && "a fragment creates only buffers it uses");
    Buffer buffer = std::move(fragment.program.buffers[i]);
    buffer.first_use = fragment.lifetime[i] == Lifetime::transient ? program_step(fragment.first_use[i]) : 0;
    buffer.last_use = program_step(fragment.last_use[i]);
    index[i] = static_cast<std::uint32_t>(program.buffers.size());
    if (fragment.lifetime[i] == Lifetime::whole_program) whole_program_buffers.push_back(index[i]);
    program.buffers.push_back(std::move(buffer));
  }
  auto remap = [&](BufferRef& ref) { ref.buffer = index[ref.buffer]; };

  for (std::uint32_t j = 0; j < fragment.program.supersteps.size(); ++j) {
    Superstep& step = fragment.program.supersteps[j];
    for (CodeletCall& call : step.compute)
      for (BufferRef& ref : call.operands) remap(ref);
    for (Copy& copy : step.copies) {
      remap(copy.source);
      remap(copy.destination);
    }
    if (j == 0 && fragment.extends_last_superstep) {
      Superstep& last = program.supersteps.at(program_step(0));
      last.compute.insert(last.compute.end(), std::make_move_iterator(step.compute.begin()),
                          std::make_move_iterator(step.compute.end()));
      last.copies.insert(last.copies.end(), step.copies.begin(), step.copies.end());
      continue;
    }
    program.supersteps.push_back(std::move(step));
  }

  for (HostStream& stream : fragment.program.streams) {
    for (HostSlice& slice : stream.slices) remap(slice.destination);
    auto existing = std::find_if(program.streams.begin(), program.streams.end(), [&](const HostStream& s) {
      return s.tensor == stream.tensor && s.kind == stream.kind;
    });
    if (existing == program.streams.end()) program.streams.push_back(std::move(stream));
    else existing->slices.insert(existing->slices.end(), stream.slices.begin(), stream.slices.end());
  }

  for (TensorDistribution& made : fragment.distributions)
    for (Piece& piece : made.distribution.pieces) piece.buffer = index[piece.buffer];
  return std::move(fragment.distributions);
}

}  // namespace tessera::select_finalist
