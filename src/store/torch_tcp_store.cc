// TorchTcpStore: a client of torch's c10d TCPStore server (see groupcoord/torch_tcp_store.h and
// docs/torch_store.md for the protocol). Requests are one command byte and its arguments; strings
// are a little-endian u64 length and the bytes; integers are little-endian; one request is in
// flight per connection and replies carry no tags, so each request holds a pooled connection.
#include "groupcoord/torch_tcp_store.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "store/socket.h"
#include "store/store_semantics.h"

namespace groupcoord {
namespace {

using store_internal::Clock;
using store_internal::IoStatus;
using store_internal::TimePoint;
using store_internal::UniqueFd;

/// The requests this client sends. Their command bytes depend on the protocol generation.
enum class Op {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kDelete,
  kCancelWait,
  kPing
};

/// VALIDATE's magic number (torch >= 2.2), sent as the first request of a connection.
constexpr std::uint32_t kValidateMagic = 0x3C85F7CEu;
/// Replies to CHECK and WAIT / CANCEL_WAIT.
constexpr std::uint8_t kReady = 0;         // CHECK: every key exists
constexpr std::uint8_t kStopWaiting = 0;   // WAIT: every key exists
constexpr std::uint8_t kWaitCanceled = 1;  // CANCEL_WAIT done
/// How long each probe of TorchStoreProtocol::kAuto waits for its reply: a torch 2.2-2.4 libuv
/// server neither answers nor closes a connection whose first request it does not accept.
constexpr std::chrono::milliseconds kProbeWait{2000};
/// Longest value this client accepts in a reply (torch's libuv server caps values at 8 MiB).
constexpr std::uint64_t kMaxReplyBytes = std::uint64_t{1} << 30;
constexpr std::chrono::milliseconds kFirstRetryDelay{10};
constexpr std::chrono::milliseconds kMaxRetryDelay{1000};
/// Longest single WAIT of TorchTcpStore::wait (torch 2) before it looks with a CHECK, and its
/// longest pause between CHECKs (torch 1).
constexpr std::chrono::milliseconds kWaitSlice{500};
/// How long the reply to CANCEL_WAIT may take.
constexpr std::chrono::milliseconds kCancelWait{5000};
/// How long a wait's lookups after its deadline (the last CHECK, the missing keys) may take.
constexpr std::chrono::milliseconds kCheckGrace{2000};
constexpr const char* kName = "TorchTcpStore";

/// torch 2's libuv server (the default since torch 2.4) closes the connection on a key over 8 KiB
/// or a value over 8 MiB, and a SET has no reply to say so: such requests are refused here first.
constexpr std::size_t kTorch2MaxKeyBytes = 8 * 1024;
constexpr std::size_t kTorch2MaxValueBytes = 8 * 1024 * 1024;

void check_key_size(TorchStoreProtocol protocol, const char* op, const std::string& key) {
  GC_CHECK(protocol != TorchStoreProtocol::kTorch2 || key.size() + 1 <= kTorch2MaxKeyBytes, kName,
           " ", op, ": a key of ", key.size(), " bytes; torch 2's server takes at most ",
           kTorch2MaxKeyBytes - 1);
}

void check_value_size(TorchStoreProtocol protocol, const char* op, const Bytes& value) {
  GC_CHECK(protocol != TorchStoreProtocol::kTorch2 || value.size() <= kTorch2MaxValueBytes, kName,
           " ", op, ": a value of ", value.size(), " bytes; torch 2's server takes at most ",
           kTorch2MaxValueBytes);
}

void check_keys(TorchStoreProtocol protocol, const char* op, const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    store_internal::check_key(kName, op, key);
    check_key_size(protocol, op, key);
  }
}

/// The command byte of `op` in `protocol` (torch 1.x/2.0 numbering: SET 0, COMPARE_SET 1, GET 2,
/// ADD 3, CHECK 4, WAIT 5, GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8; torch >= 2.2: VALIDATE 0, then
/// SET 1 ... GETNUMKEYS 7, DELETE_KEY 8, APPEND 9, MULTI_GET 10, MULTI_SET 11, CANCEL_WAIT 12,
/// PING 13).
std::uint8_t op_code(TorchStoreProtocol protocol, Op op) {
  if (protocol == TorchStoreProtocol::kTorch1) {
    switch (op) {
      case Op::kSet:
        return 0;
      case Op::kCompareSet:
        return 1;
      case Op::kGet:
        return 2;
      case Op::kAdd:
        return 3;
      case Op::kCheck:
        return 4;
      case Op::kWait:
        return 5;
      case Op::kNumKeys:
        return 6;
      case Op::kDelete:
        return 8;
      default:
        break;
    }
    GC_THROW(std::logic_error, "torch store: torch 1's protocol has no request ",
             static_cast<int>(op));
  }
  switch (op) {
    case Op::kValidate:
      return 0;
    case Op::kSet:
      return 1;
    case Op::kCompareSet:
      return 2;
    case Op::kGet:
      return 3;
    case Op::kAdd:
      return 4;
    case Op::kCheck:
      return 5;
    case Op::kWait:
      return 6;
    case Op::kNumKeys:
      return 7;
    case Op::kDelete:
      return 8;
    case Op::kCancelWait:
      return 12;
    case Op::kPing:
      return 13;
  }
  GC_THROW(std::logic_error, "torch store: unknown request ", static_cast<int>(op));
}

/// The bytes of one request.
class Request {
 public:
  Request(TorchStoreProtocol protocol, Op op) { data_.push_back(char(op_code(protocol, op))); }
  Request& u32(std::uint32_t v) { return little_endian(v, 4); }
  Request& i64(std::int64_t v) { return little_endian(static_cast<std::uint64_t>(v), 8); }
  Request& u64(std::uint64_t v) { return little_endian(v, 8); }
  Request& bytes(const std::string& b) {
    u64(b.size());
    data_ += b;
    return *this;
  }
  /// A key as torch's client sends it: with a leading "/".
  Request& key(const std::string& k) { return bytes("/" + k); }
  Request& keys(const std::vector<std::string>& ks) {
    u64(ks.size());
    for (const auto& k : ks) key(k);
    return *this;
  }
  Request& then(const Request& next) {
    data_ += next.data_;
    return *this;
  }
  const std::string& data() const { return data_; }

