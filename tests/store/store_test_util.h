// Helpers for the store tests: timing, free ports, and a raw TCP client that speaks bytes, not
// the protocol, for the robustness tests. Frames are encoded here independently of
// src/store/tcp_store_protocol.*, so a bug there cannot hide itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace groupcoord {
namespace store_test {

using Clock = std::chrono::steady_clock;

/// Milliseconds since `start`.
inline std::int64_t elapsed_ms(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

/// A port on 127.0.0.1 that was free a moment ago (bound, read, closed).
int free_port();

/// Little-endian encoders, as the wire format specifies.
std::string le32(std::uint32_t value);
std::string le64(std::int64_t value);
/// u32 length + bytes.
std::string field(const std::string& bytes);
/// u32 payload length + payload.
std::string frame(const std::string& payload);
/// The client handshake: magic "GCST" (0x54534347), version 2 and `token`.
std::string hello(std::uint32_t magic = 0x54534347, std::uint32_t version = 2,
                  const std::string& token = std::string());

/// One reply frame as read off the wire.
struct RawReply {
  std::uint8_t status = 0;
  std::string body;  ///< the payload after the status byte
  /// The message of a kError / kInvalidArgument reply (u32 length + text).
  std::string message() const;
};

/// What a raw connection received before the server closed it (or the deadline passed).
struct RawOutcome {
  std::vector<RawReply> replies;
  bool closed = false;     ///< EOF or reset seen
  bool timed_out = false;  ///< the server neither answered nor closed within the deadline
  std::string trailing;    ///< bytes after the last complete frame
};

/// A blocking TCP connection to 127.0.0.1:port for byte-level tests.
class RawClient {
 public:
  explicit RawClient(int port);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  /// Sends all of `bytes`; false when the server has already closed.
  bool send(const std::string& bytes);
  /// Half-closes: the server sees EOF after what was sent.
  void shutdown_write();
  /// Reads exactly one reply frame within `timeout_ms`; false on EOF or timeout.
  bool read_reply(RawReply* reply, int timeout_ms = 5000);
  /// Reads until the server closes (or `timeout_ms` passes) and splits the bytes into frames.
  RawOutcome read_until_closed(int timeout_ms = 5000);

 private:
  int fd_ = -1;
  std::string pending_;
};

}  // namespace store_test
}  // namespace groupcoord
