// TcpStore and TcpStoreServer beyond the shared semantics: connection handling, limits, many
// clients, hostile input on raw sockets, dead servers. Everything runs on 127.0.0.1.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/tcp_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::Clock;
using store_test::elapsed_ms;
using store_test::field;
using store_test::frame;
using store_test::hello;
using store_test::le32;
using store_test::le64;
using store_test::RawClient;
using store_test::RawOutcome;
using store_test::RawReply;

constexpr std::uint8_t kOk = 0;
constexpr std::uint8_t kTimeoutStatus = 1;
constexpr std::uint8_t kError = 2;
constexpr std::int64_t kFastMs = 5000;

// Command bytes as the wire format documents them.
constexpr char kSet = 1;
constexpr char kGet = 2;
constexpr char kWait = 6;
constexpr char kNumKeys = 8;

std::unique_ptr<TcpStoreServer> start_server(TcpStoreServerOptions options = {}) {
  return TcpStoreServer::start(options);
}

/// A client that completed the handshake.
std::unique_ptr<RawClient> handshaken_client(int port) {
  auto client = std::make_unique<RawClient>(port);
  EXPECT_TRUE(client->send(hello()));
  RawReply reply;
  EXPECT_TRUE(client->read_reply(&reply));
  EXPECT_EQ(reply.status, kOk);
  return client;
}

/// The server still works for a well-behaved client.
void expect_serving(int port, const std::string& tag) {
  TcpStore store("127.0.0.1", port, 5s, 5s);
  store.set("alive_" + tag, tag);
  EXPECT_EQ(store.get("alive_" + tag), tag);
}

/// The connection was answered with an error reply naming `words`, or just closed.
void expect_rejected(const RawOutcome& outcome, const std::string& words) {
  EXPECT_FALSE(outcome.timed_out) << "the server neither answered nor closed";
  EXPECT_TRUE(outcome.closed);
  if (outcome.replies.empty()) return;  // closed without a reply: acceptable
  const RawReply& last = outcome.replies.back();
  EXPECT_EQ(last.status, kError);
  EXPECT_NE(last.message().find(words), std::string::npos) << last.message();
}

TEST(TcpStoreServer, PicksAnEphemeralPortAndStopsIdempotently) {
  auto server = start_server();
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->host(), "127.0.0.1");
  EXPECT_TRUE(server->running());
  server->stop();
  EXPECT_FALSE(server->running());
  server->stop();
}

TEST(TcpStoreServer, RejectsBadOptions) {
  TcpStoreServerOptions options;
  options.port = -1;
  EXPECT_THROW(TcpStoreServer::start(options), std::invalid_argument);
  options.port = 70000;
  EXPECT_THROW(TcpStoreServer::start(options), std::invalid_argument);
  options = TcpStoreServerOptions();
  options.host = "";
  EXPECT_THROW(TcpStoreServer::start(options), std::invalid_argument);
  options = TcpStoreServerOptions();
  options.max_value_bytes = std::size_t{8} << 30;
  EXPECT_THROW(TcpStoreServer::start(options), std::invalid_argument);
}

TEST(TcpStoreServer, PortInUseIsADistributedErrorNamingIt) {
  auto first = start_server();
  TcpStoreServerOptions options;
  options.port = first->port();
  try {
    TcpStoreServer::start(options);
    FAIL() << "a second server bound the same port";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(first->port())), std::string::npos);
  }
}

TEST(TcpStore, RejectsBadArguments) {
  EXPECT_THROW(TcpStore("127.0.0.1", -1), std::invalid_argument);
  EXPECT_THROW(TcpStore("127.0.0.1", 0), std::invalid_argument);
  EXPECT_THROW(TcpStore("127.0.0.1", 65536), std::invalid_argument);
  EXPECT_THROW(TcpStore("", 1234), std::invalid_argument);
}

TEST(TcpStore, CreateHostsTheServerInProcess) {
  TcpStoreOptions options;
  options.is_server = true;
  options.timeout = 5s;
  std::shared_ptr<TcpStore> store = TcpStore::create(options);
  ASSERT_NE(store->server(), nullptr);
  EXPECT_GT(store->port(), 0);
  EXPECT_EQ(store->port(), store->server()->port());
  EXPECT_EQ(store->server()->host(), "127.0.0.1");  // loopback host -> loopback bind

  TcpStoreOptions peer_options;
  peer_options.port = store->port();
  std::shared_ptr<TcpStore> peer = TcpStore::create(peer_options);
  EXPECT_EQ(peer->server(), nullptr);
  store->set("from_rank0", "hello");
  EXPECT_EQ(peer->get("from_rank0"), "hello");
}

