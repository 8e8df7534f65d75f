// TcpStore, the client Store of a TcpStoreServer (see groupcoord/tcp_store.h).
#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/tcp_store.h"
#include "store/socket.h"
#include "store/store_semantics.h"
#include "store/tcp_store_protocol.h"

namespace groupcoord {
namespace {

using store_internal::Clock;
using store_internal::Command;
using store_internal::FrameReader;
using store_internal::FrameWriter;
using store_internal::IoStatus;
using store_internal::ProtocolLimits;
using store_internal::Status;
using store_internal::TimePoint;
using store_internal::UniqueFd;

/// Time a reply may take beyond the request's own timeout (transfer, a busy server), so the
/// server's TIMEOUT reply normally arrives before the client gives up on the connection.
constexpr std::chrono::milliseconds kReplySlack{std::chrono::seconds(5)};
constexpr std::chrono::milliseconds kFirstRetryDelay{10};
constexpr std::chrono::milliseconds kMaxRetryDelay{1000};

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "ip6-localhost" ||
         host.rfind("127.", 0) == 0;
}

std::uint8_t byte(Command command) { return static_cast<std::uint8_t>(command); }

std::int64_t wire_timeout(std::chrono::milliseconds timeout) {
  return std::min<std::int64_t>(timeout.count(), store_internal::kMaxTimeoutMs);
}

/// Client-side deadline of a request whose server-side timeout is `timeout`.
TimePoint reply_deadline(std::chrono::milliseconds timeout) {
  return store_internal::deadline_after(std::chrono::milliseconds(wire_timeout(timeout)) +
                                        kReplySlack);
}

/// Result of one handshake attempt.
enum class Handshake { kOk, kRetry, kRejected };

}  // namespace

/// The socket of a TcpStore and the request/reply exchange over it. Thread-safe: one request
/// at a time under mutex_.
class TcpStore::Connection {
 public:
  Connection(std::string host, int port, std::chrono::milliseconds connect_timeout,
             std::string token)
      : host_(std::move(host)),
        port_(port),
        endpoint_(store_internal::format_endpoint(host_, port_)),
        token_(std::move(token)) {
    connect(connect_timeout);
  }

  /// Sends `request`, reads the reply until `deadline`, and returns its payload once its status
  /// is kOk (status byte included). Other statuses and failures throw; `what` names the
  /// operation and keys for the message.
  std::string call(const std::string& request, TimePoint deadline, const std::string& what);

