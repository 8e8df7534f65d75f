// Private TCP helpers for the store: an owning file descriptor, deadline arithmetic and
// deadline-bounded socket I/O. Nothing here blocks without a deadline: sockets are
// non-blocking and every wait goes through poll(2) with the time left.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

namespace groupcoord {
namespace store_internal {

using Clock = std::chrono::steady_clock;
using TimePoint = Clock::time_point;

/// `now + timeout`, with timeouts above a year clamped to a year so nothing overflows.
TimePoint deadline_after(std::chrono::milliseconds timeout);
/// Milliseconds left until `deadline`, rounded up and clamped to [0, INT_MAX] for poll(2).
int poll_timeout_ms(TimePoint deadline);
/// strerror(err) in a thread-safe way.
std::string errno_text(int err);
/// "host:port", with brackets around IPv6 literals.
std::string format_endpoint(const std::string& host, int port);

/// Owns a file descriptor and closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release();
  /// Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Puts `fd` in non-blocking mode; throws DistributedError on failure.
void set_nonblocking(int fd);
/// Disables Nagle's algorithm: store requests are small and latency-bound.
void set_nodelay(int fd);

/// Binds and listens on host:port (port 0 = ephemeral). The socket is non-blocking and
/// close-on-exec. Throws DistributedError naming host:port when it cannot.
UniqueFd listen_tcp(const std::string& host, int port, int backlog);
/// The local port a bound socket got.
int local_port(int fd);
/// The peer address of a connected socket as "host:port" (for log lines).
std::string peer_name(int fd);

/// One attempt to connect to host:port (every resolved address in turn), bounded by
/// `deadline`. Returns an invalid fd and fills `*error` on failure; never throws for network
/// errors, so that the caller can retry with backoff.
UniqueFd try_connect_tcp(const std::string& host, int port, TimePoint deadline, std::string* error);

/// Outcome of a deadline-bounded transfer.
enum class IoStatus { kOk, kTimeout, kClosed, kError };

/// Sends all `size` bytes of `data` before `deadline`. On kError, `*err` holds errno.
/// Uses MSG_NOSIGNAL so that a dead peer gives EPIPE, not SIGPIPE.
IoStatus send_all(int fd, const char* data, std::size_t size, TimePoint deadline, int* err);
/// Receives exactly `size` bytes into `data` before `deadline`. kClosed: the peer closed first.
IoStatus recv_exact(int fd, char* data, std::size_t size, TimePoint deadline, int* err);
/// Human-readable text for a failed transfer ("timed out", "connection closed by peer", ...).
std::string io_status_text(IoStatus status, int err);

}  // namespace store_internal
}  // namespace groupcoord