// A store with a token serves only clients that present it: a missing or wrong token is refused
// with an error that says so (not a timeout), and the right one works.
TEST(TcpStore, ATokenIsRequiredWhenTheServerHasOne) {
  TcpStoreServerOptions options;
  options.token = "job-secret-0123";
  std::unique_ptr<TcpStoreServer> server = start_server(options);
  const int port = server->port();
  for (const std::string& token : {std::string(), std::string("job-secret-0124")}) {
    try {
      TcpStore("127.0.0.1", port, 5s, 5s, token);
      ADD_FAILURE() << "a client with token '" << token << "' was served";
    } catch (const DistributedError& e) {
      EXPECT_NE(std::string(e.what()).find("GROUPCOORD_STORE_TOKEN"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(token.empty() ? "presented none" : "another one"),
                std::string::npos)
          << e.what();
    }
  }
  TcpStore good("127.0.0.1", port, 5s, 5s, "job-secret-0123");
  good.set("k", "v");
  EXPECT_EQ(good.get("k"), "v");
  // A server without a token serves a client that has one.
  std::unique_ptr<TcpStoreServer> open = start_server();
  TcpStore("127.0.0.1", open->port(), 5s, 5s, "anything").set("k", "v");
  EXPECT_THROW(TcpStore("127.0.0.1", port, 5s, 5s, std::string(2000, 'x')), std::invalid_argument);
}

// A raw client sees the refusal on the wire: the token is checked before anything is served.
TEST(TcpStore, AWrongTokenGetsNoAnswerButTheRefusal) {
  TcpStoreServerOptions options;
  options.token = "s3cret";
  std::unique_ptr<TcpStoreServer> server = start_server(options);
  RawClient client(server->port());
  ASSERT_TRUE(client.send(hello(0x54534347, 2, "guess") + frame(std::string(1, kNumKeys))));
  RawReply reply;
  ASSERT_TRUE(client.read_reply(&reply));
  EXPECT_NE(reply.status, kOk);
  EXPECT_NE(reply.message().find("presented another one"), std::string::npos) << reply.message();
  EXPECT_FALSE(client.read_reply(&reply)) << "the request after the refused handshake was served";
}

// The server holds at most max_total_bytes: a set past it is refused (the connection stays
// usable), replacing or deleting a key makes room again.
TEST(TcpStore, TheServerHoldsAtMostItsTotalBytes) {
  TcpStoreServerOptions options;
  options.max_total_bytes = 1000;
  std::unique_ptr<TcpStoreServer> server = start_server(options);
  TcpStore store("127.0.0.1", server->port(), 5s);
  store.set("a", std::string(600, 'a'));
  try {
    store.set("b", std::string(600, 'b'));
    ADD_FAILURE() << "a set past max_total_bytes was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the store is full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(store.check({"b"}));
  store.set("a", std::string(300, 'a'));  // a smaller value for the same key
  store.set("b", std::string(600, 'b'));
  EXPECT_THROW(store.set("c", std::string(200, 'c')), std::invalid_argument);
  EXPECT_TRUE(store.delete_key("a"));
  store.set("c", std::string(200, 'c'));
  EXPECT_EQ(store.num_keys(), 2);
  EXPECT_THROW(store.add("counter-past-the-limit-" + std::string(400, 'k'), 1),
               std::invalid_argument);
}

// One peer address may hold at most max_connections_per_peer connections; the next is told why
// and closed, and a slot freed by a closed client serves a new one.
TEST(TcpStore, ConnectionsPerPeerAreLimited) {
  TcpStoreServerOptions options;
  options.max_connections_per_peer = 2;
  std::unique_ptr<TcpStoreServer> server = start_server(options);
  const int port = server->port();
  auto first = std::make_unique<TcpStore>("127.0.0.1", port, 5s);
  TcpStore second("127.0.0.1", port, 5s);
  try {
    TcpStore third("127.0.0.1", port, 5s, 5s);
    ADD_FAILURE() << "a third connection from one peer was served";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("too many connections from 127.0.0.1"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("max_connections_per_peer"), std::string::npos);
  }
  first.reset();
  // The server notices the close in its next loop round; the client retries until then.
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    try {
      TcpStore("127.0.0.1", port, 5s, 5s).set("k", "v");
      served = true;
    } catch (const DistributedError&) {
      std::this_thread::sleep_for(20ms);
    }
  }
  EXPECT_TRUE(served) << "the closed client's slot was not freed";
  second.set("still", "served");
}

TEST(TcpStore, ServerLimitsAreCheckedBeforeSending) {
  TcpStoreServerOptions options;
  options.max_key_bytes = 16;
  options.max_value_bytes = 1024;
  options.max_keys_per_request = 4;
  auto server = start_server(options);
  TcpStore store("127.0.0.1", server->port(), 5s);
  EXPECT_THROW(store.set(std::string(17, 'k'), "v"), std::invalid_argument);
  EXPECT_THROW(store.set("k", std::string(1025, 'v')), std::invalid_argument);
  EXPECT_THROW(store.check({"a", "b", "c", "d", "e"}), std::invalid_argument);
  EXPECT_THROW(store.compare_set("k", "", std::string(2000, 'v')), std::invalid_argument);
  store.set(std::string(16, 'k'), std::string(1024, 'v'));  // exactly at the limits
  EXPECT_EQ(store.get(std::string(16, 'k')).size(), 1024u);
}

TEST(TcpStore, SixtyFourConcurrentClients) {
  constexpr int kClients = 64;
  auto server = start_server();
  std::vector<std::string> keys;
  for (int i = 0; i < kClients; ++i) keys.push_back("rank" + std::to_string(i));
  testing::run_ranks_on_threads(kClients, [&](int rank) {
    TcpStore store("127.0.0.1", server->port(), 20s);
    store.set(keys[rank], std::to_string(rank * rank));
    store.wait(keys);  // everybody parked at once until the last one arrives
    const int peer = (rank + 1) % kClients;
    EXPECT_EQ(store.get(keys[peer]), std::to_string(peer * peer));
    store.add("arrivals", 1);
  });
  TcpStore store("127.0.0.1", server->port(), 5s);
  EXPECT_EQ(store.get("arrivals"), std::to_string(kClients));
  EXPECT_EQ(store.num_keys(), kClients + 1);
}

TEST(TcpStore, ServerTimeoutReplyBecomesTimeoutErrorNamingMissingKeys) {
  auto server = start_server();
  TcpStore store("127.0.0.1", server->port(), 200ms);
  try {
    store.wait({"missing_one", "missing_two"}, 100ms);
    FAIL();
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("missing_one"), std::string::npos) << message;
    EXPECT_NE(message.find("missing_two"), std::string::npos) << message;
    EXPECT_NE(message.find("127.0.0.1:" + std::to_string(server->port())), std::string::npos);
  }
  // A server-side timeout leaves the connection usable.
  store.set("after", "1");
  EXPECT_EQ(store.get("after"), "1");
}

