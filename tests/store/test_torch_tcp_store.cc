// TorchTcpStore without torch: the exact bytes of torch 2's protocol against a scripted server
// (the conversation written out here by hand from the protocol's description, docs/torch_store.md),
// the automatic probe, a wait that times out and is cancelled, bad options. The same client runs
// the whole StoreSemantics suite against a real torch server in ctest's torch_store_semantics
// (tests/store/with_torch_store.py), where the TorchStoreInterop tests below run too.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/torch_tcp_store.h"
#include "store_test_util.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::le64;

std::string u8(int v) { return std::string(1, static_cast<char>(v)); }
std::string u32(std::uint32_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return out;
}
/// torch's string field: u64 little-endian length, then the bytes.
std::string str(const std::string& s) { return le64(static_cast<std::int64_t>(s.size())) + s; }
const std::string kValidate = u8(0) + u32(0x3C85F7CE);

/// One step of a scripted conversation: the bytes the client must send, then the reply.
struct Step {
  std::string expect;
  std::string reply;
  std::chrono::milliseconds delay_reply{0};
  /// Compare only how many bytes came, not which (a nonce the client picks).
  bool any_bytes = false;
};

/// A server whose i-th accepted connection plays conversations[i], each on a thread of its own
/// (a client holds several connections at once). With `port`, it binds that port after `delay`
/// (a server that starts after its clients). Records any mismatch.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::vector<Step>> conversations, int port = 0,
                          std::chrono::milliseconds delay = 0ms)
      : conversations_(std::move(conversations)), port_(port) {
    if (delay.count() == 0) {
      listen_on(port);
      thread_ = std::thread([this] { serve(); });
    } else {
      thread_ = std::thread([this, port, delay] {
        std::this_thread::sleep_for(delay);
        listen_on(port);
        serve();
      });
    }
  }
  ~ScriptedServer() {
    stopping_ = true;
    if (listener_ >= 0) shutdown(listener_, SHUT_RDWR);
    thread_.join();
    for (auto& t : conversation_threads_) t.join();
    if (listener_ >= 0) close(listener_);
  }
  int port() const { return port_; }
  /// "" when every connection followed its script.
  std::string errors() {
    std::lock_guard<std::mutex> lock(mutex_);
    return errors_;
  }

 private:
  void listen_on(int port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t size = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    listen(listener_, 8);
  }
  void serve() {
    for (std::size_t i = 0; i < conversations_.size() && !stopping_; ++i) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      conversation_threads_.emplace_back([this, fd, i] { play(fd, i); });
    }
  }
  void play(int fd, std::size_t index) {
    const auto& conversation = conversations_[index];
    for (std::size_t i = 0; i < conversation.size(); ++i) {
      const Step& step = conversation[i];
      std::string got(step.expect.size(), '\0');
      std::size_t have = 0;
      while (have < got.size()) {
        const ssize_t n = recv(fd, got.data() + have, got.size() - have, 0);
        if (n <= 0) break;
        have += static_cast<std::size_t>(n);
      }
      got.resize(have);
      if (step.any_bytes ? got.size() != step.expect.size() : got != step.expect) {
        std::lock_guard<std::mutex> lock(mutex_);
        errors_ += "connection " + std::to_string(index) + " step " + std::to_string(i) + ": got " +
                   hex(got) + ", expected " + hex(step.expect) + "\n";
        break;
      }
      std::this_thread::sleep_for(step.delay_reply);
      if (!step.reply.empty()) send(fd, step.reply.data(), step.reply.size(), MSG_NOSIGNAL);
    }
    close(fd);  // as torch's server does with a request it refuses; ends the conversation
  }
  static std::string hex(const std::string& bytes) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
      out += digits[c >> 4];
      out += digits[c & 15];
      out += ' ';
    }
    return out;
  }

  std::vector<std::vector<Step>> conversations_;
  std::atomic<int> port_{0};
  int listener_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::vector<std::thread> conversation_threads_;
  std::mutex mutex_;
  std::string errors_;
};

TorchTcpStoreOptions options_for(int port, TorchStoreProtocol protocol) {
  TorchTcpStoreOptions options;
  options.port = port;
  options.protocol = protocol;
  options.timeout = 5s;
  options.connect_timeout = 5s;
  return options;
}

