// The TCP store server's event loop: one thread, poll(2) over the listener, a wake-up eventfd
// and every client connection. Request semantics live in ServerState; this file only moves
// bytes, frames them, and enforces the per-connection rules (handshake first, one request at
// a time, bounded buffers, error reply then disconnect on bad input).
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/tcp_store.h"
#include "store/socket.h"
#include "store/tcp_store_protocol.h"
#include "store/tcp_store_server_state.h"

namespace groupcoord {
namespace {

using store_internal::Clock;
using store_internal::Delivery;
using store_internal::ProtocolLimits;
using store_internal::RequestResult;
using store_internal::Status;
using store_internal::TimePoint;
using store_internal::UniqueFd;

constexpr int kBacklog = 1024;
constexpr std::size_t kReadChunk = 256 * 1024;
/// Bytes read from one connection per wake-up, so one bulk sender cannot starve the others.
constexpr std::size_t kReadBudget = 16 * 1024 * 1024;
/// How long to stop accepting after running out of file descriptors.
constexpr std::chrono::milliseconds kAcceptPause{100};
/// How long a connection being closed may take to read its error reply.
constexpr std::chrono::seconds kLinger{2};
constexpr std::uint64_t kMaxValueLimit = 1ULL << 30;
constexpr std::uint64_t kMaxKeyLimit = 1ULL << 20;

/// One client connection and its buffers.
struct Connection {
  std::uint64_t id = 0;
  UniqueFd fd;
  std::string peer;
  std::string peer_host;  ///< the peer's address without its port: what the limit counts
  bool counted = false;   ///< counted in connections_per_peer_
  bool handshaken = false;
  bool eof = false;      ///< the peer closed its sending side
  bool parked = false;   ///< a get/wait of this connection waits in ServerState
  bool closing = false;  ///< send what is queued (an error reply), then close
  bool dead = false;     ///< closed; removed at the end of the loop iteration
  TimePoint linger_deadline;
  std::string in;
  std::size_t in_pos = 0;
  std::string out;
  std::size_t out_pos = 0;

  std::size_t in_avail() const { return in.size() - in_pos; }
  bool out_pending() const { return out_pos < out.size(); }
};

/// Frees an empty buffer's memory once a large message has passed through it, so that an idle
/// connection does not pin hundreds of MiB.
void release_if_large(std::string* buffer) {
  constexpr std::size_t kKeepCapacity = 1024 * 1024;
  if (buffer->empty() && buffer->capacity() > kKeepCapacity) std::string().swap(*buffer);
}

ProtocolLimits limits_from(const TcpStoreServerOptions& options) {
  ProtocolLimits limits;
  limits.max_key_bytes = static_cast<std::uint32_t>(options.max_key_bytes);
  limits.max_value_bytes = static_cast<std::uint32_t>(options.max_value_bytes);
  limits.max_keys_per_request = static_cast<std::uint32_t>(options.max_keys_per_request);
  return limits;
}

void check_options(const TcpStoreServerOptions& options) {
  GC_CHECK(!options.host.empty(), "TcpStoreServer: host must not be empty");
  GC_CHECK(options.port >= 0 && options.port <= 65535, "TcpStoreServer: port must be in ",
           "0..65535, got ", options.port);
  GC_CHECK(options.max_key_bytes >= 1 && options.max_key_bytes <= kMaxKeyLimit,
           "TcpStoreServer: max_key_bytes must be in 1..", kMaxKeyLimit, ", got ",
           options.max_key_bytes);
  GC_CHECK(options.max_value_bytes <= kMaxValueLimit, "TcpStoreServer: max_value_bytes must be ",
           "at most ", kMaxValueLimit, ", got ", options.max_value_bytes);
  GC_CHECK(options.max_keys_per_request >= 1, "TcpStoreServer: max_keys_per_request must be >= 1");
  GC_CHECK(options.token.size() <= store_internal::kMaxTokenBytes, "TcpStoreServer: the token ",
           "must be at most ", store_internal::kMaxTokenBytes, " bytes, got ",
           options.token.size());
  // Frame lengths are u32 on the wire.
  GC_CHECK(limits_from(options).max_request_bytes() < 0xffffffffULL &&
               limits_from(options).max_reply_bytes() < 0xffffffffULL,
           "TcpStoreServer: max_keys_per_request * max_key_bytes is too large (",
           options.max_keys_per_request, " * ", options.max_key_bytes, ")");
}

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(const TcpStoreServerOptions& options, UniqueFd listener, UniqueFd wake)
      : host_(options.host),
        port_(store_internal::local_port(listener.get())),
        limits_(limits_from(options)),
        input_cap_(store_internal::kFrameHeaderBytes + limits_.max_request_bytes()),
        token_(options.token),
        max_connections_per_peer_(options.max_connections_per_peer),
        state_(limits_, options.max_total_bytes),
        listener_(std::move(listener)),
        wake_(std::move(wake)) {}