TEST(TcpStore, LargeValuesCrossInSeveralReads) {
  auto server = start_server();
  TcpStore writer("127.0.0.1", server->port(), 10s);
  TcpStore reader("127.0.0.1", server->port(), 10s);
  std::string value(12 * 1024 * 1024 + 3, '\0');
  std::mt19937 rng(7);
  for (char& c : value) c = static_cast<char>(rng());
  std::string got;
  std::thread thread([&] { got = reader.get("big"); });  // parked, then a 12 MiB reply
  writer.set("big", value);
  thread.join();
  EXPECT_TRUE(got == value);
}

TEST(TcpStore, ConnectWithoutServerTimesOutNamingTheAddress) {
  const int port = store_test::free_port();
  const auto start = Clock::now();
  try {
    TcpStore store("127.0.0.1", port, 1s, 300ms);
    FAIL() << "connected to a port nobody listens on";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(port)), std::string::npos)
        << e.what();
  }
  EXPECT_GE(elapsed_ms(start), 250);
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST(TcpStore, ConnectRetriesUntilTheServerComesUp) {
  const int port = store_test::free_port();
  std::unique_ptr<TcpStoreServer> server;
  std::thread late([&] {
    std::this_thread::sleep_for(200ms);
    TcpStoreServerOptions options;
    options.port = port;
    server = start_server(options);
  });
  TcpStore store("127.0.0.1", port, 5s, 10s);
  late.join();
  store.set("k", "v");
  EXPECT_EQ(store.get("k"), "v");
}