TEST(TorchTcpStore, SpeaksTorch2BytesExactly) {
  // Connection 0: connect() sees the server is up. 1: the request connection, every request in
  // call order. 2: a connection of its own for get()'s WAIT.
  const std::string k = str("/k1");
  ScriptedServer server({
      {},
      {
          {kValidate, ""},
          {u8(1) + k + str("hello"), ""},                      // SET: no reply
          {u8(3) + k, str("hello")},                           // get: GET after the WAIT
          {u8(4) + str("/n") + le64(5), le64(5)},              // ADD 5
          {u8(2) + str("/c") + str("") + str("v"), str("v")},  // COMPARE_SET
          {u8(5) + le64(2) + k + str("/z"), u8(1)},            // CHECK: not ready
          {u8(8) + k, le64(1)},                                // DELETE_KEY
          {u8(7), le64(42)},                                   // GETNUMKEYS
      },
      {{kValidate, ""}, {u8(6) + le64(1) + k, u8(0)}},  // get: WAIT, then STOP_WAITING
  });
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kTorch2));
  EXPECT_EQ(store->protocol(), TorchStoreProtocol::kTorch2);
  store->set("k1", "hello");
  EXPECT_EQ(store->get("k1"), "hello");
  EXPECT_EQ(store->add("n", 5), 5);
  EXPECT_EQ(store->compare_set("c", "", "v"), "v");
  EXPECT_FALSE(store->check({"k1", "z"}));
  EXPECT_TRUE(store->delete_key("k1"));
  EXPECT_EQ(store->num_keys(), 42);
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, Torch2WaitTimeoutIsCancelledAndTheConnectionStaysInStep) {
  // The WAIT gets no reply; when the slice ends the client sends CANCEL_WAIT, reads the late
  // STOP_WAITING and then WAIT_CANCELED, looks with CHECK (after the slice, at the deadline, and
  // per key for the message) and keeps both connections: the next WAIT goes out on the same one.
  const std::string w = str("/w");
  ScriptedServer server({
      {},
      {
          {kValidate, ""},
          {u8(5) + le64(1) + w, u8(1)},  // CHECK /w after the slice: missing
          {u8(5) + le64(1) + w, u8(1)},  // CHECK /w at the deadline: missing
          {u8(5) + le64(1) + w, u8(1)},  // CHECK /w for the message: missing
          {u8(7), le64(7)},              // GETNUMKEYS: in step
      },
      {
          {kValidate, ""},
          {u8(6) + le64(1) + w, ""},
          {u8(12), u8(0) + u8(1)},       // CANCEL_WAIT: a STOP_WAITING raced it, then canceled
          {u8(6) + le64(1) + w, u8(0)},  // the next wait, on the same connection
      },
  });
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kTorch2));
  try {
    store->wait({"w"}, 300ms);
    FAIL() << "wait returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("missing keys"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->num_keys(), 7);
  store->wait({"w"}, 5s);
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, Torch1WaitPollsWithCheckOnTheRequestConnection) {
  // torch 1 cannot cancel a WAIT: the client never sends one, it polls with CHECK, and SET and
  // CHECK stay in call order on one connection.
  const std::string w = str("/w");
  ScriptedServer server({
      {},
      {
          {u8(0) + w + str("x"), ""},    // SET (no handshake in torch 1)
          {u8(4) + le64(1) + w, u8(1)},  // CHECK: not yet
          {u8(4) + le64(1) + w, u8(1)},  // not yet
          {u8(4) + le64(1) + w, u8(0)},  // ready
          {u8(6), le64(1)},              // GETNUMKEYS
      },
  });
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kTorch1));
  store->set("w", "x");
  store->wait({"w"}, 5s);
  EXPECT_EQ(store->num_keys(), 1);
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, AutoFindsTorch1WhenThePingIsRefused) {
  // 0: the server is up. 1 (VALIDATE + PING): a torch 1 server reads a SET of an absurd key and
  // closes. 2: torch 1's GETNUMKEYS (6) answers. 3: the client's request connection.
  ScriptedServer server({
      {},
      {{kValidate + u8(13) + u32(0), "", 0ms, /*any_bytes=*/true}},  // the nonce is the client's
      {{u8(6), le64(3)}},
      {{u8(0) + str("/a") + str("b"), ""}, {u8(4) + le64(1) + str("/a"), u8(0)}},
  });
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kAuto));
  EXPECT_EQ(store->protocol(), TorchStoreProtocol::kTorch1);
  store->set("a", "b");
  EXPECT_TRUE(store->check({"a"}));
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, AutoWaitsForAServerThatStartsLate) {
  // The server listens 1.5 s after the client starts (torch.distributed's rank 0 may create the
  // store after the others): the probes wait for it within connect_timeout, then find torch 2.5.
  const int port = store_test::free_port();
  const std::string nonce = u32(0x67630000u | static_cast<std::uint32_t>(port & 0xffff));
  ScriptedServer server(
      {
          {},
          {{kValidate + u8(13) + nonce, nonce}},  // PING echoed: torch >= 2.5
          {{kValidate, ""}, {u8(7), le64(0)}},    // the request connection
      },
      port, 1500ms);
  TorchTcpStoreOptions options = options_for(port, TorchStoreProtocol::kAuto);
  options.connect_timeout = 20s;
  auto store = TorchTcpStore::connect(options);
  EXPECT_EQ(store->protocol(), TorchStoreProtocol::kTorch2);
  EXPECT_EQ(store->num_keys(), 0);
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, Torch2RefusesWhatItsServerWouldDropSilently) {
  // torch 2's libuv server closes the connection on a key over 8 KiB or a value over 8 MiB, and a
  // SET has no reply to tell: the client refuses them, sends nothing, and stays usable.
  ScriptedServer server({{}, {{kValidate, ""}, {u8(7), le64(0)}}});
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kTorch2));
  try {
    store->set("big", std::string((8 << 20) + 1, 'x'));
    FAIL() << "an 8 MiB + 1 value was sent";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("8388609 bytes"), std::string::npos) << e.what();
  }
  EXPECT_THROW(store->check({std::string(8192, 'k')}), std::invalid_argument);
  EXPECT_THROW(store->compare_set("c", "", std::string((8 << 20) + 1, 'x')), std::invalid_argument);
  EXPECT_EQ(store->num_keys(), 0);  // nothing went out before it
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, ConnectToNothingTimesOutNamingTheAddress) {
  const int port = store_test::free_port();
  TorchTcpStoreOptions options = options_for(port, TorchStoreProtocol::kTorch2);
  options.connect_timeout = 300ms;
  const auto start = store_test::Clock::now();
  try {
    TorchTcpStore::connect(options);
    FAIL() << "connect returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_LT(store_test::elapsed_ms(start), 5000);
}

TEST(TorchTcpStore, BadOptionsAndProtocolNamesAreInvalidArguments) {
  EXPECT_THROW(TorchTcpStore::connect(options_for(0, TorchStoreProtocol::kTorch2)),
               std::invalid_argument);
  EXPECT_EQ(parse_torch_store_protocol("", "x"), TorchStoreProtocol::kAuto);
  EXPECT_EQ(parse_torch_store_protocol("torch1", "x"), TorchStoreProtocol::kTorch1);
  EXPECT_EQ(parse_torch_store_protocol("2", "x"), TorchStoreProtocol::kTorch2);
  try {
    parse_torch_store_protocol("torch3", "GROUPCOORD_TORCH_STORE_PROTOCOL");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("GROUPCOORD_TORCH_STORE_PROTOCOL: 'torch3'"),
              std::string::npos)
        << e.what();
  }
}

