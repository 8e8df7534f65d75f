// The TCP store server's data: the key-value table and the parked waits (private to src/store).
// It knows nothing about sockets: the event loop (tcp_store_server.cc) feeds it request payloads
// and delivers the reply frames it returns, which keeps both halves small and testable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "groupcoord/bytes.h"
#include "store/socket.h"
#include "store/tcp_store_protocol.h"

namespace groupcoord {
namespace store_internal {

/// A reply frame for a connection other than the requester (a woken or expired waiter).
struct Delivery {
  std::uint64_t connection = 0;
  std::string frame;
};

/// What became of one request.
struct RequestResult {
  enum class Kind {
    kReply,          ///< `frame` answers the requester now
    kParked,         ///< the requester waits; its reply comes later as a Delivery
    kProtocolError,  ///< `frame` is an error reply; the connection must be closed after it
  };
  Kind kind = Kind::kReply;
  std::string frame;
  /// Waiters on other connections that this request satisfied (a set, add or compare_set).
  std::vector<Delivery> woken;
};

/// Key-value table plus parked get/wait requests, one at most per connection (a client sends
/// its next request only after the reply to the previous one).
class ServerState {
 public:
  /// `max_total_bytes`: most key plus value bytes held at once (0: no limit).
  explicit ServerState(const ProtocolLimits& limits, std::size_t max_total_bytes = 0)
      : limits_(limits), max_total_bytes_(max_total_bytes) {}

  /// Decodes and executes one request payload from `connection`. Malformed input gives
  /// kProtocolError; refused operations (add on a non-integer) give a kInvalidArgument reply.
  RequestResult handle(std::uint64_t connection, std::string_view payload, TimePoint now);
  /// Timeout replies for every waiter whose deadline is at or before `now`.
  std::vector<Delivery> expire(TimePoint now);
  /// Forgets the waiter of a closed connection.
  void cancel(std::uint64_t connection);
  /// The earliest waiter deadline, if any.
  std::optional<TimePoint> next_deadline() const;
  /// Number of parked requests (for tests and logs).
  std::size_t num_waiters() const { return waiters_.size(); }
  /// Key plus value bytes held now.
  std::size_t stored_bytes() const { return stored_bytes_; }

 private:
  struct Waiter {
    Command command = Command::kWait;
    std::vector<std::string> keys;
    TimePoint deadline;
  };

  RequestResult dispatch(std::uint64_t connection, std::uint8_t command, FrameReader& reader,
                         TimePoint now);
  RequestResult do_set(FrameReader& reader);
  RequestResult do_get(std::uint64_t connection, FrameReader& reader, TimePoint now);
  RequestResult do_add(FrameReader& reader);
  RequestResult do_compare_set(FrameReader& reader);
  RequestResult do_check(FrameReader& reader);
  RequestResult do_wait(std::uint64_t connection, FrameReader& reader, TimePoint now);
  RequestResult do_delete_key(FrameReader& reader);
  RequestResult do_num_keys(FrameReader& reader);

  std::string read_key(FrameReader& reader);
  std::vector<std::string> read_keys(FrameReader& reader);
  TimePoint read_deadline(FrameReader& reader, TimePoint now);
  /// Parks `connection` until `keys` all exist, or answers at once when the deadline passed.
  RequestResult park(std::uint64_t connection, Command command, std::vector<std::string> keys,
                     TimePoint deadline);
  /// Replies for the waiters that `key` (just written) completes.
  std::vector<Delivery> wake(const std::string& key);
  std::vector<std::string> missing(const std::vector<std::string>& keys) const;
  std::string ok_reply_for(const Waiter& waiter) const;
  void unindex(std::uint64_t connection, const std::vector<std::string>& keys);
  /// values_[key] = value within max_total_bytes_; std::invalid_argument (the client's error)
  /// when it would go past it.
  void put(const std::string& key, Bytes value);
  /// Erases `key`; whether it existed.
  bool erase(const std::string& key);

  ProtocolLimits limits_;
  std::size_t max_total_bytes_ = 0;
  std::size_t stored_bytes_ = 0;
  std::unordered_map<std::string, Bytes> values_;
  std::unordered_map<std::uint64_t, Waiter> waiters_;  // by connection
  std::unordered_map<std::string, std::vector<std::uint64_t>> waiters_by_key_;
};

}  // namespace store_internal
}  // namespace groupcoord
