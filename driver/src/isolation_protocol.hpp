// The plugin-host protocol's layers, internal to the driver: the wire format (frames and the
// encodings of targets, phases, programs and options) and blocking I/O with deadlines. The
// parent side (isolation.cpp, isolation_probe.cpp) and the child's loop (isolation_child.cpp)
// share them.
#pragma once
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "tessera/exchange.hpp"
#include "tessera/isolation.hpp"
#include "tessera/options.hpp"
#include "tessera/program.hpp"
#include "tessera/target.hpp"

namespace tessera::isolation {

// ---- Wire format -------------------------------------------------------------------------
// A frame is a 12-byte header (magic "TSPH", u16 version, u16 message type, u32 payload
// length) then the payload. Integers are little-endian fixed width, floats IEEE 754 bits,
// strings a u32 length then bytes. Both ends run on the same machine, so native order is
// checked once (static_assert) instead of swapped.
static_assert(std::endian::native == std::endian::little, "the plugin-host protocol assumes little-endian");

constexpr std::uint32_t kMagic = 0x48505354;  // "TSPH"
constexpr std::size_t kHeaderBytes = 12;
constexpr std::uint32_t kMaxPayloadBytes = 256u << 20;  // a phase of millions of transfers fits

enum class Message : std::uint16_t {
  load = 1,                // parent -> child: plugin kind, file, name, options
  loaded = 2,              // child -> parent: the plugin is configured
  schedule = 3,            // parent -> child: target, budget, phase
  scheduled = 4,           // child -> parent: the schedule
  failed = 5,              // child -> parent: u8 out_of_memory, message
  estimate = 6,            // parent -> child: target, program
  estimated = 7,           // child -> parent: compute, exchange, sync cycles, peak bytes
  estimate_exchange = 8,   // parent -> child: target, phase
  estimated_exchange = 9,  // child -> parent: cycles
};

// A malformed message from the other side.
struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Writer {
public:
  explicit Writer(Message type) {
    put(kMagic);
    put(kPluginHostProtocolVersion);
    put(static_cast<std::uint16_t>(type));
    put(std::uint32_t{0});  // length, patched by frame()
  }
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void put_string(const std::string& text) {
    put(static_cast<std::uint32_t>(text.size()));
    bytes_ += text;
  }
  const std::string& frame() {
    const auto length = static_cast<std::uint32_t>(bytes_.size() - kHeaderBytes);
    std::memcpy(bytes_.data() + 8, &length, sizeof length);
    return bytes_;
  }

private:
  std::string bytes_;
};

class Reader {
public:
  explicit Reader(const std::string& payload) : data_(payload) {}
  template <typename T>
  T get() {
    T value;
    need(sizeof value);
    std::memcpy(&value, data_.data() + at_, sizeof value);
    at_ += sizeof value;
    return value;
  }
  std::string get_string() {
    const auto size = get<std::uint32_t>();
    need(size);
    std::string text = data_.substr(at_, size);
    at_ += size;
    return text;
  }
  // A count of items of at least `item_bytes` each, checked against what is left so a
  // corrupt count cannot make us allocate without bound.
  std::uint32_t get_count(std::size_t item_bytes) {
    const auto count = get<std::uint32_t>();
    if (count > (data_.size() - at_) / item_bytes) throw ProtocolError("a count exceeds the message size");
    return count;
  }
  void finish() const {
    if (at_ != data_.size()) throw ProtocolError(std::to_string(data_.size() - at_) + " stray bytes after the message");
  }

private:
  void need(std::size_t bytes) const {
    if (data_.size() - at_ < bytes) throw ProtocolError("the message is truncated");
  }
  const std::string& data_;
  std::size_t at_ = 0;
};

/// Encodes or decodes one value; a decoder throws ProtocolError on a malformed payload.
void put_target(Writer& out, const Target& t);
Target get_target(Reader& in);
void put_phase(Writer& out, const ExchangePhase& phase);
ExchangePhase get_phase(Reader& in);
void put_ref(Writer& out, const BufferRef& ref);
BufferRef get_ref(Reader& in);
void put_program(Writer& out, const Program& program);
Program get_program(Reader& in);
void put_options(Writer& out, const Options& options);
Options get_options(Reader& in);

// ---- Blocking I/O with a deadline ----------------------------------------------------------
using Clock = std::chrono::steady_clock;

enum class IoResult { ok, closed, timed_out };

struct Frame {
  Message type;
  std::string payload;
};

IoResult send_all(int fd, const std::string& bytes);
IoResult read_exact(int fd, char* buffer, std::size_t size, Clock::time_point deadline);
IoResult read_frame(int fd, Frame& frame, Clock::time_point deadline);
std::string describe_wait_status(int status);

}  // namespace tessera::isolation