TEST(TcpStore, SilentPeerTimesOutDuringHandshake) {
  // A listener that never accepts: the kernel completes TCP connects, nobody ever answers.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const auto start = Clock::now();
  EXPECT_THROW(TcpStore("127.0.0.1", ntohs(addr.sin_port), 1s, 300ms), TimeoutError);
  EXPECT_LT(elapsed_ms(start), kFastMs);
  ::close(fd);
}

TEST(TcpStore, DeadServerIsADistributedErrorNotAHang) {
  auto server = start_server();
  TcpStore store("127.0.0.1", server->port(), 30s);
  store.set("k", "v");
  server->stop();
  const auto start = Clock::now();
  try {
    store.get("k");
    FAIL() << "get() succeeded against a stopped server";
  } catch (const TimeoutError& e) {
    FAIL() << "expected a broken connection, got a timeout: " << e.what();
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server->port())), std::string::npos);
  }
  EXPECT_THROW(store.set("k", "v"), DistributedError);  // stays broken, still no hang
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST(TcpStore, ParkedGetFailsPromptlyWhenTheServerDies) {
  auto server = start_server();
  TcpStore store("127.0.0.1", server->port(), 60s);
  std::atomic<bool> broken{false};
  const auto start = Clock::now();
  std::thread thread([&] {
    try {
      store.get("never");
    } catch (const DistributedError&) {
      broken = true;
    }
  });
  std::this_thread::sleep_for(100ms);
  server->stop();
  thread.join();
  EXPECT_TRUE(broken);
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

// ---- hostile input on raw sockets ------------------------------------------------------------

class TcpStoreHostileInput : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = start_server();
    port_ = server_->port();
    // A well-behaved client parked in a get across all the abuse below.
    bystander_ = std::make_unique<TcpStore>("127.0.0.1", port_, 30s);
    bystander_thread_ = std::thread([this] { bystander_value_ = bystander_->get("bystander"); });
  }

  void TearDown() override {
    TcpStore("127.0.0.1", port_, 5s).set("bystander", "served");
    bystander_thread_.join();
    EXPECT_EQ(bystander_value_, "served");
    expect_serving(port_, "end");
  }

  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
  std::unique_ptr<TcpStore> bystander_;
  std::thread bystander_thread_;
  std::string bystander_value_;
};

// Slow-loris clients: hundreds of connections that send half a handshake or half a request and
// then stall. Each costs the server a descriptor, never its attention: others are served at once.
TEST_F(TcpStoreHostileInput, StalledClientsDoNotStopTheServer) {
  std::vector<std::unique_ptr<RawClient>> stalled;
  for (int i = 0; i < 300; ++i) {
    stalled.push_back(std::make_unique<RawClient>(port_));
    if (i % 2 == 0) {
      stalled.back()->send(hello().substr(0, 5));  // half a handshake
    } else {
      stalled.back()->send(hello());
      stalled.back()->send(frame(std::string(1, kSet) + field("k") + field("v")).substr(0, 7));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  TcpStore client("127.0.0.1", port_, 5s);
  client.set("served", "yes");
  EXPECT_EQ(client.get("served"), "yes");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST_F(TcpStoreHostileInput, GarbageBytes) {
  RawClient client(port_);
  std::string garbage;
  std::mt19937 rng(1);
  for (int i = 0; i < 256; ++i) garbage.push_back(static_cast<char>(rng()));
  client.send(garbage);
  expect_rejected(client.read_until_closed(), "magic");
  expect_serving(port_, "garbage");
}

TEST_F(TcpStoreHostileInput, HttpRequest) {
  RawClient client(port_);
  client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  expect_rejected(client.read_until_closed(), "magic");
  expect_serving(port_, "http");
}

TEST_F(TcpStoreHostileInput, BadMagic) {
  RawClient client(port_);
  client.send(hello(0xdeadbeef, 1));
  expect_rejected(client.read_until_closed(), "magic");
  expect_serving(port_, "magic");
}

TEST_F(TcpStoreHostileInput, UnsupportedVersion) {
  RawClient client(port_);
  client.send(hello(0x54534347, 99));
  expect_rejected(client.read_until_closed(), "version");
  expect_serving(port_, "version");
}

TEST_F(TcpStoreHostileInput, OversizeFrameLength) {
  auto client = handshaken_client(port_);
  client->send(le32(0xfffffff0u) + "xxxx");
  expect_rejected(client->read_until_closed(), "bytes");
  expect_serving(port_, "oversize");
}

TEST_F(TcpStoreHostileInput, ZeroLengthFrame) {
  auto client = handshaken_client(port_);
  client->send(le32(0));
  expect_rejected(client->read_until_closed(), "request of 0 bytes");
  expect_serving(port_, "zero");
}

TEST_F(TcpStoreHostileInput, TruncatedFrameThenEof) {
  auto client = handshaken_client(port_);
  client->send(le32(100) + std::string(10, 'x'));
  client->shutdown_write();
  expect_rejected(client->read_until_closed(), "truncated");
  expect_serving(port_, "truncated_frame");
}

TEST_F(TcpStoreHostileInput, TruncatedHandshakeThenEof) {
  RawClient client(port_);
  client.send("GCS");
  client.shutdown_write();
  expect_rejected(client.read_until_closed(), "truncated");
  expect_serving(port_, "truncated_hello");
}

TEST_F(TcpStoreHostileInput, FieldLongerThanItsFrame) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, kSet) + le32(1000) + "abc"));
  expect_rejected(client->read_until_closed(), "truncated");
  expect_serving(port_, "field");
}