 private:
  Request& little_endian(std::uint64_t v, int width) {
    for (int i = 0; i < width; ++i) data_.push_back(char((v >> (8 * i)) & 0xff));
    return *this;
  }
  std::string data_;
};

std::uint64_t decode_le(const char* p, int width) {
  std::uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

/// The connections and the request/reply exchange. Every request but WAIT goes over one
/// connection, in the order of the calls, under a mutex, as torch's own client does: SET has no
/// reply, so a SET and the CHECK after it on two connections could reach the server the other way
/// round. Each WAIT (torch 2) holds a connection of its own from a pool, so that a long wait never
/// delays other requests. A connection whose exchange failed is closed, never reused: with
/// untagged replies it may be out of step.
class TorchTcpStore::Impl {
 public:
  explicit Impl(const TorchTcpStoreOptions& options)
      : host_(options.host),
        port_(options.port),
        endpoint_(store_internal::format_endpoint(options.host, options.port)),
        protocol_(options.protocol) {}

  /// Waits for the server (it may start after this process), resolves kAuto by probing, then
  /// opens the request connection.
  void start(std::chrono::milliseconds connect_timeout) {
    const TimePoint deadline = store_internal::deadline_after(connect_timeout);
    connect_socket(deadline);  // up: the probes need not wait for it
    if (protocol_ == TorchStoreProtocol::kAuto) protocol_ = probe(deadline);
    request_fd_ = open(deadline);
  }

  TorchStoreProtocol protocol() const { return protocol_; }
  const std::string& endpoint() const { return endpoint_; }

  /// One connection for one exchange: the request connection (locked) or a wait connection. Its
  /// socket is closed on destruction unless done() said the exchange completed in step.
  class Lease {
   public:
    /// The request connection, reopened first if an earlier exchange closed it.
    static Lease request(Impl& impl, TimePoint deadline) { return Lease(impl, deadline, false); }
    /// A wait connection from the pool (or a new one).
    static Lease wait(Impl& impl, TimePoint deadline) { return Lease(impl, deadline, true); }
    Lease(Lease&&) = delete;  // made in place (C++17 elision); a copy would unlock twice
    int fd() const { return fd_.get(); }
    /// The exchange completed in step: the connection may serve the next request.
    void done() {
      if (for_wait_) {
        impl_.release_wait_connection(std::move(fd_));
      } else {
        impl_.request_fd_ = std::move(fd_);
      }
    }

   private:
    Lease(Impl& impl, TimePoint deadline, bool for_wait) : impl_(impl), for_wait_(for_wait) {
      if (for_wait) {
        fd_ = impl.acquire_wait_connection(deadline);
        return;
      }
      lock_ = std::unique_lock<std::mutex>(impl.request_mutex_);
      if (!impl.request_fd_.valid()) impl.request_fd_ = impl.open(deadline);
      fd_ = std::move(impl.request_fd_);
    }
    Impl& impl_;
    bool for_wait_;
    std::unique_lock<std::mutex> lock_;  // the request connection's, held for the exchange
    UniqueFd fd_;
  };

  void send(const Lease& lease, const Request& request, TimePoint deadline,
            const std::string& what) {
    int err = 0;
    const IoStatus status = store_internal::send_all(lease.fd(), request.data().data(),
                                                     request.data().size(), deadline, &err);
    if (status != IoStatus::kOk) fail(what, status, err);
  }

  std::uint64_t recv_int(const Lease& lease, int width, TimePoint deadline,
                         const std::string& what) {
    char buffer[8];
    recv_raw(lease, buffer, width, deadline, what);
    return decode_le(buffer, width);
  }

  std::string recv_bytes(const Lease& lease, TimePoint deadline, const std::string& what) {
    const std::uint64_t size = recv_int(lease, 8, deadline, what);
    if (size > kMaxReplyBytes) {
      GC_THROW(DistributedError, "torch store at ", endpoint_, ": ", what, ": a reply of ", size,
               " bytes (more than ", kMaxReplyBytes, "): the server speaks another protocol?");
    }
    std::string out(size, '\0');
    if (size > 0) recv_raw(lease, out.data(), size, deadline, what);
    return out;
  }

  void recv_raw(const Lease& lease, char* data, std::size_t size, TimePoint deadline,
                const std::string& what) {
    int err = 0;
    const IoStatus status = store_internal::recv_exact(lease.fd(), data, size, deadline, &err);
    if (status != IoStatus::kOk) fail(what, status, err);
  }

  /// CHECK of `keys` on the request connection, bounded by `deadline`.
  bool check(const std::vector<std::string>& keys, TimePoint deadline, const std::string& what) {
    Lease lease = Lease::request(*this, deadline);
    send(lease, Request(protocol_, Op::kCheck).keys(keys), deadline, what);
    const auto reply = recv_int(lease, 1, deadline, what);
    if (reply > 1) {
      GC_THROW(DistributedError, "torch store at ", endpoint_, ": ", what,
               ": unexpected reply byte ", reply);
    }
    lease.done();
    return reply == kReady;
  }

  /// One WAIT for `keys` until `slice_end` on a wait connection taken within `deadline`: true
  /// when the server says they all exist, false when the slice ends first. The wait is then
  /// cancelled with CANCEL_WAIT, whose reply ([late STOP_WAITING] WAIT_CANCELED) keeps the
  /// connection in step; a connection that cannot be put back in step is closed. torch 2 only.
  bool wait_slice(const std::vector<std::string>& keys, TimePoint slice_end, TimePoint deadline,
                  const std::string& what) {
    Lease lease = Lease::wait(*this, deadline);
    const Request request = Request(protocol_, Op::kWait).keys(keys);
    int err = 0;
    IoStatus status = store_internal::send_all(lease.fd(), request.data().data(),
                                               request.data().size(), deadline, &err);
    if (status == IoStatus::kTimeout) return false;
    if (status != IoStatus::kOk) fail(what, status, err);
    char reply = 0;
    status = store_internal::recv_exact(lease.fd(), &reply, 1, slice_end, &err);
    if (status == IoStatus::kOk) {
      if (static_cast<std::uint8_t>(reply) != kStopWaiting) {
        GC_THROW(DistributedError, "torch store at ", endpoint_, ": ", what,
                 ": unexpected reply byte ", static_cast<int>(static_cast<unsigned char>(reply)));
      }
      lease.done();
      return true;
    }
    if (status != IoStatus::kTimeout) fail(what, status, err);
    const TimePoint cancel_deadline = std::max(deadline, Clock::now()) + kCancelWait;
    try {
      send(lease, Request(protocol_, Op::kCancelWait), cancel_deadline, what + " (cancel)");
      auto byte = recv_int(lease, 1, cancel_deadline, what + " (cancel)");
      if (byte == kStopWaiting) byte = recv_int(lease, 1, cancel_deadline, what + " (cancel)");
      if (byte == kWaitCanceled) lease.done();
    } catch (const std::exception& e) {
      GC_LOG(Debug, "torch store at ", endpoint_, ": cancelling ", what, ": ", e.what());
    }
    return false;
  }

  [[noreturn]] void fail(const std::string& what, IoStatus status, int err) {
    const std::string text = store_internal::io_status_text(status, err);
    if (status == IoStatus::kTimeout) {
      GC_THROW(TimeoutError, "torch store at ", endpoint_, ": ", what, ": ", text);
    }
    GC_THROW(DistributedError, "torch store at ", endpoint_, ": ", what, ": ", text,
             status == IoStatus::kClosed
                 ? " (torch's server closes the connection on a request it refuses)"
                 : "");
  }

 private:
  UniqueFd acquire_wait_connection(TimePoint deadline) {
    {
      std::lock_guard<std::mutex> lock(pool_mutex_);
      if (!wait_pool_.empty()) {
        UniqueFd fd = std::move(wait_pool_.back());
        wait_pool_.pop_back();
        return fd;
      }
    }
    return open(deadline);
  }

  void release_wait_connection(UniqueFd fd) {
    if (!fd.valid()) return;
    std::lock_guard<std::mutex> lock(pool_mutex_);
    wait_pool_.push_back(std::move(fd));
  }

  /// A connected socket, then the protocol's handshake (torch 2: VALIDATE as one write, as its
  /// server requires).
  UniqueFd open(TimePoint deadline) {
    UniqueFd fd = connect_socket(deadline);
    if (protocol_ == TorchStoreProtocol::kTorch2) {
      int err = 0;
      const Request validate = Request(protocol_, Op::kValidate).u32(kValidateMagic);
      const IoStatus status = store_internal::send_all(fd.get(), validate.data().data(),
                                                       validate.data().size(), deadline, &err);
      if (status != IoStatus::kOk) fail("handshake (VALIDATE)", status, err);
    }
    return fd;
  }

  /// Connects, retrying with backoff while the server is not up yet, until `deadline`.
  UniqueFd connect_socket(TimePoint deadline) {
    auto delay = kFirstRetryDelay;
    std::string error;
    for (;;) {
      UniqueFd fd = store_internal::try_connect_tcp(host_, port_, deadline, &error);
      if (fd.valid()) {
        store_internal::set_nodelay(fd.get());
        return fd;
      }
      if (Clock::now() + delay >= deadline) {
        GC_THROW(TimeoutError, "torch store at ", endpoint_,
                 ": could not connect before the deadline (is the torch TCPStore server, e.g. "
                 "torchrun's agent, up at this address?): ",
                 error);
      }
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, kMaxRetryDelay);
    }
  }

  /// The generation the server speaks, from probes on fresh connections (see connect()).
  TorchStoreProtocol probe(TimePoint deadline) {
    std::string notes;
    // torch >= 2.5: VALIDATE, then PING with a nonce the server echoes.
    const std::uint32_t nonce = 0x67630000u | static_cast<std::uint32_t>(port_ & 0xffff);
    const Request ping = Request(TorchStoreProtocol::kTorch2, Op::kValidate)
                             .u32(kValidateMagic)
                             .then(Request(TorchStoreProtocol::kTorch2, Op::kPing).u32(nonce));
    if (auto reply = probe_reply(ping, 4, deadline, &notes)) {
      if (decode_le(reply->data(), 4) == nonce) return TorchStoreProtocol::kTorch2;
      notes += "; PING echoed another nonce";
    }
    // torch 1.x / 2.0: GETNUMKEYS, no handshake.
    if (probe_reply(Request(TorchStoreProtocol::kTorch1, Op::kNumKeys), 8, deadline, &notes)) {
      return TorchStoreProtocol::kTorch1;
    }
    // torch 2.2 - 2.4: VALIDATE, then GETNUMKEYS (no PING yet).
    const Request num_keys = Request(TorchStoreProtocol::kTorch2, Op::kValidate)
                                 .u32(kValidateMagic)
                                 .then(Request(TorchStoreProtocol::kTorch2, Op::kNumKeys));
    if (probe_reply(num_keys, 8, deadline, &notes)) return TorchStoreProtocol::kTorch2;
    GC_THROW(DistributedError, "torch store at ", endpoint_,
             ": no torch TCPStore protocol answered (", notes,
             "); set GROUPCOORD_TORCH_STORE_PROTOCOL=torch1 or torch2 if the server is one");
  }

  /// Sends `request` on a fresh connection (made within `deadline`) and reads `size` reply bytes
  /// within kProbeWait; nullopt (with a note) when the server closes, errs or stays silent.
  std::optional<std::string> probe_reply(const Request& request, std::size_t size,
                                         TimePoint deadline, std::string* notes) {
    UniqueFd fd = connect_socket(deadline);
    const TimePoint reply_deadline = Clock::now() + kProbeWait;
    int err = 0;
    std::string reply(size, '\0');
    IoStatus status = store_internal::send_all(fd.get(), request.data().data(),
                                               request.data().size(), reply_deadline, &err);
    if (status == IoStatus::kOk) {
      status = store_internal::recv_exact(fd.get(), reply.data(), size, reply_deadline, &err);
    }
    if (status == IoStatus::kOk) return reply;
    *notes += (notes->empty() ? "" : "; ") + store_internal::io_status_text(status, err);
    return std::nullopt;
  }

  const std::string host_;
  const int port_;
  const std::string endpoint_;
  TorchStoreProtocol protocol_;
  std::mutex request_mutex_;
  UniqueFd request_fd_;  // guarded by request_mutex_; invalid after a failed exchange
  std::mutex pool_mutex_;
  std::vector<UniqueFd> wait_pool_;
};

std::string to_string(TorchStoreProtocol protocol) {
  switch (protocol) {
    case TorchStoreProtocol::kAuto:
      return "auto";
    case TorchStoreProtocol::kTorch1:
      return "torch1";
    case TorchStoreProtocol::kTorch2:
      return "torch2";
  }
  return "unknown";
}

TorchStoreProtocol parse_torch_store_protocol(const std::string& text, const std::string& what) {
  if (text.empty() || text == "auto") return TorchStoreProtocol::kAuto;
  if (text == "torch1" || text == "1") return TorchStoreProtocol::kTorch1;
  if (text == "torch2" || text == "2") return TorchStoreProtocol::kTorch2;
  GC_THROW(std::invalid_argument, what, ": '", text,
           "' is not a torch store protocol (auto, torch1 for torch 1.x/2.0, torch2 for torch "
           ">= 2.2)");
}

std::shared_ptr<TorchTcpStore> TorchTcpStore::connect(const TorchTcpStoreOptions& options) {
  GC_CHECK(!options.host.empty(), "TorchTcpStore: empty host");
  GC_CHECK(options.port > 0 && options.port < 65536, "TorchTcpStore: port ", options.port,
           " is not in 1..65535");
  GC_CHECK(options.timeout.count() > 0, "TorchTcpStore: timeout must be positive, got ",
           options.timeout.count(), " ms");
  auto impl = std::make_unique<Impl>(options);
  impl->start(options.connect_timeout);
  GC_LOG(Debug, "torch store at ", impl->endpoint(), ": protocol ", to_string(impl->protocol()));
  return std::shared_ptr<TorchTcpStore>(new TorchTcpStore(std::move(impl), options.timeout));
}

TorchTcpStore::TorchTcpStore(std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout)
    : Store(timeout), impl_(std::move(impl)) {}

TorchTcpStore::~TorchTcpStore() = default;

TorchStoreProtocol TorchTcpStore::protocol() const { return impl_->protocol(); }
const std::string& TorchTcpStore::endpoint() const { return impl_->endpoint(); }

void TorchTcpStore::set(const std::string& key, const Bytes& value) {
  check_keys(protocol(), "set", {key});
  check_value_size(protocol(), "set", value);
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  impl_->send(lease, Request(protocol(), Op::kSet).key(key).bytes(value), deadline, "set " + key);
  lease.done();  // SET has no reply; later requests on this connection stay in order behind it
}

Bytes TorchTcpStore::get(const std::string& key) {
  check_keys(protocol(), "get", {key});
  // torch's server answers GET at once (or drops the connection) for a missing key: wait first,
  // as torch's client does.
  wait({key}, timeout());
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  const std::string what = "get " + key;
  impl_->send(lease, Request(protocol(), Op::kGet).key(key), deadline, what);
  Bytes value = impl_->recv_bytes(lease, deadline, what);
  lease.done();
  return value;
}

std::int64_t TorchTcpStore::add(const std::string& key, std::int64_t delta) {
  check_keys(protocol(), "add", {key});
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  const std::string what = "add " + key;
  impl_->send(lease, Request(protocol(), Op::kAdd).key(key).i64(delta), deadline, what);
  const auto value = static_cast<std::int64_t>(impl_->recv_int(lease, 8, deadline, what));
  lease.done();
  return value;
}

Bytes TorchTcpStore::compare_set(const std::string& key, const Bytes& expected,
                                 const Bytes& desired) {
  check_keys(protocol(), "compare_set", {key});
  check_value_size(protocol(), "compare_set", expected);
  check_value_size(protocol(), "compare_set", desired);
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  const std::string what = "compare_set " + key;
  impl_->send(lease, Request(protocol(), Op::kCompareSet).key(key).bytes(expected).bytes(desired),
              deadline, what);
  Bytes value = impl_->recv_bytes(lease, deadline, what);
  lease.done();
  return value;
}

bool TorchTcpStore::check(const std::vector<std::string>& keys) {
  check_keys(protocol(), "check", keys);
  return impl_->check(keys, store_internal::deadline_after(timeout()),
                      "check " + store_internal::format_keys(keys));
}

void TorchTcpStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  check_keys(protocol(), "wait", keys);
  store_internal::check_timeout(kName, "wait", timeout);
  if (keys.empty()) return;
  const TimePoint deadline = store_internal::deadline_after(timeout);
  const std::string what = "wait " + store_internal::format_keys(keys);
  // Lookups after the deadline (the last CHECK, the missing keys) get a short grace, never the
  // store's whole timeout.
  const auto grace_deadline = [&] { return std::max(deadline, Clock::now()) + kCheckGrace; };
  if (protocol() == TorchStoreProtocol::kTorch2) {
    // WAITs in slices, each followed by a CHECK: torch's poll-based server does not wake a WAIT
    // for a key that COMPARE_SET created.
    while (Clock::now() < deadline) {
      const TimePoint slice_end = std::min(deadline, Clock::now() + kWaitSlice);
      if (impl_->wait_slice(keys, slice_end, deadline, what)) return;
      if (impl_->check(keys, grace_deadline(), what)) return;
    }
  } else {
    // torch 1 cannot cancel a WAIT, and its late reply would shift every later one on that
    // connection: poll with CHECK instead, backing off from 10 to 500 ms (its server does not
    // wake a WAIT for a COMPARE_SET either).
    auto pause = kFirstRetryDelay;
    for (;;) {
      if (impl_->check(keys, grace_deadline(), what)) return;
      const auto now = Clock::now();
      if (now >= deadline) break;
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, kWaitSlice);
    }
  }
  if (impl_->check(keys, grace_deadline(), what)) return;  // set just now
  // Name only the keys still missing (one CHECK each), as every Store does.
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    try {
      if (!impl_->check({key}, grace_deadline(), what)) missing.push_back(key);
    } catch (const std::exception&) {
      missing = keys;  // the server is gone: it cannot tell
      break;
    }
  }
  GC_THROW(TimeoutError, "torch store at ", endpoint(), ": ", what, " timed out after ",
           timeout.count(), " ms; missing keys ", store_internal::format_keys(missing));
}

bool TorchTcpStore::delete_key(const std::string& key) {
  check_keys(protocol(), "delete_key", {key});
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  const std::string what = "delete_key " + key;
  impl_->send(lease, Request(protocol(), Op::kDelete).key(key), deadline, what);
  const auto reply = impl_->recv_int(lease, 8, deadline, what);
  lease.done();
  return reply != 0;
}

std::int64_t TorchTcpStore::num_keys() {
  const TimePoint deadline = store_internal::deadline_after(timeout());
  auto lease = Impl::Lease::request(*impl_, deadline);
  impl_->send(lease, Request(protocol(), Op::kNumKeys), deadline, "num_keys");
  const auto value = static_cast<std::int64_t>(impl_->recv_int(lease, 8, deadline, "num_keys"));
  lease.done();
  return value;
}

}  // namespace groupcoord