  const ProtocolLimits& limits() const { return limits_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void connect(std::chrono::milliseconds connect_timeout);
  Handshake handshake(int fd, TimePoint deadline, std::string* error);
  std::string exchange(const std::string& request, TimePoint deadline, const std::string& what);
  void check_status(const std::string& payload, const std::string& what);
  [[noreturn]] void fail_io(const std::string& what, const char* step, IoStatus status, int err);
  [[noreturn]] void fail(const std::string& what, const std::string& why);

  const std::string host_;
  const int port_;
  const std::string endpoint_;
  const std::string token_;  ///< presented in every handshake
  std::mutex mutex_;
  UniqueFd fd_;
  ProtocolLimits limits_;
  std::string broken_;  ///< why the connection is unusable; empty while healthy
};

void TcpStore::Connection::connect(std::chrono::milliseconds connect_timeout) {
  const TimePoint deadline = store_internal::deadline_after(connect_timeout);
  std::chrono::milliseconds delay = kFirstRetryDelay;
  std::string error = "no attempt made";
  bool reached = false;  // some attempt got a TCP connection: something listens there
  for (int attempt = 1;; ++attempt) {
    UniqueFd fd = store_internal::try_connect_tcp(host_, port_, deadline, &error);
    if (fd.valid()) {
      reached = true;
      const Handshake result = handshake(fd.get(), deadline, &error);
      if (result == Handshake::kOk) {
        fd_ = std::move(fd);
        GC_LOG(Debug, "TcpStore: connected to ", endpoint_, " after ", attempt, " attempt(s)");
        return;
      }
      if (result == Handshake::kRejected) {
        GC_THROW(DistributedError, "TcpStore: server ", endpoint_,
                 " refused the connection: ", error);
      }
    }
    if (Clock::now() >= deadline) {
      GC_THROW(TimeoutError, "TcpStore: could not connect to ", endpoint_, " within ",
               connect_timeout.count(), " ms (", attempt, " attempts; last error: ", error, ")",
               reached ? "; a server that is not a groupcoord store listens there? (a torch "
                         "TCPStore: GROUPCOORD_TORCH_STORE=1 joins one)"
                       : "");
    }
    GC_LOG(Debug, "TcpStore: connect to ", endpoint_, " failed (", error, "), retrying");
    const auto left = deadline - Clock::now();
    std::this_thread::sleep_for(std::min<Clock::duration>(delay, left));
    delay = std::min(delay * 2, kMaxRetryDelay);
  }
}

Handshake TcpStore::Connection::handshake(int fd, TimePoint deadline, std::string* error) {
  const std::string hello = store_internal::encode_handshake(token_);
  int err = 0;
  IoStatus status = store_internal::send_all(fd, hello.data(), hello.size(), deadline, &err);
  char header[store_internal::kFrameHeaderBytes];
  if (status == IoStatus::kOk) {
    status = store_internal::recv_exact(fd, header, sizeof(header), deadline, &err);
  }
  if (status != IoStatus::kOk) {
    // A server that is starting or stopping may accept and close; try again.
    *error = "handshake: " + store_internal::io_status_text(status, err);
    return Handshake::kRetry;
  }
  const std::uint32_t length = store_internal::decode_u32(header);
  if (length == 0 || length > store_internal::kMaxHandshakeReplyBytes) {
    *error = "handshake reply of " + std::to_string(length) + " bytes: not a groupcoord store";
    return Handshake::kRejected;
  }
  std::string payload(length, '\0');
  status = store_internal::recv_exact(fd, payload.data(), length, deadline, &err);
  if (status != IoStatus::kOk) {
    *error = "handshake: " + store_internal::io_status_text(status, err);
    return Handshake::kRetry;
  }
  try {
    FrameReader reader(payload);
    const auto reply = static_cast<Status>(reader.u8("status"));
    if (reply != Status::kOk) {
      *error = reader.bytes("message", length);
      return Handshake::kRejected;
    }
    reader.u32("version");
    limits_.max_key_bytes = reader.u32("max key bytes");
    limits_.max_value_bytes = reader.u32("max value bytes");
    limits_.max_keys_per_request = reader.u32("max keys per request");
  } catch (const store_internal::ProtocolError& e) {
    *error = std::string("bad handshake reply: ") + e.what();
    return Handshake::kRejected;
  }
  return Handshake::kOk;
}

std::string TcpStore::Connection::call(const std::string& request, TimePoint deadline,
                                       const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!broken_.empty()) {
    GC_THROW(DistributedError, "TcpStore ", endpoint_, ": ", what,
             ": the connection is broken by an earlier error (", broken_, ")");
  }
  std::string payload = exchange(request, deadline, what);
  check_status(payload, what);
  return payload;
}

std::string TcpStore::Connection::exchange(const std::string& request, TimePoint deadline,
                                           const std::string& what) {
  int err = 0;
  IoStatus status =
      store_internal::send_all(fd_.get(), request.data(), request.size(), deadline, &err);
  if (status != IoStatus::kOk) fail_io(what, "sending the request", status, err);
  char header[store_internal::kFrameHeaderBytes];
  status = store_internal::recv_exact(fd_.get(), header, sizeof(header), deadline, &err);
  if (status != IoStatus::kOk) fail_io(what, "waiting for the reply", status, err);
  const std::uint32_t length = store_internal::decode_u32(header);
  if (length == 0 || length > limits_.max_reply_bytes()) {
    fail(what, "reply of " + std::to_string(length) + " bytes is outside the protocol limits");
  }
  std::string payload(length, '\0');
  status = store_internal::recv_exact(fd_.get(), payload.data(), length, deadline, &err);
  if (status != IoStatus::kOk) fail_io(what, "reading the reply", status, err);
  return payload;
}

