// The plugin-host protocol: frames over a socket, with deadlines.
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>

#include "isolation_protocol.hpp"

namespace tessera::isolation {

// ---- Blocking I/O with a deadline ----------------------------------------------------------
// Sends all of `bytes`; MSG_NOSIGNAL so a dead child is an EPIPE here, not a SIGPIPE that
// would kill the compiler.
IoResult send_all(int fd, const std::string& bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoResult::closed;
    sent += static_cast<std::size_t>(n);
  }
  return IoResult::ok;
}

// Reads exactly `size` bytes; gives up at `deadline` (Clock::time_point::max() = never).
IoResult read_exact(int fd, char* buffer, std::size_t size, Clock::time_point deadline) {
  std::size_t got = 0;
  while (got < size) {
    int timeout_ms = -1;
    if (deadline != Clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return IoResult::timed_out;
      timeout_ms = static_cast<int>(std::min<long long>(left, 1 << 30));
    }
    pollfd waiting{fd, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return IoResult::closed;
    if (ready == 0) return IoResult::timed_out;
    const ssize_t n = ::read(fd, buffer + got, size - got);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return IoResult::closed;
    got += static_cast<std::size_t>(n);
  }
  return IoResult::ok;
}

// Reads one frame; a bad header is a ProtocolError describing it.
IoResult read_frame(int fd, Frame& frame, Clock::time_point deadline) {
  char header[kHeaderBytes];
  if (IoResult r = read_exact(fd, header, sizeof header, deadline); r != IoResult::ok) return r;
  std::uint32_t magic, length;
  std::uint16_t version, type;
  std::memcpy(&magic, header, 4);
  std::memcpy(&version, header + 4, 2);
  std::memcpy(&type, header + 6, 2);
  std::memcpy(&length, header + 8, 4);
  if (magic != kMagic) {
    std::string shown;
    for (char c : header) shown += std::isprint(static_cast<unsigned char>(c)) ? c : '.';
    throw ProtocolError("a frame does not start with the protocol's magic (got \"" + shown + "\")");
  }
  if (version != kPluginHostProtocolVersion)
    throw ProtocolError("protocol version " + std::to_string(version) + ", expected " +
                        std::to_string(kPluginHostProtocolVersion));
  if (length > kMaxPayloadBytes) throw ProtocolError("a frame of " + std::to_string(length) + " bytes is too large");
  frame.type = static_cast<Message>(type);
  frame.payload.resize(length);
  return read_exact(fd, frame.payload.data(), length, deadline);
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    return "crashed: killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status)) + " without answering";
  return "stopped without answering";
}

}  // namespace tessera::isolation