TEST_F(TcpStoreHostileInput, OversizeKey) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, kSet) + field(std::string(5000, 'k')) + field("v")));
  expect_rejected(client->read_until_closed(), "limit");
  expect_serving(port_, "key");
}

TEST_F(TcpStoreHostileInput, TooManyKeysInAWait) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, kWait) + le32(1u << 30) + field("k") + le64(10)));
  expect_rejected(client->read_until_closed(), "limit");
  expect_serving(port_, "keys");
}

TEST_F(TcpStoreHostileInput, UnknownCommand) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, 99)));
  expect_rejected(client->read_until_closed(), "unknown command");
  expect_serving(port_, "command");
}

TEST_F(TcpStoreHostileInput, TrailingBytesAfterARequest) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, kNumKeys) + "extra"));
  expect_rejected(client->read_until_closed(), "trailing");
  expect_serving(port_, "trailing");
}

TEST_F(TcpStoreHostileInput, NegativeTimeout) {
  auto client = handshaken_client(port_);
  client->send(frame(std::string(1, kGet) + field("k") + le64(-5)));
  expect_rejected(client->read_until_closed(), "negative timeout");
  expect_serving(port_, "timeout");
}

TEST_F(TcpStoreHostileInput, PipelinedRequestsAreAnsweredInOrder) {
  RawClient client(port_);
  // Handshake, a set, a parked get of a missing key with 50 ms, and a count, in one write.
  client.send(hello() + frame(std::string(1, kSet) + field("pipelined") + field("v")) +
              frame(std::string(1, kGet) + field("pipeline_missing") + le64(50)) +
              frame(std::string(1, kNumKeys)));
  std::vector<RawReply> replies(4);
  for (RawReply& reply : replies) ASSERT_TRUE(client.read_reply(&reply));
  EXPECT_EQ(replies[0].status, kOk);  // handshake
  EXPECT_EQ(replies[1].status, kOk);  // set
  EXPECT_EQ(replies[2].status, kTimeoutStatus);
  EXPECT_EQ(replies[3].status, kOk);
  EXPECT_EQ(replies[3].body, le64(1));  // only "pipelined" exists (the bystander waits)
}

TEST_F(TcpStoreHostileInput, ClientVanishingWhileParkedIsForgotten) {
  {
    auto client = handshaken_client(port_);
    client->send(frame(std::string(1, kGet) + field("vanish") + le64(60000)));
  }                                                     // closed while its get is parked
  TcpStore("127.0.0.1", port_, 5s).set("vanish", "x");  // must not write to the dead client
  expect_serving(port_, "vanish");
}

TEST_F(TcpStoreHostileInput, RandomFramesNeverHurtTheServer) {
  std::mt19937 rng(2024);
  for (int round = 0; round < 150; ++round) {
    auto client = handshaken_client(port_);
    std::string payload(1 + rng() % 48, '\0');
    for (char& c : payload) c = static_cast<char>(rng());
    payload[0] = static_cast<char>(rng() % 10);  // mostly real commands with junk fields
    std::string bytes = frame(payload);
    if (round % 3 == 0) bytes = payload;  // sometimes not even a frame
    client->send(bytes);
    client->shutdown_write();
    const RawOutcome outcome = client->read_until_closed();
    EXPECT_FALSE(outcome.timed_out) << "round " << round;
  }
  expect_serving(port_, "random");
}

}  // namespace
}  // namespace groupcoord
