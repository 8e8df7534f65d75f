// Deadline-bounded TCP helpers for the store (see socket.h).
#include "store/socket.h"
#include "store/resolver.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace store_internal {
namespace {

/// A non-blocking, close-on-exec stream socket for `ai`, or an invalid fd (errno set).
UniqueFd open_socket(const addrinfo* ai) {
  return UniqueFd(
      socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
}

/// Waits for `events` on `fd` until `deadline`. Returns >0 when ready, 0 on timeout, <0 on error.
int wait_for(int fd, short events, TimePoint deadline) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int rc = poll(&pfd, 1, poll_timeout_ms(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0 && Clock::now() < deadline) continue;  // poll rounds; re-check the clock
    return rc;
  }
}

/// Connects `fd` to `ai` before `deadline`. Returns 0 or an errno value.
int connect_one(int fd, const addrinfo* ai, TimePoint deadline) {
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS && errno != EINTR) return errno;
  const int ready = wait_for(fd, POLLOUT, deadline);
  if (ready == 0) return ETIMEDOUT;
  if (ready < 0) return errno;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

/// "host:port" for a socket address.
std::string sockaddr_text(const sockaddr_storage& addr) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), host, sizeof(host),
                  service, sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return format_endpoint(host, std::atoi(service));
}

}  // namespace

TimePoint deadline_after(std::chrono::milliseconds timeout) {
  // A year is "forever" for a store wait and keeps every later conversion (poll's int,
  // condition variables' timespec) far from overflow.
  constexpr std::chrono::milliseconds kLongest = std::chrono::hours(24 * 365);
  const TimePoint now = Clock::now();
  if (timeout.count() <= 0) return now;
  return now + (timeout < kLongest ? timeout : kLongest);
}

int poll_timeout_ms(TimePoint deadline) {
  const TimePoint now = Clock::now();
  if (deadline <= now) return 0;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns a pointer that may or may not be `buffer`.
  return strerror_r(err, buffer, sizeof(buffer));
}

std::string format_endpoint(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);  // close(2) errors on a socket carry nothing actionable
  fd_ = fd;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    GC_THROW(DistributedError, "store: cannot make socket non-blocking: ", errno_text(errno));
  }
}

void set_nodelay(int fd) {
  int one = 1;
  // Best effort: a socket without TCP_NODELAY is slower, not wrong.
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

UniqueFd listen_tcp(const std::string& host, int port, int backlog) {
  const std::string where = format_endpoint(host, port);
  std::string error;
  // Binding resolves a local address: bounded like everything else, generously.
  AddrInfoPtr addrs = resolve_before(host, port, /*passive=*/true,
                                     deadline_after(std::chrono::seconds(30)), &error);
  if (!addrs) GC_THROW(DistributedError, "store server: cannot listen on ", where, ": ", error);
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd = open_socket(ai);
    if (!fd.valid()) {
      error = errno_text(errno);
      continue;
    }
    int one = 1;
    (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd.get(), backlog) == 0) {
      return fd;
    }
    error = errno_text(errno);
  }
  GC_THROW(DistributedError, "store server: cannot listen on ", where, ": ", error);
}

int local_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    GC_THROW(DistributedError, "store: getsockname failed: ", errno_text(errno));
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
}

std::string peer_name(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return sockaddr_text(addr);
}

UniqueFd try_connect_tcp(const std::string& host, int port, TimePoint deadline,
                         std::string* error) {
  AddrInfoPtr addrs = resolve_before(host, port, /*passive=*/false, deadline, error);
  if (!addrs) return UniqueFd();
  for (const addrinfo* ai = addrs.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd = open_socket(ai);
    if (!fd.valid()) {
      *error = errno_text(errno);
      continue;
    }
    const int err = connect_one(fd.get(), ai, deadline);
    if (err == 0) {
      set_nodelay(fd.get());
      return fd;
    }
    *error = errno_text(err);
  }
  return UniqueFd();
}

IoStatus send_all(int fd, const char* data, std::size_t size, TimePoint deadline, int* err) {
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::kClosed : IoStatus::kError;
    }
    const int ready = wait_for(fd, POLLOUT, deadline);
    if (ready == 0) return IoStatus::kTimeout;
    if (ready < 0) {
      *err = errno;
      return IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

IoStatus recv_exact(int fd, char* data, std::size_t size, TimePoint deadline, int* err) {
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::recv(fd, data + got, size - got, 0);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      *err = errno;
      return errno == ECONNRESET ? IoStatus::kClosed : IoStatus::kError;
    }
    const int ready = wait_for(fd, POLLIN, deadline);
    if (ready == 0) return IoStatus::kTimeout;
    if (ready < 0) {
      *err = errno;
      return IoStatus::kError;
    }
  }
  return IoStatus::kOk;
}

std::string io_status_text(IoStatus status, int err) {
  switch (status) {
    case IoStatus::kOk:
      return "ok";
    case IoStatus::kTimeout:
      return "timed out";
    case IoStatus::kClosed:
      return "connection closed by peer";
    case IoStatus::kError:
      return errno_text(err);
  }
  return "unknown";
}

}  // namespace store_internal
}  // namespace groupcoord
