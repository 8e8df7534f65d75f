// Wire format of the TCP store (private to src/store).
//
// Connection start: the client sends magic, version and a token length (u32 each), then the
// token's bytes (the shared secret, empty when the job has none). The server answers with a reply
// frame: kOk + version + its limits, or kError + message and closes (wrong magic or version, a
// token that does not match the server's, too many connections from that peer).
//
// Then every message is a frame: u32 payload length, then the payload. All integers are little
// endian; `bytes` is a u32 length followed by that many bytes.
//   request payload: u8 Command, then
//     kSet        key:bytes value:bytes
//     kGet        key:bytes timeout_ms:i64         (parked server side until set or deadline)
//     kAdd        key:bytes delta:i64
//     kCompareSet key:bytes expected:bytes desired:bytes
//     kCheck      count:u32 key:bytes * count
//     kWait       count:u32 key:bytes * count timeout_ms:i64
//     kDeleteKey  key:bytes
//     kNumKeys
//   reply payload: u8 Status, then
//     kOk              kSet/kWait: nothing; kGet/kCompareSet: value:bytes; kAdd/kNumKeys: i64;
//                      kCheck/kDeleteKey: u8 (0 or 1)
//     kTimeout         count:u32 missing key:bytes * count
//     kError           message:bytes (a protocol error: the server then closes the connection)
//     kInvalidArgument message:bytes (the operation was refused; the connection stays usable)
//
// Every length is checked against the negotiated limits before anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace groupcoord {
namespace store_internal {

inline constexpr std::uint32_t kProtocolMagic = 0x54534347;  // "GCST" on the wire
inline constexpr std::uint32_t kProtocolVersion = 2;
/// The handshake's fixed part: magic, version, token length.
inline constexpr std::size_t kHandshakeBytes = 12;
/// Longest token a handshake may carry.
inline constexpr std::uint32_t kMaxTokenBytes = 1024;
inline constexpr std::size_t kFrameHeaderBytes = 4;
/// Upper bound of a reply frame before the limits are known (the handshake reply).
inline constexpr std::uint32_t kMaxHandshakeReplyBytes = 64 * 1024;
/// Server-side clamp of a request's timeout (a year), so deadline arithmetic cannot overflow.
inline constexpr std::int64_t kMaxTimeoutMs = 365LL * 24 * 3600 * 1000;

/// Request kinds. Values are part of the wire format.
enum class Command : std::uint8_t {
  kSet = 1,
  kGet = 2,
  kAdd = 3,
  kCompareSet = 4,
  kCheck = 5,
  kWait = 6,
  kDeleteKey = 7,
  kNumKeys = 8,
};

/// Reply kinds. Values are part of the wire format.
enum class Status : std::uint8_t { kOk = 0, kTimeout = 1, kError = 2, kInvalidArgument = 3 };

/// Name of a command for messages ("set", "get", ...), "unknown" otherwise.
const char* command_name(std::uint8_t command);

/// Size limits the server enforces; sent to clients in the handshake reply.
struct ProtocolLimits {
  std::uint32_t max_key_bytes = 0;
  std::uint32_t max_value_bytes = 0;
  std::uint32_t max_keys_per_request = 0;

  /// Largest request payload these limits allow (a compare_set carries two values).
  std::uint64_t max_request_bytes() const;
  /// Largest reply payload these limits allow.
  std::uint64_t max_reply_bytes() const;
};

/// A malformed or oversize message. Internal: the server turns it into a kError reply, the
/// client into DistributedError.
class ProtocolError : public std::runtime_error {
 public:
  explicit ProtocolError(const std::string& what) : std::runtime_error(what) {}
};

/// Builds one frame: reserves the length prefix, appends fields, patches the length.
class FrameWriter {
 public:
  FrameWriter() : buffer_(kFrameHeaderBytes, '\0') {}
  FrameWriter& u8(std::uint8_t value);
  FrameWriter& u32(std::uint32_t value);
  FrameWriter& i64(std::int64_t value);
  FrameWriter& bytes(std::string_view value);
  /// The finished frame, length prefix included. The writer is left empty.
  std::string finish();

 private:
  std::string buffer_;
};

/// Reads fields from a frame payload. Every read checks the bytes left; reads past the end or
/// over a limit throw ProtocolError naming `what`.
class FrameReader {
 public:
  explicit FrameReader(std::string_view payload) : data_(payload) {}
  std::uint8_t u8(const char* what);
  std::uint32_t u32(const char* what);
  std::int64_t i64(const char* what);
  /// A length-prefixed field of at most `max_size` bytes.
  std::string bytes(const char* what, std::uint64_t max_size);
  /// Throws ProtocolError when bytes are left over.
  void expect_end() const;

 private:
  void need(std::size_t size, const char* what) const;

  std::string_view data_;
  std::size_t pos_ = 0;
};

/// The handshake a client sends, carrying `token` (at most kMaxTokenBytes; empty: none).
std::string encode_handshake(std::string_view token);
/// Whether `presented` equals `expected`, in time that depends only on their lengths (a timing
/// side channel must not reveal how much of a guessed token was right).
bool tokens_match(std::string_view presented, std::string_view expected);
/// Little-endian u32 from 4 bytes.
std::uint32_t decode_u32(const char* data);
/// Reply frame carrying only a status and a message (kError / kInvalidArgument).
std::string encode_message_reply(Status status, std::string_view message);
/// Reply frame for kTimeout.
std::string encode_timeout_reply(const std::vector<std::string>& missing_keys);

}  // namespace store_internal
}  // namespace groupcoord