void TcpStore::Connection::check_status(const std::string& payload, const std::string& what) {
  FrameReader reader(payload);
  std::vector<std::string> missing;
  std::string message;
  Status status = Status::kError;
  try {
    status = static_cast<Status>(reader.u8("status"));
    if (status == Status::kTimeout) {
      const std::uint32_t count = reader.u32("missing key count");
      for (std::uint32_t i = 0; i < count; ++i) {
        missing.push_back(reader.bytes("missing key", limits_.max_key_bytes));
      }
    } else if (status != Status::kOk) {
      message = reader.bytes("message", payload.size());
    }
  } catch (const store_internal::ProtocolError& e) {
    fail(what, std::string("malformed reply: ") + e.what());
  }
  switch (status) {
    case Status::kOk:
      return;
    case Status::kTimeout:
      GC_THROW(TimeoutError, "TcpStore ", endpoint_, ": ", what, " timed out; missing keys ",
               store_internal::format_keys(missing));
    case Status::kInvalidArgument:
      GC_THROW(std::invalid_argument, "TcpStore ", endpoint_, ": ", what, ": ", message);
    case Status::kError:
      fail(what, "server error: " + message);  // the server closes after an error reply
  }
  fail(what, "unknown reply status " + std::to_string(static_cast<int>(status)));
}

void TcpStore::Connection::fail_io(const std::string& what, const char* step, IoStatus status,
                                   int err) {
  const std::string why = std::string(step) + ": " + store_internal::io_status_text(status, err);
  broken_ = why;
  fd_.reset();
  if (status == IoStatus::kTimeout) {
    GC_THROW(TimeoutError, "TcpStore ", endpoint_, ": ", what, ": no reply from the server (", why,
             ")");
  }
  GC_THROW(DistributedError, "TcpStore ", endpoint_, ": ", what, ": ", why);
}

void TcpStore::Connection::fail(const std::string& what, const std::string& why) {
  // After a protocol failure the stream position is unknown: never reuse the socket.
  broken_ = why;
  fd_.reset();
  GC_THROW(DistributedError, "TcpStore ", endpoint_, ": ", what, ": ", why);
}

// ---- TcpStore ---------------------------------------------------------------------------------

namespace {

/// "get('key')" / "wait['a', 'b']" for messages.
std::string describe(const char* op, const std::string& key) {
  return std::string(op) + "('" + key + "')";
}

std::string describe(const char* op, const std::vector<std::string>& keys) {
  return std::string(op) + store_internal::format_keys(keys);
}

/// Throws std::invalid_argument for an empty key or one over the server's limit.
void check_key(const char* op, const std::string& key, const ProtocolLimits& limits) {
  store_internal::check_key("TcpStore", op, key);
  GC_CHECK(key.size() <= limits.max_key_bytes, "TcpStore: ", op, ": key of ", key.size(),
           " bytes exceeds the server's limit of ", limits.max_key_bytes);
}

void check_keys(const char* op, const std::vector<std::string>& keys,
                const ProtocolLimits& limits) {
  GC_CHECK(keys.size() <= limits.max_keys_per_request, "TcpStore: ", op, ": ", keys.size(),
           " keys exceed the server's limit of ", limits.max_keys_per_request, " per request");
  for (const std::string& key : keys) check_key(op, key, limits);
}

void check_value(const char* op, const std::string& key, const Bytes& value,
                 const ProtocolLimits& limits) {
  GC_CHECK(value.size() <= limits.max_value_bytes, "TcpStore: ", op, "('", key, "'): value of ",
           value.size(), " bytes exceeds the server's limit of ", limits.max_value_bytes);
}

/// A reader positioned after the status byte of an OK reply.
FrameReader ok_reader(const std::string& payload) {
  FrameReader reader(payload);
  reader.u8("status");
  return reader;
}

}  // namespace

TcpStore::TcpStore(std::string host, int port, std::chrono::milliseconds timeout,
                   std::chrono::milliseconds connect_timeout, std::string token)
    : Store(timeout) {
  GC_CHECK(!host.empty(), "TcpStore: host must not be empty");
  GC_CHECK(port >= 1 && port <= 65535, "TcpStore: port must be in 1..65535, got ", port);
  GC_CHECK(timeout.count() >= 0, "TcpStore: timeout must not be negative");
  GC_CHECK(connect_timeout.count() >= 0, "TcpStore: connect_timeout must not be negative");
  GC_CHECK(token.size() <= store_internal::kMaxTokenBytes, "TcpStore: the token must be at most ",
           store_internal::kMaxTokenBytes, " bytes, got ", token.size());
  connection_ =
      std::make_unique<Connection>(std::move(host), port, connect_timeout, std::move(token));
}

TcpStore::~TcpStore() = default;