  ~Impl() { stop(); }

  void start() {
    running_ = true;
    thread_ = std::thread([this] { run(); });
  }

  void stop() {
    std::lock_guard<std::mutex> lock(stop_mutex_);  // two threads must not both join
    stop_requested_ = true;
    const std::uint64_t one = 1;
    // The eventfd counter cannot overflow from a few stops; a failed write leaves the loop
    // to notice stop_requested_ at its next wake-up, which the join below waits for.
    (void)!::write(wake_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
    running_ = false;
  }

  int port() const { return port_; }
  const std::string& host() const { return host_; }
  bool running() const { return running_ && !stop_requested_; }

 private:
  void run();
  /// One poll(2) round; false when the loop cannot go on.
  bool loop_once();
  std::vector<pollfd> poll_set(std::vector<std::uint64_t>* ids) const;
  int poll_timeout() const;
  void accept_clients();
  void on_events(Connection& c, short revents);
  void read_input(Connection& c);
  void append_input(Connection& c, const char* data, std::size_t size);
  void process_input(Connection& c);
  bool process_one(Connection& c);
  /// Checks the handshake as its bytes arrive (magic and version first, so that a stranger is
  /// told at once) and answers it once complete; true when it was answered.
  bool handle_handshake(Connection& c);
  void handle_request(Connection& c, std::string_view payload);
  void deliver(std::vector<Delivery> deliveries);
  void send_frame(Connection& c, std::string frame);
  void flush(Connection& c);
  void protocol_error(Connection& c, const std::string& message);
  void start_closing(Connection& c);
  void close_connection(Connection& c, const char* why);
  void expire(TimePoint now);
  void sweep();
  void process_runnable();

  const std::string host_;
  const int port_;
  const ProtocolLimits limits_;
  const std::size_t input_cap_;
  const std::string token_;
  const std::size_t max_connections_per_peer_;
  store_internal::ServerState state_;
  std::unordered_map<std::string, std::size_t> connections_per_peer_;
  UniqueFd listener_;
  UniqueFd wake_;
  std::mutex stop_mutex_;
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> running_{false};
  std::unordered_map<std::uint64_t, Connection> connections_;
  std::vector<std::uint64_t> runnable_;  ///< connections that may have input to process now
  std::vector<char> read_buffer_ = std::vector<char>(kReadChunk);  ///< recv() scratch space
  std::uint64_t next_id_ = 1;
  TimePoint accept_paused_until_{};
};

void TcpStoreServer::Impl::run() {
  GC_LOG(Debug, "store server: listening on ", store_internal::format_endpoint(host_, port_));
  while (!stop_requested_) {
    try {
      if (!loop_once()) break;
    } catch (const std::exception& e) {
      // E.g. std::bad_alloc building a huge reply. The server must outlive one failed request:
      // log, let the affected client time out, and keep serving. The pause stops a persistent
      // failure from flooding the log.
      GC_LOG(Error, "store server ", store_internal::format_endpoint(host_, port_),
             ": event loop error: ", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  connections_.clear();  // closes every client socket: clients see EOF
  listener_.reset();
  running_ = false;
  GC_LOG(Debug, "store server: stopped on port ", port_);
}

bool TcpStoreServer::Impl::loop_once() {
  std::vector<std::uint64_t> ids;
  std::vector<pollfd> fds = poll_set(&ids);
  const int rc = ::poll(fds.data(), fds.size(), poll_timeout());
  if (rc < 0) {
    if (errno == EINTR) return true;
    GC_LOG(Error, "store server ", store_internal::format_endpoint(host_, port_),
           ": poll failed, stopping: ", store_internal::errno_text(errno));
    return false;
  }
  if (fds[0].revents != 0) {
    std::uint64_t count = 0;
    (void)!::read(wake_.get(), &count, sizeof(count));
  }
  if (stop_requested_) return true;
  if ((fds[1].revents & POLLIN) != 0) accept_clients();
  for (std::size_t i = 2; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const auto it = connections_.find(ids[i - 2]);
    if (it != connections_.end() && !it->second.dead) on_events(it->second, fds[i].revents);
  }
  process_runnable();
  expire(Clock::now());
  process_runnable();
  sweep();
  return true;
}

std::vector<pollfd> TcpStoreServer::Impl::poll_set(std::vector<std::uint64_t>* ids) const {
  std::vector<pollfd> fds;
  fds.reserve(connections_.size() + 2);
  fds.push_back({wake_.get(), POLLIN, 0});
  // poll(2) ignores negative descriptors: that is how accepting pauses.
  const bool accepting = Clock::now() >= accept_paused_until_;
  fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
  for (const auto& entry : connections_) {
    const Connection& c = entry.second;
    short events = 0;
    if (!c.eof && (c.closing || c.in_avail() < input_cap_)) events |= POLLIN;
    if (c.out_pending()) events |= POLLOUT;
    fds.push_back({c.fd.get(), events, 0});
    ids->push_back(entry.first);
  }
  return fds;
}

int TcpStoreServer::Impl::poll_timeout() const {
  std::optional<TimePoint> wake_at = state_.next_deadline();
  auto earliest = [&wake_at](TimePoint t) {
    if (!wake_at || t < *wake_at) wake_at = t;
  };
  if (Clock::now() < accept_paused_until_) earliest(accept_paused_until_);
  for (const auto& entry : connections_) {
    if (entry.second.closing) earliest(entry.second.linger_deadline);
  }
  return wake_at ? store_internal::poll_timeout_ms(*wake_at) : -1;
}

void TcpStoreServer::Impl::accept_clients() {
  for (;;) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      // Out of descriptors or memory: the listener stays readable, so pause instead of spinning.
      GC_LOG(Warn, "store server: accept failed: ", store_internal::errno_text(errno),
             "; pausing new connections");
      accept_paused_until_ = Clock::now() + kAcceptPause;
      return;
    }
    store_internal::set_nodelay(fd.get());
    Connection c;
    c.id = next_id_++;
    c.peer = store_internal::peer_name(fd.get());
    c.peer_host = c.peer.substr(0, c.peer.rfind(':'));
    c.fd = std::move(fd);
    GC_LOG(Debug, "store server: client ", c.peer, " connected");
    Connection& added = connections_.emplace(c.id, std::move(c)).first->second;
    std::size_t& open = connections_per_peer_[added.peer_host];
    if (max_connections_per_peer_ > 0 && open >= max_connections_per_peer_) {
      // Told why before it is closed; it never counts, so it cannot push others out.
      protocol_error(added, "too many connections from " + added.peer_host + ": " +
                                std::to_string(open) + " are open, the limit is " +
                                std::to_string(max_connections_per_peer_) +
                                " (TcpStoreServerOptions::max_connections_per_peer)");
      continue;
    }
    ++open;
    added.counted = true;
  }
}

void TcpStoreServer::Impl::on_events(Connection& c, short revents) {
  if ((revents & (POLLERR | POLLNVAL)) != 0) return close_connection(c, "socket error");
  if ((revents & (POLLIN | POLLHUP)) != 0) read_input(c);
  if ((revents & POLLHUP) != 0) c.eof = true;  // both directions are gone
  if (c.dead) return;
  if (c.eof && c.parked) return close_connection(c, "closed while waiting");
  if ((revents & POLLOUT) != 0) flush(c);
  runnable_.push_back(c.id);
}

void TcpStoreServer::Impl::read_input(Connection& c) {
  std::size_t budget = kReadBudget;
  while (budget > 0 && !c.eof && (c.closing || c.in_avail() < input_cap_)) {
    std::size_t want = std::min(read_buffer_.size(), budget);
    if (!c.closing) want = std::min(want, input_cap_ - c.in_avail());
    const ssize_t n = ::recv(c.fd.get(), read_buffer_.data(), want, 0);
    if (n > 0) {
      budget -= static_cast<std::size_t>(n);
      if (!c.closing) append_input(c, read_buffer_.data(), static_cast<std::size_t>(n));
      // Draining a closing connection: the input is discarded.
    } else if (n == 0) {
      c.eof = true;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return;
    } else if (errno != EINTR) {
      return close_connection(c, "receive failed");
    }
  }
}

void TcpStoreServer::Impl::append_input(Connection& c, const char* data, std::size_t size) {
  if (c.in_pos > 0 && c.in_pos * 2 >= c.in.size()) {
    c.in.erase(0, c.in_pos);
    c.in_pos = 0;
    release_if_large(&c.in);
  }
  // Inside a large frame, grow the buffer once to the frame's size instead of doubling.
  if (c.handshaken && c.in_avail() >= store_internal::kFrameHeaderBytes) {
    const std::uint64_t length = store_internal::decode_u32(c.in.data() + c.in_pos);
    if (length <= limits_.max_request_bytes()) {
      c.in.reserve(c.in_pos + store_internal::kFrameHeaderBytes + length);
    }
  }
  c.in.append(data, size);
}

void TcpStoreServer::Impl::process_runnable() {
  while (!runnable_.empty()) {
    const std::uint64_t id = runnable_.back();
    runnable_.pop_back();
    const auto it = connections_.find(id);
    if (it != connections_.end() && !it->second.dead) process_input(it->second);
  }
}

void TcpStoreServer::Impl::process_input(Connection& c) {
  // One request at a time: the next is decoded only once the previous reply has been sent,
  // which bounds the output buffered per connection.
  while (!c.dead && !c.closing && !c.parked && !c.out_pending() && process_one(c)) {
  }
  if (c.dead || c.closing || c.parked || c.out_pending() || !c.eof) return;
  if (c.in_avail() > 0) {
    protocol_error(c, "truncated message: connection closed with " + std::to_string(c.in_avail()) +
                          " bytes of an incomplete " + (c.handshaken ? "request" : "handshake"));
  } else {
    close_connection(c, "closed by client");
  }
}

bool TcpStoreServer::Impl::process_one(Connection& c) {
  if (!c.handshaken) return handle_handshake(c);
  if (c.in_avail() < store_internal::kFrameHeaderBytes) return false;
  const std::uint32_t length = store_internal::decode_u32(c.in.data() + c.in_pos);
  if (length == 0 || length > limits_.max_request_bytes()) {
    protocol_error(c, "request of " + std::to_string(length) + " bytes is outside 1.." +
                          std::to_string(limits_.max_request_bytes()));
    return false;
  }
  if (c.in_avail() < store_internal::kFrameHeaderBytes + length) return false;
  const std::string_view payload(c.in.data() + c.in_pos + store_internal::kFrameHeaderBytes,
                                 length);
  c.in_pos += store_internal::kFrameHeaderBytes + length;
  handle_request(c, payload);  // `payload` stays valid: nothing below touches c.in
  return true;
}

bool TcpStoreServer::Impl::handle_handshake(Connection& c) {
  constexpr std::size_t kMagicAndVersion = 8;
  if (c.in_avail() < kMagicAndVersion) return false;
  const char* hello = c.in.data() + c.in_pos;
  const std::uint32_t magic = store_internal::decode_u32(hello);
  const std::uint32_t version = store_internal::decode_u32(hello + 4);
  if (magic != store_internal::kProtocolMagic) {
    protocol_error(
        c, "bad handshake magic " + std::to_string(magic) + ": not a groupcoord store client");
    return false;
  }
  if (version != store_internal::kProtocolVersion) {
    protocol_error(c, "unsupported protocol version " + std::to_string(version) +
                          " (this server speaks " +
                          std::to_string(store_internal::kProtocolVersion) + ")");
    return false;
  }
  if (c.in_avail() < store_internal::kHandshakeBytes) return false;
  const std::uint32_t token_bytes = store_internal::decode_u32(hello + kMagicAndVersion);
  if (token_bytes > store_internal::kMaxTokenBytes) {
    protocol_error(c, "handshake token of " + std::to_string(token_bytes) +
                          " bytes is over the limit of " +
                          std::to_string(store_internal::kMaxTokenBytes));
    return false;
  }
  if (c.in_avail() < store_internal::kHandshakeBytes + token_bytes) return false;
  const std::string_view token(hello + store_internal::kHandshakeBytes, token_bytes);
  c.in_pos += store_internal::kHandshakeBytes + token_bytes;
  if (!token_.empty() && !store_internal::tokens_match(token, token_)) {
    GC_LOG(Warn, "store server ", store_internal::format_endpoint(host_, port_), ": refused ",
           c.peer, ": ", token.empty() ? "no token" : "a wrong token");
    protocol_error(c, std::string("this store requires its job's token and the client ") +
                          (token.empty() ? "presented none" : "presented another one") +
                          " (every rank must have the same GROUPCOORD_STORE_TOKEN)");
    return false;
  }
  c.handshaken = true;
  send_frame(c, store_internal::FrameWriter()
                    .u8(static_cast<std::uint8_t>(Status::kOk))
                    .u32(store_internal::kProtocolVersion)
                    .u32(limits_.max_key_bytes)
                    .u32(limits_.max_value_bytes)
                    .u32(limits_.max_keys_per_request)
                    .finish());
  return true;
}

void TcpStoreServer::Impl::handle_request(Connection& c, std::string_view payload) {
  RequestResult result;
  try {
    result = state_.handle(c.id, payload, Clock::now());
  } catch (const std::exception& e) {  // e.g. std::bad_alloc: drop this client, keep serving
    return protocol_error(c, std::string("server error: ") + e.what());
  }
  switch (result.kind) {
    case RequestResult::Kind::kReply:
      send_frame(c, std::move(result.frame));
      break;
    case RequestResult::Kind::kParked:
      c.parked = true;
      break;
    case RequestResult::Kind::kProtocolError:
      GC_LOG(Debug, "store server: dropping client ", c.peer, " after a bad request");
      start_closing(c);
      send_frame(c, std::move(result.frame));
      break;
  }
  deliver(std::move(result.woken));
}

void TcpStoreServer::Impl::deliver(std::vector<Delivery> deliveries) {
  for (Delivery& delivery : deliveries) {
    const auto it = connections_.find(delivery.connection);
    if (it == connections_.end() || it->second.dead) continue;
    it->second.parked = false;
    send_frame(it->second, std::move(delivery.frame));
    runnable_.push_back(delivery.connection);
  }
}

void TcpStoreServer::Impl::send_frame(Connection& c, std::string frame) {
  if (c.dead) return;
  if (!c.out_pending()) {
    c.out = std::move(frame);
    c.out_pos = 0;
  } else {
    c.out += frame;
  }
  flush(c);
}

void TcpStoreServer::Impl::flush(Connection& c) {
  while (c.out_pending()) {
    const ssize_t n =
        ::send(c.fd.get(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) {
      c.out_pos += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;  // POLLOUT will call again
    } else {
      return close_connection(c, "send failed");
    }
  }
  c.out.clear();
  c.out_pos = 0;
  release_if_large(&c.out);
  if (c.closing) {
    // Half-close first so the client reads the error reply before it sees the end.
    ::shutdown(c.fd.get(), SHUT_WR);
    close_connection(c, "error reply sent");
  }
}

void TcpStoreServer::Impl::protocol_error(Connection& c, const std::string& message) {
  GC_LOG(Debug, "store server: dropping client ", c.peer, ": ", message);
  start_closing(c);
  send_frame(c, store_internal::encode_message_reply(Status::kError, message));
}

void TcpStoreServer::Impl::start_closing(Connection& c) {
  // Set before the error reply is queued, so that flush() closes once it is out.
  c.closing = true;
  c.linger_deadline = Clock::now() + kLinger;
}

void TcpStoreServer::Impl::close_connection(Connection& c, const char* why) {
  if (c.dead) return;
  GC_LOG(Debug, "store server: closing client ", c.peer, " (", why, ")");
  c.dead = true;
  if (c.parked) state_.cancel(c.id);
  c.parked = false;
}

void TcpStoreServer::Impl::expire(TimePoint now) {
  deliver(state_.expire(now));
  for (auto& entry : connections_) {
    Connection& c = entry.second;
    if (c.closing && !c.dead && now >= c.linger_deadline) {
      close_connection(c, "error reply not read in time");
    }
  }
}

void TcpStoreServer::Impl::sweep() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->second.dead) {
      ++it;
      continue;
    }
    if (it->second.counted) {
      const auto open = connections_per_peer_.find(it->second.peer_host);
      if (open != connections_per_peer_.end() && --open->second == 0) {
        connections_per_peer_.erase(open);
      }
    }
    it = connections_.erase(it);
  }
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TcpStoreServer::~TcpStoreServer() { stop(); }

std::unique_ptr<TcpStoreServer> TcpStoreServer::start(const TcpStoreServerOptions& options) {
  check_options(options);
  UniqueFd listener = store_internal::listen_tcp(options.host, options.port, kBacklog);
  UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) {
    GC_THROW(DistributedError,
             "TcpStoreServer: eventfd failed: ", store_internal::errno_text(errno));
  }
  auto impl = std::make_unique<Impl>(options, std::move(listener), std::move(wake));
  impl->start();
  return std::unique_ptr<TcpStoreServer>(new TcpStoreServer(std::move(impl)));
}

int TcpStoreServer::port() const { return impl_->port(); }

const std::string& TcpStoreServer::host() const { return impl_->host(); }

void TcpStoreServer::stop() {
  if (impl_) impl_->stop();
}

bool TcpStoreServer::running() const { return impl_->running(); }

}  // namespace groupcoord
