// TorchTcpStore without torch: the exact bytes of torch 2's protocol against a scripted server
// (the conversation written out here by hand from the protocol's description, docs/torch_store.md),
// the automatic probe, a wait that times out and is cancelled, bad options. The same client runs
// the whole StoreSemantics suite against a real torch server in ctest's torch_store_semantics
// (tests/store/with_torch_store.py), where the TorchStoreInterop tests below run too.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
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

/// A server that accepts connections one after another and plays `script` per connection
/// (conversations[i] for the i-th connection). Records any mismatch.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::vector<std::vector<Step>> conversations)
      : conversations_(std::move(conversations)) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
    socklen_t size = sizeof address;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size);
    port_ = ntohs(address.sin_port);
    listen(listener_, 8);
    thread_ = std::thread([this] { serve(); });
  }
  ~ScriptedServer() {
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    thread_.join();
  }
  int port() const { return port_; }
  /// "" when every connection followed its script.
  std::string errors() const { return errors_; }

 private:
  void serve() {
    for (auto& conversation : conversations_) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
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
          errors_ += "step " + std::to_string(i) + ": got " + hex(got) + ", expected " +
                     hex(step.expect) + "\n";
          break;
        }
        std::this_thread::sleep_for(step.delay_reply);
        if (!step.reply.empty()) send(fd, step.reply.data(), step.reply.size(), MSG_NOSIGNAL);
      }
      close(fd);  // as torch's server does with a request it refuses; ends the conversation
    }
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
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
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
  const std::string k = str("/k1");
  ScriptedServer server({{
      {kValidate, ""},
      {u8(1) + k + str("hello"), ""},                      // SET: no reply
      {u8(6) + le64(1) + k, u8(0)},                        // get = WAIT ...
      {u8(3) + k, str("hello")},                           // ... then GET
      {u8(4) + str("/n") + le64(5), le64(5)},              // ADD 5
      {u8(2) + str("/c") + str("") + str("v"), str("v")},  // COMPARE_SET
      {u8(5) + le64(2) + k + str("/z"), u8(1)},            // CHECK: not ready
      {u8(8) + k, le64(1)},                                // DELETE_KEY
      {u8(7), le64(42)},                                   // GETNUMKEYS
  }});
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
  // The WAIT gets no reply; after the timeout the client sends CANCEL_WAIT, reads the late
  // STOP_WAITING and then WAIT_CANCELED, asks which key is missing, and reuses the connection.
  const std::string w = str("/w");
  ScriptedServer server({{
      {kValidate, ""},
      {u8(6) + le64(1) + w, ""},
      {u8(12), u8(0) + u8(1)},       // CANCEL_WAIT: a STOP_WAITING raced it, then canceled
      {u8(5) + le64(1) + w, u8(1)},  // CHECK /w after the slice: still missing
      {u8(5) + le64(1) + w, u8(1)},  // CHECK /w for the message: still missing
      {u8(7), le64(7)},              // GETNUMKEYS on the same connection: in step
  }});
  auto store = TorchTcpStore::connect(options_for(server.port(), TorchStoreProtocol::kTorch2));
  try {
    store->wait({"w"}, 300ms);
    FAIL() << "wait returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("missing keys"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store->num_keys(), 7);
  store.reset();
  EXPECT_EQ(server.errors(), "");
}

TEST(TorchTcpStore, AutoFindsTorch1WhenThePingIsRefused) {
  // Probe 1 (VALIDATE + PING): a torch 1 server reads it as a SET of a huge key and closes.
  // Probe 2: torch 1's GETNUMKEYS (6) answers. Then the client's own connection (no handshake).
  ScriptedServer server({
      {{kValidate + u8(13) + u32(0), "", 0ms, /*any_bytes=*/true}},  // its nonce is the client's
      {{u8(6), le64(3)}},
      {{u8(0) + str("/a") + str("b"), ""}, {u8(4) + le64(1) + str("/a"), u8(0)}},
  });
  TorchTcpStoreOptions options = options_for(server.port(), TorchStoreProtocol::kAuto);
  auto store = TorchTcpStore::connect(options);
  EXPECT_EQ(store->protocol(), TorchStoreProtocol::kTorch1);
  store->set("a", "b");
  EXPECT_TRUE(store->check({"a"}));
  store.reset();
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
