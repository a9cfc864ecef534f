// The package file: sections with checksums, an atomic writer and a checking reader.
//
// Layout (little-endian):
//   magic "TPKG\r\n\x1a\n" | u32 format version | u32 section count | u64 xxh64 of the table
//   table: per section {u32 tag, u32 index, u64 offset, u64 size, u64 xxh64 of the payload}
//   payloads: META (versions, target, estimates), GRPH (the model), STRM (host streams),
//             TILE x tile count (one tile image each)
//   optional signature trailer: magic "TSIGHMAC" | HMAC-SHA256 (32 bytes) of every byte before it
#include "tessera/package.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "tessera/diagnostic.hpp"
#include "tessera/output_file.hpp"

namespace tessera {

namespace {

constexpr char kMagic[8] = {'T', 'P', 'K', 'G', '\r', '\n', '\x1a', '\n'};
constexpr std::uint32_t kTagMeta = 0x4154454d;     // "META"
constexpr std::uint32_t kTagGraph = 0x48505247;    // "GRPH"
constexpr std::uint32_t kTagStreams = 0x4d525453;  // "STRM"
constexpr std::uint32_t kTagTile = 0x454c4954;     // "TILE"
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;
constexpr std::size_t kEntryBytes = 4 + 4 + 8 + 8 + 8;
constexpr std::uint32_t kMaxSections = 1u << 20;
constexpr char kSignatureMagic[8] = {'T', 'S', 'I', 'G', 'H', 'M', 'A', 'C'};
constexpr std::size_t kMacBytes = 32;  // SHA-256
constexpr std::size_t kTrailerBytes = sizeof(kSignatureMagic) + kMacBytes;

// HMAC-SHA256 through OpenSSL's EVP_MAC, fed piece by piece (the writer never holds the whole file).
class PackageMac {
public:
  explicit PackageMac(const PackageKey& key) : path_(key.path) {
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    context_ = mac_ ? EVP_MAC_CTX_new(mac_) : nullptr;
    char digest[] = "SHA256";
    const OSSL_PARAM parameters[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                                     OSSL_PARAM_construct_end()};
    if (!context_ || EVP_MAC_init(context_, reinterpret_cast<const unsigned char*>(key.secret.data()),
                                  key.secret.size(), parameters) != 1)
      throw Error(path_ + ": OpenSSL could not start an HMAC-SHA256 with this key");
  }
  ~PackageMac() {
    EVP_MAC_CTX_free(context_);
    EVP_MAC_free(mac_);
  }
  PackageMac(const PackageMac&) = delete;
  PackageMac& operator=(const PackageMac&) = delete;
  void update(std::string_view bytes) {
    if (EVP_MAC_update(context_, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) != 1)
      throw Error(path_ + ": OpenSSL failed while computing the package's HMAC-SHA256");
  }
  std::string finish() {
    std::string mac(kMacBytes, '\0');
    std::size_t length = 0;
    if (EVP_MAC_final(context_, reinterpret_cast<unsigned char*>(mac.data()), &length, mac.size()) != 1 ||
        length != kMacBytes)
      throw Error(path_ + ": OpenSSL failed to finish the package's HMAC-SHA256");
    return mac;
  }

private:
  std::string path_;
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* context_ = nullptr;
};

// Checks the trailer of `bytes` against `key` before anything else is read from them.
void verify_signature(const std::string& bytes, const std::string& path, const PackageKey& key) {
  const std::size_t body = bytes.size() - kTrailerBytes;  // the caller checked the header fits
  if (bytes.size() < kHeaderBytes + kTrailerBytes ||
      std::memcmp(bytes.data() + body, kSignatureMagic, sizeof(kSignatureMagic)) != 0)
    throw Error(path + ": package is not signed, but the key " + key.path +
                " requires a signature made with it; "
                "sign it with `tessera compile ... --sign " +
                key.path + "`");
  PackageMac mac(key);
  mac.update(std::string_view(bytes.data(), body));
  const std::string expected = mac.finish();
  if (CRYPTO_memcmp(expected.data(), bytes.data() + body + sizeof(kSignatureMagic), kMacBytes) != 0)
    throw Error(path + ": package signature does not match the key " + key.path +
                ": the package was changed after "
                "it was signed, or signed with another key; refusing it (recompile and sign it with this key)");
}

std::string tag_name(std::uint32_t tag) {
  std::string name(4, ' ');
  std::memcpy(name.data(), &tag, 4);
  return name;
}

class Writer {
public:
  std::string bytes;
  template <typename T>
  void raw(T value) {
    bytes.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void u8(std::uint8_t v) { raw(v); }
  void u32(std::uint32_t v) { raw(v); }
  void u64(std::uint64_t v) { raw(v); }
  void i64(std::int64_t v) { raw(v); }
  void f64(double v) { raw(v); }
  void str(const std::string& s) {
    u32(static_cast<std::uint32_t>(s.size()));
    bytes += s;
  }
  void u32s(const std::vector<std::uint32_t>& v) {
    u32(static_cast<std::uint32_t>(v.size()));
    for (auto x : v) u32(x);
  }
};

class Reader {
public:
  Reader(const char* data, std::size_t size, std::string where) : data_(data), size_(size), where_(std::move(where)) {}
  template <typename T>
  T raw() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::uint8_t u8() { return raw<std::uint8_t>(); }
  std::uint32_t u32() { return raw<std::uint32_t>(); }
  std::uint64_t u64() { return raw<std::uint64_t>(); }
  std::int64_t i64() { return raw<std::int64_t>(); }
  double f64() { return raw<double>(); }
  std::string str() {
    std::uint32_t n = u32();
    need(n);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  /// A count of items each at least `item_bytes` long; refuses counts the data cannot hold.
  std::uint32_t count(std::size_t item_bytes) {
    std::uint32_t n = u32();
    if (item_bytes > 0 && n > (size_ - pos_) / item_bytes) fail(fmt::format("count {} exceeds the section", n));
    return n;
  }
  std::vector<std::uint32_t> u32s() {
    std::vector<std::uint32_t> v(count(4));
    for (auto& x : v) x = u32();
    return v;
  }
  bool at_end() const { return pos_ == size_; }
  void expect_end() {
    if (pos_ != size_) fail(fmt::format("{} unexpected bytes at the end", size_ - pos_));
  }
  [[noreturn]] void fail(const std::string& why) {
    throw Error(where_ + ": " + why + " at byte " + std::to_string(pos_));
  }
  template <typename E>
  E enumeration(std::uint32_t limit) {
    std::uint32_t v = u32();
    if (v >= limit) fail(fmt::format("enumeration value {} out of range", v));
    return static_cast<E>(v);
  }

private:
  void need(std::size_t n) {
    if (n > size_ - pos_) fail("section is truncated");
  }
  const char* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string where_;
};

void write_target(Writer& w, const Target& t) {
  w.str(t.name);
  w.u32(t.tiles);
  w.u32(t.tiles_per_column);
  w.u64(t.memory_bytes);
  w.u32(t.memory_element_bytes);
  w.u64(t.interleaved_start);
  w.u32(t.alignment);
  w.u32(t.worker_threads);
  w.f64(t.clock_hz);
  w.u32(t.fp32_macs_per_cycle);
  w.u32(t.fp16_macs_per_cycle);
  w.u32(t.exchange_word_bytes);
  w.u32(t.exchange_base_latency);
  w.f64(t.exchange_latency_per_column);
  w.u32(t.switch_cost);
  w.u8(t.multicast);
  w.u32(t.sync_cycles);
  w.u32(t.exchange_phase_overhead);
  w.f64(t.host_bytes_per_cycle);
  w.u32(t.amp_fp32_input_channels);
  w.u32(t.amp_fp32_output_channels);
  w.u32(t.amp_fp16_input_channels);
  w.u32(t.amp_fp16_output_channels);
  w.u32(t.load_bytes_per_cycle);
  w.u32(t.host_call_latency_cycles);
}

Target read_target(Reader& r) {
  Target t;
  t.name = r.str();
  t.tiles = r.u32();
  t.tiles_per_column = r.u32();
  t.memory_bytes = r.u64();
  t.memory_element_bytes = r.u32();
  t.interleaved_start = r.u64();
  t.alignment = r.u32();
  t.worker_threads = r.u32();
  t.clock_hz = r.f64();
  t.fp32_macs_per_cycle = r.u32();
  t.fp16_macs_per_cycle = r.u32();
  t.exchange_word_bytes = r.u32();
  t.exchange_base_latency = r.u32();
  t.exchange_latency_per_column = r.f64();
  t.switch_cost = r.u32();
  t.multicast = r.u8() != 0;
  t.sync_cycles = r.u32();
  t.exchange_phase_overhead = r.u32();
  t.host_bytes_per_cycle = r.f64();
  t.amp_fp32_input_channels = r.u32();
  t.amp_fp32_output_channels = r.u32();
  t.amp_fp16_input_channels = r.u32();
  t.amp_fp16_output_channels = r.u32();
  t.load_bytes_per_cycle = r.u32();
  t.host_call_latency_cycles = r.u32();
  if (const std::string problem = check_target(t); !problem.empty())
    r.fail("target description is inconsistent: " + problem);
  return t;
}

std::string encode_meta(const Package& p) {
  Writer w;
  w.str(p.compiler_version);
  write_target(w, p.target);
  w.u64(p.target_hash);
  w.u32(p.codelet_set_version);
  w.u32(static_cast<std::uint32_t>(p.superstep_labels.size()));
  for (const auto& label : p.superstep_labels) w.str(label);
  const PackageEstimates& e = p.estimates;
  w.u64(e.estimated_cycles);
  w.u64(e.estimated_exchange_cycles);
  w.u64(e.scheduled_exchange_cycles);
  w.u64(e.exchange_lower_bound);
  w.u64(e.peak_tile_bytes);
  return w.bytes;
}

void decode_meta(Reader& r, Package& p) {
  p.compiler_version = r.str();
  p.target = read_target(r);
  p.target_hash = r.u64();
  p.codelet_set_version = r.u32();
  p.superstep_labels.resize(r.count(4));
  for (auto& label : p.superstep_labels) label = r.str();
  PackageEstimates& e = p.estimates;
  e.estimated_cycles = r.u64();
  e.estimated_exchange_cycles = r.u64();
  e.scheduled_exchange_cycles = r.u64();
  e.exchange_lower_bound = r.u64();
  e.peak_tile_bytes = r.u64();
  r.expect_end();
}

std::string encode_graph(const Graph& g) {
  Writer w;
  w.str(g.name);
  w.str(g.source_file);
  w.u64(g.seed);
  w.u32(static_cast<std::uint32_t>(g.tensors.size()));
  for (const auto& t : g.tensors) {
    w.str(t.name);
    w.u32(static_cast<std::uint32_t>(t.shape.size()));
    for (auto d : t.shape) w.i64(d);
    w.u32(static_cast<std::uint32_t>(t.dtype));
    w.u32(static_cast<std::uint32_t>(t.kind));
    w.f64(t.init_scale);
  }
  w.u32(static_cast<std::uint32_t>(g.ops.size()));
  for (const auto& op : g.ops) {
    w.u32(static_cast<std::uint32_t>(op.kind));
    w.u32s(op.inputs);
    w.u32(op.output);
    w.u8(op.relu);
    w.u8(op.transpose_b);
    w.u32(op.batch);
    w.u32(op.heads);
    w.u32(op.column_begin);
    w.u32(op.column_count);
    w.f64(op.scale);
    w.f64(op.epsilon);
    w.f64(op.exponent);
    const auto window = window_fields(op.window);
    w.u32s(std::vector<std::uint32_t>(window.begin(), window.end()));
    w.f64(op.clip_low);
    w.f64(op.clip_high);
    w.u32(op.function);
    w.f64(op.alpha);
    // gather: shape and runs (empty for other ops).
    w.u32(static_cast<std::uint32_t>(op.gather_shape.size()));
    for (std::int64_t d : op.gather_shape) w.i64(d);
    w.u32(static_cast<std::uint32_t>(op.gather_runs.size()));
    for (const GatherRun& run : op.gather_runs)
      for (std::uint64_t field : gather_run_fields(run)) w.u64(field);
  }
  w.u32s(g.outputs);
  // An imported model's sha256 and import options trail the graph; YAML graphs end here, as before.
  if (!g.source_sha256.empty()) {
    w.str(g.source_sha256);
    w.u32(static_cast<std::uint32_t>(g.import_options.size()));
    for (const std::string& option : g.import_options) w.str(option);
  }
  return w.bytes;
}

void decode_graph(Reader& r, Graph& g, const Target& target) {
  g.name = r.str();
  g.source_file = r.str();
  g.seed = r.u64();
  g.tensors.resize(r.count(16));
  // The host allocates every input and weight and the reference every tensor, so each must fit
  // on the device, and the inputs and weights, resident together, must fit it at once: checked
  // here, before anything that size is allocated.
  const unsigned __int128 device_bytes = static_cast<unsigned __int128>(target.tiles) * target.memory_bytes;
  unsigned __int128 host_streamed_bytes = 0;
  for (auto& t : g.tensors) {
    t.name = r.str();
    t.shape.resize(r.count(8));
    for (auto& d : t.shape)
      if ((d = r.i64()) <= 0) r.fail("tensor size must be positive");
    if (t.shape.empty() || t.shape.size() > 2) r.fail("tensor rank must be 1 or 2");
    t.dtype = r.enumeration<DType>(kDTypeCount);
    t.kind = r.enumeration<TensorKind>(3);
    t.init_scale = r.f64();
    unsigned __int128 elements = 1;
    for (auto d : t.shape) elements *= static_cast<std::uint64_t>(d);  // two factors below 2^63: no wrap
    const unsigned __int128 bytes = t.dtype == DType::float16 ? (elements + 1) / 2 * 4 : elements * 4;
    if (t.dtype == DType::float16 && t.kind != TensorKind::weight)
      r.fail(fmt::format("tensor '{}' is float16, which only weights may be", t.name));
    if (bytes > device_bytes)
      r.fail(fmt::format("tensor '{}' of {} elements is larger than the {} bytes of target '{}' ({} tiles x {} bytes)",
                         t.name, fmt::join(t.shape, " x "), std::uint64_t(device_bytes), target.name, target.tiles,
                         target.memory_bytes));
    if (t.kind != TensorKind::intermediate && (host_streamed_bytes += bytes) > device_bytes)
      r.fail(fmt::format("the inputs and weights up to tensor '{}' exceed the {} bytes of target '{}'", t.name,
                         std::uint64_t(device_bytes), target.name));
  }
  g.ops.resize(r.count(94));  // the fixed fields of an op
  for (auto& op : g.ops) {
    op.kind = r.enumeration<OpKind>(kOpKindCount);
    op.inputs = r.u32s();
    op.output = r.u32();
    op.relu = r.u8() != 0;
    op.transpose_b = r.u8() != 0;
    op.batch = r.u32();
    op.heads = r.u32();
    op.column_begin = r.u32();
    op.column_count = r.u32();
    op.scale = r.f64();
    op.epsilon = r.f64();
    op.exponent = r.f64();
    const std::vector<std::uint32_t> window = r.u32s();
    if (window.size() != kWindowFields) r.fail(fmt::format("an op's window must hold {} numbers", kWindowFields));
    op.window = window_from_fields(std::span<const std::uint32_t, kWindowFields>(window.data(), kWindowFields));
    op.clip_low = r.f64();
    op.clip_high = r.f64();
    op.function = r.u32();
    op.alpha = r.f64();
    // Counts are bounded by the section's bytes; check_graph below bounds every run.
    op.gather_shape.resize(r.count(8));
    for (std::int64_t& d : op.gather_shape) d = r.i64();
    op.gather_runs.resize(r.count(8 * kGatherRunFields));
    for (GatherRun& run : op.gather_runs) {
      std::array<std::uint64_t, kGatherRunFields> fields{};
      for (std::uint64_t& field : fields) field = r.u64();
      run = gather_run_from_fields(fields);
    }
  }
  g.outputs = r.u32s();
  if (const std::string problem = check_graph(g); !problem.empty()) r.fail("the graph is inconsistent: " + problem);
  if (!r.at_end()) {
    g.source_sha256 = r.str();
    if (g.source_sha256.size() != 64 || g.source_sha256.find_first_not_of("0123456789abcdef") != std::string::npos)
      r.fail("the model's sha256 must be 64 lower-case hex digits");
    g.import_options.resize(r.count(4));
    for (std::string& option : g.import_options)
      if ((option = r.str()).rfind("--input-shape ", 0) != 0 && option.rfind("--input-value ", 0) != 0)
        r.fail("an import option must be --input-shape or --input-value");
  }
  r.expect_end();
}

std::string encode_streams(const std::vector<PackageStream>& streams) {
  Writer w;
  w.u32(static_cast<std::uint32_t>(streams.size()));
  for (const auto& s : streams) {
    w.str(s.tensor);
    w.u32(static_cast<std::uint32_t>(s.kind));
    w.u32(static_cast<std::uint32_t>(s.dtype));
    w.u32(s.rows);
    w.u32(s.cols);
    w.u32(static_cast<std::uint32_t>(s.slices.size()));
    for (const auto& sl : s.slices) {
      w.u32(sl.tile);
      w.u32(sl.address);
      w.u32(sl.row_begin);
      w.u32(sl.rows);
      w.u32(sl.col_begin);
      w.u32(sl.cols);
      w.u32(sl.transposed ? 1 : 0);
    }
  }
  return w.bytes;
}

void decode_streams(Reader& r, std::vector<PackageStream>& streams, const Target& target) {
  streams.resize(r.count(16));
  for (auto& s : streams) {
    s.tensor = r.str();
    s.kind = r.enumeration<StreamKind>(3);
    s.dtype = r.enumeration<DType>(kDTypeCount);
    s.rows = r.u32();
    s.cols = r.u32();
    s.slices.resize(r.count(28));
    for (auto& sl : s.slices) {
      sl.tile = r.u32();
      sl.address = r.u32();
      sl.row_begin = r.u32();
      sl.rows = r.u32();
      sl.col_begin = r.u32();
      sl.cols = r.u32();
      const std::uint32_t transposed = r.u32();
      if (transposed > 1) r.fail("stream slice transposed flag is not 0 or 1");
      sl.transposed = transposed == 1;
      if (sl.transposed && s.kind == StreamKind::output)
        r.fail("output stream slice is transposed; only inputs and weights may be");
      if (sl.tile >= target.tiles) r.fail("stream slice tile out of range");
      if (std::uint64_t(sl.row_begin) + sl.rows > s.rows || std::uint64_t(sl.col_begin) + sl.cols > s.cols)
        r.fail("stream slice lies outside its tensor");
      if (!words_fit(sl.address, packed_words(std::uint64_t(sl.rows) * sl.cols, s.dtype), target.memory_bytes))
        r.fail("stream slice lies outside tile memory");
    }
  }
  r.expect_end();
}

std::string encode_tile(const TileImage& tile) {
  Writer w;
  w.u32(tile.tile);
  w.u32(static_cast<std::uint32_t>(tile.buffers.size()));
  for (const auto& b : tile.buffers) {
    w.u32(b.offset);
    w.u32(b.bytes);
    w.u32(static_cast<std::uint32_t>(b.region));
  }
  w.u32(static_cast<std::uint32_t>(tile.supersteps.size()));
  for (const auto& step : tile.supersteps) {
    w.u32(static_cast<std::uint32_t>(step.compute.size()));
    for (const auto& call : step.compute) {
      w.u32(static_cast<std::uint32_t>(call.codelet));
      w.u32s(call.addresses);
      w.u32s(call.params);
    }
    w.u32(static_cast<std::uint32_t>(step.sends.size()));
    for (const auto& s : step.sends) {
      w.u64(s.cycle);
      w.u32(s.address);
      w.u32(s.words);
    }
    w.u32(static_cast<std::uint32_t>(step.receives.size()));
    for (const auto& rc : step.receives) {
      w.u64(rc.arrival);
      w.u32(rc.sender);
      w.u32(rc.address);
      w.u32(rc.words);
    }
  }
  return w.bytes;
}

void decode_tile(Reader& r, TileImage& tile, const Target& target, std::size_t supersteps) {
  tile.tile = r.u32();
  auto in_memory = [&](std::uint64_t address, std::uint64_t words, auto&& what) {
    if (!words_fit(address, words, target.memory_bytes))
      r.fail(fmt::format("{} of {} words from byte {} lies outside the tile's {} bytes of memory", what(), words,
                         address, target.memory_bytes));
  };
  auto in_time = [&](std::uint64_t cycle, std::uint32_t words, auto&& what) {
    if (cycle > kMaxExchangeCycle - words)
      r.fail(fmt::format("{} of {} words at cycle {} ends past cycle {}", what(), words, cycle, kMaxExchangeCycle));
  };
  tile.buffers.resize(r.count(12));
  for (auto& b : tile.buffers) {
    b.offset = r.u32();
    b.bytes = r.u32();
    b.region = r.enumeration<Region>(2);
    if (std::uint64_t{b.offset} + b.bytes > target.memory_bytes)
      r.fail(fmt::format("buffer at {}+{} lies outside the tile's {} bytes of memory", b.offset, b.bytes,
                         target.memory_bytes));
  }
  tile.supersteps.resize(r.count(12));
  if (tile.supersteps.size() != supersteps)
    r.fail(fmt::format("tile has {} supersteps, the package {}", tile.supersteps.size(), supersteps));
  for (std::size_t s = 0; s < tile.supersteps.size(); ++s) {
    TileSuperstep& step = tile.supersteps[s];
    step.compute.resize(r.count(12));
    for (std::size_t c = 0; c < step.compute.size(); ++c) {
      TileCodeletCall& call = step.compute[c];
      call.codelet = r.enumeration<Codelet>(kCodeletCount);
      call.addresses = r.u32s();
      call.params = r.u32s();
      auto where = [&] { return fmt::format("superstep {} call {} ({})", s, c, codelet_name(call.codelet)); };
      if (call.addresses.size() != codelet_operand_count(call.codelet) ||
          call.params.size() != codelet_param_count(call.codelet))
        r.fail(where() + ": wrong number of operands or params");
      for (std::uint32_t o = 0; o < call.addresses.size(); ++o)
        in_memory(call.addresses[o], codelet_operand_words(call.codelet, call.params, o),
                  [&] { return fmt::format("{} operand {}", where(), o); });
    }
    step.sends.resize(r.count(16));
    for (auto& send : step.sends) {
      send.cycle = r.u64();
      send.address = r.u32();
      send.words = r.u32();
      auto what = [&] { return fmt::format("superstep {} send", s); };
      in_memory(send.address, send.words, what);
      in_time(send.cycle, send.words, what);
    }
    step.receives.resize(r.count(20));
    for (auto& rc : step.receives) {
      rc.arrival = r.u64();
      rc.sender = r.u32();
      rc.address = r.u32();
      rc.words = r.u32();
      auto what = [&] { return fmt::format("superstep {} receive from tile {}", s, rc.sender); };
      if (rc.sender >= target.tiles) r.fail(what() + ": the tile is out of range");
      in_memory(rc.address, rc.words, what);
      in_time(rc.arrival, rc.words, what);
    }
  }
  r.expect_end();
}

struct SectionEntry {
  std::uint32_t tag, index;
  std::uint64_t offset, size, checksum;
};

/// The file's bytes, read with as few read() calls as its size allows.
// A package holds every tile's image; 4 GiB is far past any target's, and a FIFO or a device is
// refused before it is read.
constexpr std::uint64_t kMaxPackageBytes = std::uint64_t{4} << 30;

std::string read_whole_file(const std::string& path) {
  return read_bounded_file(path, "the package", kMaxPackageBytes);
}

}  // namespace

SupportBytes tile_support_bytes(const TileImage& image) {
  SupportBytes support;
  std::uint32_t codelets_run = 0;  // one bit per codelet id: its code is held once (as call_support_bytes)
  for (const TileSuperstep& step : image.supersteps) {
    for (const TileCodeletCall& call : step.compute) {
      const auto id = static_cast<std::uint32_t>(call.codelet);
      if (id >= kCodeletCount) continue;  // readers refuse unknown codelets before this is asked
      if (!(codelets_run & (1u << id))) support.code += codelet_code_bytes(call.codelet);
      codelets_run |= 1u << id;
      support.vertex_state += vertex_state_bytes(call.codelet);
    }
    support.exchange_descriptors += std::uint64_t{kSendDescriptorBytes} * step.sends.size() +
                                    std::uint64_t{kReceiveDescriptorBytes} * step.receives.size();
  }
  return support;
}

PackageKey read_package_key(const std::string& path) {
  const std::string fix = " (make a key with: head -c 32 /dev/urandom > " + path + " && chmod 600 " + path + ")";
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 && errno == ELOOP) throw Error(path + ": key file is a symbolic link; name the key file itself");
  if (fd < 0) throw Error(path + ": cannot open key file: " + std::strerror(errno) + fix);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat status {};
  if (::fstat(fd, &status) != 0) throw Error(path + ": cannot read key file: " + std::strerror(errno));
  if (!S_ISREG(status.st_mode)) throw Error(path + ": key file is not a regular file" + fix);
  if (status.st_uid != ::geteuid())
    throw Error(path +
                fmt::format(": key file is owned by uid {}, not by you (uid {}), so that user knows or can change "
                            "the key; use a key file of your own",
                            status.st_uid, ::geteuid()) +
                fix);
  if ((status.st_mode & 077) != 0)
    throw Error(path +
                fmt::format(": key file is accessible to group or others (mode {:04o}), so they could read the key "
                            "and forge signatures; fix: chmod 600 {} (and make a new key if others may have read it)",
                            status.st_mode & 07777, path));
  if (status.st_size < std::int64_t(kMinPackageKeyBytes) || status.st_size > std::int64_t(kMaxPackageKeyBytes))
    throw Error(path +
                fmt::format(": key file has {} bytes, a key needs {} to {} random bytes", status.st_size,
                            kMinPackageKeyBytes, kMaxPackageKeyBytes) +
                fix);
  PackageKey key{path, std::string(std::size_t(status.st_size), '\0')};
  std::size_t done = 0;
  while (done < key.secret.size()) {
    const ssize_t n = ::read(fd, key.secret.data() + done, key.secret.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(path + ": cannot read key file: " + std::strerror(errno));
    if (n == 0) throw Error(path + ": key file shrank while it was read; try again");
    done += std::size_t(n);
  }
  return key;
}

void write_package(const Package& package, const std::string& path, const PackageKey* signing_key) {
  if (package.tiles.size() != package.target.tiles)
    throw Error(path + fmt::format(": internal error: {} tile images for a {}-tile target", package.tiles.size(),
                                   package.target.tiles));
  const std::uint64_t count = 3 + package.tiles.size();
  std::vector<SectionEntry> entries;
  entries.reserve(count);
  // Each section is encoded when written: a large package is never held whole beside its tiles.
  auto each_section = [&](auto&& take) {
    take(kTagMeta, 0, encode_meta(package));
    take(kTagGraph, 0, encode_graph(package.graph));
    take(kTagStreams, 0, encode_streams(package.streams));
    for (std::uint32_t i = 0; i < package.tiles.size(); ++i) take(kTagTile, i, encode_tile(package.tiles[i]));
  };
  auto header_and_table = [&] {
    Writer table;
    for (const SectionEntry& entry : entries) {
      table.u32(entry.tag);
      table.u32(entry.index);
      table.u64(entry.offset);
      table.u64(entry.size);
      table.u64(entry.checksum);
    }
    Writer header;
    header.bytes.append(kMagic, sizeof(kMagic));
    header.u32(kPackageFormatVersion);
    header.u32(static_cast<std::uint32_t>(count));
    header.u64(XXH64(table.bytes.data(), table.bytes.size(), 0));
    return header.bytes + table.bytes;
  };
  AtomicFileWriter file(path, "package");
  std::uint64_t offset = kHeaderBytes + kEntryBytes * count;
  if (!signing_key) {
    // The header and table go in last, over the room kept for them.
    file.write(std::string(offset, '\0'));
    each_section([&](std::uint32_t tag, std::uint32_t index, const std::string& payload) {
      entries.push_back({tag, index, offset, payload.size(), XXH64(payload.data(), payload.size(), 0)});
      offset += payload.size();
      file.write(payload);
    });
    file.write_at(0, header_and_table());
    file.commit();
    return;
  }
  // Signed: the signature covers the bytes in file order, header first, so the sections are held until it is made.
  std::vector<std::string> payloads;
  each_section([&](std::uint32_t tag, std::uint32_t index, std::string payload) {
    entries.push_back({tag, index, offset, payload.size(), XXH64(payload.data(), payload.size(), 0)});
    offset += payload.size();
    payloads.push_back(std::move(payload));
  });
  PackageMac mac(*signing_key);
  auto write = [&](std::string_view bytes) {
    file.write(bytes);
    mac.update(bytes);
  };
  write(header_and_table());
  for (const std::string& payload : payloads) write(payload);
  file.write(std::string_view(kSignatureMagic, sizeof(kSignatureMagic)));
  file.write(mac.finish());
  file.commit();
}

void remove_package_temporary() noexcept { remove_temporary_files(); }

namespace {

/// A package's bytes by range: the whole file in memory (a signed package: the signature covers
/// the bytes decoded), or read section by section from the open file, so that a large package is
/// not held as bytes beside its decoded tiles. A view is valid until the next read.
class PackageBytes {
public:
  struct Checked {};
  /// Signed packages: the bytes the signature was checked on.
  PackageBytes(Checked, std::string whole) : whole_(std::move(whole)), size_(whole_.size()) {}
  /// Unsigned packages: a regular file of at most kMaxPackageBytes, read as asked.
  explicit PackageBytes(const std::string& path)
      : path_(path), fd_(open_bounded_file(path, "the package", kMaxPackageBytes, size_)) {}
  ~PackageBytes() {
    if (fd_ >= 0) ::close(fd_);
  }
  PackageBytes(const PackageBytes&) = delete;
  PackageBytes& operator=(const PackageBytes&) = delete;