std::shared_ptr<TcpStore> TcpStore::create(const TcpStoreOptions& options) {
  std::unique_ptr<TcpStoreServer> server;
  int port = options.port;
  if (options.is_server) {
    TcpStoreServerOptions server_options;
    server_options.host = !options.bind_address.empty() ? options.bind_address
                          : is_loopback(options.host)   ? options.host
                                                        : std::string("0.0.0.0");
    server_options.port = options.port;
    server_options.token = options.token;
    server = TcpStoreServer::start(server_options);
    port = server->port();
  }
  auto store = std::make_shared<TcpStore>(options.host, port, options.timeout,
                                          options.connect_timeout, options.token);
  store->server_ = std::move(server);
  return store;
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  check_key("set", key, connection_->limits());
  check_value("set", key, value, connection_->limits());
  const std::string request =
      FrameWriter().u8(byte(Command::kSet)).bytes(key).bytes(value).finish();
  connection_->call(request, reply_deadline(timeout()), describe("set", key));
}

Bytes TcpStore::get(const std::string& key) {
  check_key("get", key, connection_->limits());
  const std::chrono::milliseconds wait_for = timeout();
  const std::string request =
      FrameWriter().u8(byte(Command::kGet)).bytes(key).i64(wire_timeout(wait_for)).finish();
  const std::string reply = connection_->call(
      request, reply_deadline(wait_for),
      describe("get", key) + " (timeout " + std::to_string(wait_for.count()) + " ms)");
  return ok_reader(reply).bytes("value", connection_->limits().max_value_bytes);
}

std::int64_t TcpStore::add(const std::string& key, std::int64_t delta) {
  check_key("add", key, connection_->limits());
  const std::string request = FrameWriter().u8(byte(Command::kAdd)).bytes(key).i64(delta).finish();
  const std::string reply =
      connection_->call(request, reply_deadline(timeout()), describe("add", key));
  return ok_reader(reply).i64("sum");
}

Bytes TcpStore::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const ProtocolLimits& limits = connection_->limits();
  check_key("compare_set", key, limits);
  check_value("compare_set", key, expected, limits);
  check_value("compare_set", key, desired, limits);
  const std::string request = FrameWriter()
                                  .u8(byte(Command::kCompareSet))
                                  .bytes(key)
                                  .bytes(expected)
                                  .bytes(desired)
                                  .finish();
  const std::string reply =
      connection_->call(request, reply_deadline(timeout()), describe("compare_set", key));
  return ok_reader(reply).bytes("value", limits.max_value_bytes);
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  check_keys("check", keys, connection_->limits());
  if (keys.empty()) return true;
  FrameWriter writer;
  writer.u8(byte(Command::kCheck)).u32(static_cast<std::uint32_t>(keys.size()));
  for (const std::string& key : keys) writer.bytes(key);
  const std::string reply =
      connection_->call(writer.finish(), reply_deadline(timeout()), describe("check", keys));
  return ok_reader(reply).u8("result") != 0;
}

void TcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  check_keys("wait", keys, connection_->limits());
  store_internal::check_timeout("TcpStore", "wait", timeout);
  if (keys.empty()) return;
  FrameWriter writer;
  writer.u8(byte(Command::kWait)).u32(static_cast<std::uint32_t>(keys.size()));
  for (const std::string& key : keys) writer.bytes(key);
  writer.i64(wire_timeout(timeout));
  connection_->call(
      writer.finish(), reply_deadline(timeout),
      describe("wait", keys) + " (timeout " + std::to_string(timeout.count()) + " ms)");
}

bool TcpStore::delete_key(const std::string& key) {
  check_key("delete_key", key, connection_->limits());
  const std::string request = FrameWriter().u8(byte(Command::kDeleteKey)).bytes(key).finish();
  const std::string reply =
      connection_->call(request, reply_deadline(timeout()), describe("delete_key", key));
  return ok_reader(reply).u8("result") != 0;
}

std::int64_t TcpStore::num_keys() {
  const std::string request = FrameWriter().u8(byte(Command::kNumKeys)).finish();
  const std::string reply = connection_->call(request, reply_deadline(timeout()), "num_keys");
  return ok_reader(reply).i64("count");
}

const std::string& TcpStore::host() const { return connection_->host(); }

int TcpStore::port() const { return connection_->port(); }

TcpStoreServer* TcpStore::server() const { return server_.get(); }

}  // namespace groupcoord