// ---- against a real torch server (tests/store/with_torch_store.py sets the variables) --------

/// The real server's address, or skips.
TorchTcpStoreOptions real_server_or_skip(bool* skip) {
  TorchTcpStoreOptions options;
  const char* address = std::getenv("GC_TEST_TORCH_STORE");
  *skip = address == nullptr;
  if (*skip) return options;
  const std::string text = address;
  options.host = text.substr(0, text.rfind(':'));
  options.port = std::stoi(text.substr(text.rfind(':') + 1));
  options.timeout = 10s;
  options.connect_timeout = 10s;
  return options;
}

TEST(TorchStoreInterop, ProbeFindsTheServersProtocolAndKeysAreShared) {
  bool skip = false;
  auto options = real_server_or_skip(&skip);
  if (skip) GTEST_SKIP() << "no torch server: run through tests/store/with_torch_store.py";
  auto store = TorchTcpStore::connect(options);
  EXPECT_EQ(to_string(store->protocol()), std::getenv("GC_TEST_TORCH_STORE_PROTOCOL"));
  EXPECT_EQ(store->get("interop/from_torch"), "written by torch");  // set by torch's client
  store->set("interop/from_groupcoord", "written by groupcoord");   // read back by torch's
}

TEST(TorchStoreInterop, TheWrongProtocolFailsWithAnErrorNotAHang) {
  bool skip = false;
  auto options = real_server_or_skip(&skip);
  if (skip) GTEST_SKIP() << "no torch server: run through tests/store/with_torch_store.py";
  const bool torch1 = std::string(std::getenv("GC_TEST_TORCH_STORE_PROTOCOL")) == "torch1";
  options.protocol = torch1 ? TorchStoreProtocol::kTorch2 : TorchStoreProtocol::kTorch1;
  options.timeout = 2s;
  const auto start = store_test::Clock::now();
  EXPECT_THROW(
      {
        auto store = TorchTcpStore::connect(options);
        store->set("wrong_protocol", "x");
        store->get("wrong_protocol");
      },
      DistributedError);
  EXPECT_LT(store_test::elapsed_ms(start), 10000);
}

}  // namespace
}  // namespace groupcoord