  std::uint64_t size() const { return size_; }
  /// Bytes [offset, offset + count), which the caller checked lie within size().
  std::string_view read(std::uint64_t offset, std::uint64_t count) {
    if (fd_ < 0) return std::string_view(whole_).substr(offset, count);
    buffer_.resize(count);
    for (std::uint64_t done = 0; done < count;) {
      const ssize_t n = ::pread(fd_, buffer_.data() + done, count - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(errno);
      if (n == 0) throw Error(path_ + ": the package shrank while it was read; it is being rewritten, try again");
      done += static_cast<std::uint64_t>(n);
    }
    return buffer_;
  }

private:
  [[noreturn]] void fail(int error) const {
    throw Error(fmt::format("{}: cannot read the package: {}", path_, std::strerror(error)));
  }
  std::string path_, whole_, buffer_;
  std::uint64_t size_ = 0;  // before fd_: open_bounded_file sets it
  int fd_ = -1;
};

Package decode_package(PackageBytes& bytes, const std::string& path) {
  if (bytes.size() < kHeaderBytes) throw Error(path + ": not a Tessera package (bad magic)");
  const std::string head(bytes.read(0, kHeaderBytes));
  if (std::memcmp(head.data(), kMagic, sizeof(kMagic)) != 0) throw Error(path + ": not a Tessera package (bad magic)");
  Reader header(head.data() + 8, kHeaderBytes - 8, path + ": header");
  const std::uint32_t version = header.u32();
  if (version != kPackageFormatVersion)
    throw Error(path + fmt::format(": package format version {}, this runtime reads version {}", version,
                                   kPackageFormatVersion));
  const std::uint32_t count = header.u32();
  const std::uint64_t table_checksum = header.u64();
  if (count < 3 || count > kMaxSections || kHeaderBytes + std::uint64_t(count) * kEntryBytes > bytes.size())
    throw Error(path + fmt::format(": section table of {} entries does not fit the file ({} bytes): truncated?", count,
                                   bytes.size()));
  const std::string table_bytes(bytes.read(kHeaderBytes, count * kEntryBytes));
  if (XXH64(table_bytes.data(), table_bytes.size(), 0) != table_checksum)
    throw Error(path + ": section table checksum mismatch");
  Reader table(table_bytes.data(), table_bytes.size(), path + ": section table");
  std::vector<SectionEntry> entries(count);
  // Sections follow the table in order, each in bytes of its own, so checksumming them reads
  // each byte of the file at most once (a table pointing many entries at one blob is refused).
  std::uint64_t first_free_byte = kHeaderBytes + std::uint64_t(count) * kEntryBytes;
  for (std::uint32_t i = 0; i < count; ++i) {
    SectionEntry& e = entries[i];
    e.tag = table.u32();
    e.index = table.u32();
    e.offset = table.u64();
    e.size = table.u64();
    e.checksum = table.u64();
    auto name = [&] { return fmt::format("{}[{}]", tag_name(e.tag), e.index); };
    if (e.offset > bytes.size() || e.size > bytes.size() - e.offset)
      throw Error(path + fmt::format(": section {} lies past the end of the file ({} bytes): truncated?", name(),
                                     bytes.size()));
    if (e.offset < first_free_byte)
      throw Error(path + fmt::format(": section table entry {} ({}) starts at byte {}, inside the header, the table or "
                                     "the section before it (which end at byte {}); sections must follow in order "
                                     "without overlapping",
                                     i, name(), e.offset, first_free_byte));
    first_free_byte = e.offset + e.size;
  }
  // After the last section: nothing, or a signature trailer (checked before this when a key is given).
  if (const std::uint64_t rest = bytes.size() - first_free_byte;
      rest != 0 && (rest != kTrailerBytes || std::memcmp(bytes.read(first_free_byte, sizeof(kSignatureMagic)).data(),
                                                         kSignatureMagic, sizeof(kSignatureMagic)) != 0))
    throw Error(path + fmt::format(": {} bytes after the last section (which ends at byte {}) are not a signature "
                                   "trailer: the file was appended to or its table edited",
                                   rest, first_free_byte));
  // Each section is checked against its checksum as it is read, before it is decoded.
  auto reader = [&](const SectionEntry& e) {
    const std::string_view section = bytes.read(e.offset, e.size);
    if (XXH64(section.data(), section.size(), 0) != e.checksum)
      throw Error(path +
                  fmt::format(": section {}[{}] checksum mismatch (the file is corrupt)", tag_name(e.tag), e.index));
    return Reader(section.data(), section.size(), fmt::format("{}: section {}[{}]", path, tag_name(e.tag), e.index));
  };
  if (entries[0].tag != kTagMeta || entries[1].tag != kTagGraph || entries[2].tag != kTagStreams)
    throw Error(path + ": sections are not in the expected order META, GRPH, STRM, TILE...");
  Package package;
  {
    Reader r = reader(entries[0]);
    decode_meta(r, package);
  }
  if (package.target.hash() != package.target_hash)
    throw Error(path + ": target description does not match its hash (the file is corrupt or was edited)");
  if (package.codelet_set_version != kCodeletSetVersion)
    throw Error(path + fmt::format(": codelet set version {}, this runtime has version {}", package.codelet_set_version,
                                   kCodeletSetVersion));
  {
    Reader r = reader(entries[1]);
    decode_graph(r, package.graph, package.target);
  }
  {
    Reader r = reader(entries[2]);
    decode_streams(r, package.streams, package.target);
  }
  if (count - 3 != package.target.tiles)
    throw Error(path + fmt::format(": {} tile sections for a {}-tile target", count - 3, package.target.tiles));
  package.tiles.resize(package.target.tiles);
  for (std::uint32_t i = 0; i < package.target.tiles; ++i) {
    const SectionEntry& e = entries[3 + i];
    if (e.tag != kTagTile || e.index != i) throw Error(path + fmt::format(": section {} should be TILE[{}]", 3 + i, i));
    Reader r = reader(e);
    decode_tile(r, package.tiles[i], package.target, package.superstep_labels.size());
    if (package.tiles[i].tile != i) r.fail(fmt::format("tile image says tile {}", package.tiles[i].tile));
  }
  return package;
}

}  // namespace

Package read_package(const std::string& path, const PackageKey* verify_key) {
  if (!verify_key) {
    PackageBytes file(path);
    return decode_package(file, path);
  }
  std::string whole = read_whole_file(path);
  if (whole.size() < kHeaderBytes || std::memcmp(whole.data(), kMagic, sizeof(kMagic)) != 0)
    throw Error(path + ": not a Tessera package (bad magic)");
  verify_signature(whole, path, *verify_key);
  PackageBytes bytes(PackageBytes::Checked{}, std::move(whole));
  return decode_package(bytes, path);
}

}  // namespace tessera
