// One suite, every Store implementation: HashStore, TcpStore, FileStore and PrefixStore (over
// each of them, and nested), and TorchTcpStore against a real torch TCPStore server when
// tests/store/with_torch_store.py runs this binary (it sets GC_TEST_TORCH_STORE=host:port).
// Expected values come from the c10d semantics written out in store.h, computed by hand here, never
// from another store.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/file_store.h"
#include "groupcoord/hash_store.h"
#include "groupcoord/prefix_store.h"
#include "groupcoord/tcp_store.h"
#include "groupcoord/torch_tcp_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::Clock;
using store_test::elapsed_ms;

constexpr std::chrono::milliseconds kLongTimeout = 10s;
constexpr std::chrono::milliseconds kShortTimeout = 200ms;
/// Upper bound for anything that must fail fast (a 200 ms timeout plus generous slack).
constexpr std::int64_t kFastMs = 5000;

/// The shared backing of one test: hands out independent clients of the same store, as
/// separate ranks would hold them.
class StoreWorld {
 public:
  virtual ~StoreWorld() = default;
  /// A new client whose get()/wait() default to `timeout`.
  virtual std::shared_ptr<Store> client(std::chrono::milliseconds timeout) = 0;
  /// Whether add() on a non-integer or overflowing value is refused with std::invalid_argument
  /// (torch's server instead drops the connection, or wraps around).
  virtual bool rejects_bad_counters() const { return true; }
};

class HashWorld : public StoreWorld {
 public:
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    // Threads share one object; a view per client gives each its own timeout (which then
    // differs from the base's, exercising PrefixStore::get's own deadline).
    auto view = std::make_shared<PrefixStore>("hash", store_);
    view->set_timeout(timeout);
    return view;
  }

 private:
  std::shared_ptr<HashStore> store_ = std::make_shared<HashStore>(kLongTimeout);
};

/// A HashStore used directly (no PrefixStore in between).
class BareHashWorld : public StoreWorld {
 public:
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    // All clients share the one object, so the latest requested timeout applies to all; the
    // suite only shortens it in tests where every client wants the short one.
    store_->set_timeout(timeout);
    return store_;
  }

 private:
  std::shared_ptr<HashStore> store_ = std::make_shared<HashStore>(kLongTimeout);
};

class TcpWorld : public StoreWorld {
 public:
  TcpWorld() : server_(TcpStoreServer::start(TcpStoreServerOptions())) {}
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    return std::make_shared<TcpStore>("127.0.0.1", server_->port(), timeout);
  }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

class FileWorld : public StoreWorld {
 public:
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    return std::make_shared<FileStore>(dir_.path() + "/store", timeout);
  }

 private:
  testing::TempDir dir_;
};

/// Clients of the torch TCPStore server named by GC_TEST_TORCH_STORE ("host:port"). The server
/// outlives the test, so each world keeps its keys under a prefix of its own.
class TorchWorld : public StoreWorld {
 public:
  explicit TorchWorld(const std::string& address) {
    const auto colon = address.rfind(':');
    options_.host = address.substr(0, colon);
    options_.port = std::stoi(address.substr(colon + 1));
    const char* protocol = std::getenv("GC_TEST_TORCH_STORE_PROTOCOL");
    if (protocol != nullptr) {
      options_.protocol = parse_torch_store_protocol(protocol, "GC_TEST_TORCH_STORE_PROTOCOL");
    }
    static std::atomic<int> worlds{0};
    prefix_ = "semantics" + std::to_string(worlds++);
  }
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    TorchTcpStoreOptions options = options_;
    options.timeout = timeout;
    auto view = std::make_shared<PrefixStore>(prefix_, TorchTcpStore::connect(options));
    view->set_timeout(timeout);
    return view;
  }
  bool rejects_bad_counters() const override { return false; }

 private:
  TorchTcpStoreOptions options_;
  std::string prefix_;
};

/// PrefixStore("inner", PrefixStore("outer", base client)).
class NestedPrefixWorld : public StoreWorld {
 public:
  explicit NestedPrefixWorld(std::unique_ptr<StoreWorld> base) : base_(std::move(base)) {}
  std::shared_ptr<Store> client(std::chrono::milliseconds timeout) override {
    auto outer = std::make_shared<PrefixStore>("outer", base_->client(timeout));
    return std::make_shared<PrefixStore>("inner", outer);
  }
  bool rejects_bad_counters() const override { return base_->rejects_bad_counters(); }

 private:
  std::unique_ptr<StoreWorld> base_;
};

struct StoreKind {
  std::string name;
  std::function<std::unique_ptr<StoreWorld>()> make;
};

std::vector<StoreKind> all_kinds() {
  std::vector<StoreKind> kinds = {
      {"Hash", [] { return std::make_unique<BareHashWorld>(); }},
      {"PrefixOverHash", [] { return std::make_unique<HashWorld>(); }},
      {"Tcp", [] { return std::make_unique<TcpWorld>(); }},
      {"File", [] { return std::make_unique<FileWorld>(); }},
      {"NestedPrefixOverTcp",
       [] { return std::make_unique<NestedPrefixWorld>(std::make_unique<TcpWorld>()); }},
      {"NestedPrefixOverFile",
       [] { return std::make_unique<NestedPrefixWorld>(std::make_unique<FileWorld>()); }},
  };
  if (const char* torch = std::getenv("GC_TEST_TORCH_STORE")) {
    const std::string address = torch;
    kinds.push_back({"Torch", [address] { return std::make_unique<TorchWorld>(address); }});
  }
  return kinds;
}

void PrintTo(const StoreKind& kind, std::ostream* out) { *out << kind.name; }

class StoreSemantics : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    world_ = GetParam().make();
    store_ = world_->client(kLongTimeout);
  }

  std::unique_ptr<StoreWorld> world_;
  std::shared_ptr<Store> store_;
};

TEST_P(StoreSemantics, SetThenGetRoundTripsBinaryValues) {
  const std::string binary("a\0b\xff\x01", 5);
  store_->set("binary", binary);
  store_->set("empty", "");
  EXPECT_EQ(store_->get("binary"), binary);
  EXPECT_EQ(store_->get("empty"), "");
  store_->set("binary", "replaced");
  EXPECT_EQ(store_->get("binary"), "replaced");
}

TEST_P(StoreSemantics, LargeValueRoundTrips) {
  std::string value(3 * 1024 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 31 + 7);
  store_->set("large", value);
  EXPECT_EQ(world_->client(kLongTimeout)->get("large"), value);
}

TEST_P(StoreSemantics, GetOfMissingKeyTimesOutNamingTheKey) {
  auto store = world_->client(kShortTimeout);
  const auto start = Clock::now();
  try {
    store->get("never_set_key");
    FAIL() << "get() of a missing key returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("never_set_key"), std::string::npos) << e.what();
  }
  EXPECT_GE(elapsed_ms(start), 150);
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST_P(StoreSemantics, WaitTimesOutNamingOnlyTheMissingKeys) {
  store_->set("present_key", "1");
  const auto start = Clock::now();
  try {
    store_->wait({"present_key", "absent_key"}, kShortTimeout);
    FAIL() << "wait() for a missing key returned";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    // Prefix stores report the full key ("outer/inner/absent_key"); either way only the missing
    // key is listed as missing.
    const std::size_t listed = message.find("missing keys");
    ASSERT_NE(listed, std::string::npos) << message;
    EXPECT_NE(message.find("absent_key'", listed), std::string::npos) << message;
    EXPECT_EQ(message.find("present_key", listed), std::string::npos) << message;
  }
  EXPECT_GE(elapsed_ms(start), 150);
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST_P(StoreSemantics, WaitWithoutTimeoutUsesTheStoreTimeout) {
  auto store = world_->client(kShortTimeout);
  const auto start = Clock::now();
  EXPECT_THROW(store->wait({"absent_key"}), TimeoutError);
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST_P(StoreSemantics, WaitReturnsAtOnceForExistingKeys) {
  store_->set("a", "1");
  store_->set("b", "2");
  const auto start = Clock::now();
  store_->wait({"a", "b"}, kLongTimeout);
  store_->wait({}, kLongTimeout);
  store_->wait({"a"}, 0ms);
  EXPECT_LT(elapsed_ms(start), 1000);
}

TEST_P(StoreSemantics, ZeroTimeoutWaitForMissingKeyFailsAtOnce) {
  const auto start = Clock::now();
  EXPECT_THROW(store_->wait({"absent"}, 0ms), TimeoutError);
  EXPECT_LT(elapsed_ms(start), 1000);
}

TEST_P(StoreSemantics, AddCountsFromZeroAndStoresDecimalText) {
  EXPECT_EQ(store_->add("counter", 1), 1);
  EXPECT_EQ(store_->add("counter", 5), 6);
  EXPECT_EQ(store_->add("counter", -10), -4);
  EXPECT_EQ(store_->add("counter", 0), -4);
  EXPECT_EQ(store_->get("counter"), "-4");
  store_->set("preset", "40");
  EXPECT_EQ(store_->add("preset", 2), 42);
}

TEST_P(StoreSemantics, AddOnNonIntegerValueIsRejectedAndTheStoreStaysUsable) {
  if (!world_->rejects_bad_counters()) {
    GTEST_SKIP() << "torch's TCPStore server drops the connection on such an add, or wraps around";
  }
  store_->set("text", "abc");
  EXPECT_THROW(store_->add("text", 1), std::invalid_argument);
  store_->set("big", "9223372036854775807");
  EXPECT_THROW(store_->add("big", 1), std::invalid_argument);
  EXPECT_EQ(store_->get("text"), "abc");
  EXPECT_EQ(store_->add("fine", 3), 3);
}

TEST_P(StoreSemantics, CompareSetFollowsC10dSemantics) {
  // Missing key, empty expected: stores desired.
  EXPECT_EQ(store_->compare_set("k1", "", "first"), "first");
  EXPECT_EQ(store_->get("k1"), "first");
  // Missing key, non-empty expected: returns expected, creates nothing.
  EXPECT_EQ(store_->compare_set("k2", "old", "new"), "old");
  EXPECT_FALSE(store_->check({"k2"}));
  // Current == expected: swaps.
  EXPECT_EQ(store_->compare_set("k1", "first", "second"), "second");
  EXPECT_EQ(store_->get("k1"), "second");
  // Current != expected: returns current, unchanged.
  EXPECT_EQ(store_->compare_set("k1", "wrong", "third"), "second");
  EXPECT_EQ(store_->get("k1"), "second");
}

TEST_P(StoreSemantics, CheckNeverWaits) {
  EXPECT_TRUE(store_->check({}));
  EXPECT_FALSE(store_->check({"x"}));
  store_->set("x", "1");
  EXPECT_TRUE(store_->check({"x"}));
  EXPECT_FALSE(store_->check({"x", "y"}));
}

TEST_P(StoreSemantics, DeleteKeyReportsWhetherTheKeyExisted) {
  EXPECT_FALSE(store_->delete_key("gone"));
  store_->set("gone", "1");
  const std::int64_t before = store_->num_keys();
  EXPECT_TRUE(store_->delete_key("gone"));
  EXPECT_FALSE(store_->check({"gone"}));
  EXPECT_EQ(store_->num_keys(), before - 1);
  EXPECT_FALSE(store_->delete_key("gone"));
}

TEST_P(StoreSemantics, NumKeysCountsDistinctKeys) {
  const std::int64_t base = store_->num_keys();  // a PrefixStore counts the whole base store
  store_->set("n1", "1");
  store_->set("n2", "2");
  store_->set("n1", "again");
  store_->add("n3", 1);
  EXPECT_EQ(store_->num_keys(), base + 3);
}

TEST_P(StoreSemantics, EmptyKeysAreInvalidArguments) {
  EXPECT_THROW(store_->set("", "v"), std::invalid_argument);
  EXPECT_THROW(store_->get(""), std::invalid_argument);
  EXPECT_THROW(store_->add("", 1), std::invalid_argument);
  EXPECT_THROW(store_->compare_set("", "", "v"), std::invalid_argument);
  EXPECT_THROW(store_->check({"ok", ""}), std::invalid_argument);
  EXPECT_THROW(store_->wait({""}, 1s), std::invalid_argument);
  EXPECT_THROW(store_->delete_key(""), std::invalid_argument);
  EXPECT_THROW(store_->wait({"k"}, -1ms), std::invalid_argument);
  store_->set("still", "usable");
  EXPECT_EQ(store_->get("still"), "usable");
}

TEST_P(StoreSemantics, UnusualKeysStayDistinct) {
  const std::vector<std::string> keys = {"a/b",
                                         "a%2Fb",
                                         "a_2Fb",
                                         ".",
                                         "..",
                                         ".lock",
                                         "with space",
                                         "new\nline",
                                         std::string("nul\0byte", 8),
                                         "\xc3\xa9t\xc3\xa9",
                                         std::string(1000, 'L'),
                                         std::string(999, 'L') + "M"};
  for (std::size_t i = 0; i < keys.size(); ++i) store_->set(keys[i], "value" + std::to_string(i));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(store_->get(keys[i]), "value" + std::to_string(i)) << "key #" << i;
  }
  EXPECT_TRUE(store_->check(keys));
}

TEST_P(StoreSemantics, GetIsWokenBySetFromAnotherClient) {
  auto waiter = world_->client(kLongTimeout);
  auto setter = world_->client(kLongTimeout);
  const auto start = Clock::now();
  std::string got;
  std::thread thread([&] { got = waiter->get("late_key"); });
  std::this_thread::sleep_for(100ms);
  setter->set("late_key", "arrived");
  thread.join();
  EXPECT_EQ(got, "arrived");
  EXPECT_LT(elapsed_ms(start), kFastMs);
}

TEST_P(StoreSemantics, WaitIsWokenOnlyWhenEveryKeyExists) {
  auto waiter = world_->client(kLongTimeout);
  auto setter = world_->client(kLongTimeout);
  std::atomic<bool> done{false};
  std::thread thread([&] {
    waiter->wait({"w1", "w2", "w3"}, kLongTimeout);
    done = true;
  });
  setter->set("w1", "1");
  setter->add("w2", 1);
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(done);
  setter->compare_set("w3", "", "3");
  thread.join();
  EXPECT_TRUE(done);
}

TEST_P(StoreSemantics, AddIsAtomicAcrossEightClients) {
  constexpr int kClients = 8;
  constexpr int kAdds = 200;
  std::vector<std::vector<std::int64_t>> seen(kClients);
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(world_->client(kLongTimeout));
  testing::run_ranks_on_threads(kClients, [&](int rank) {
    for (int i = 0; i < kAdds; ++i) seen[rank].push_back(clients[rank]->add("shared", 1));
  });
  EXPECT_EQ(store_->get("shared"), std::to_string(kClients * kAdds));
  // Atomic increments hand out every value 1..1600 exactly once.
  std::vector<std::int64_t> all;
  for (const auto& values : seen) all.insert(all.end(), values.begin(), values.end());
  std::sort(all.begin(), all.end());
  std::vector<std::int64_t> expected(kClients * kAdds);
  std::iota(expected.begin(), expected.end(), 1);
  EXPECT_EQ(all, expected);
}

TEST_P(StoreSemantics, CompareSetElectsExactlyOneWinner) {
  constexpr int kClients = 8;
  std::vector<std::string> results(kClients);
  std::vector<std::shared_ptr<Store>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(world_->client(kLongTimeout));
  testing::run_ranks_on_threads(kClients, [&](int rank) {
    results[rank] = clients[rank]->compare_set("leader", "", "rank" + std::to_string(rank));
  });
  const std::string winner = store_->get("leader");
  int winners = 0;
  for (int rank = 0; rank < kClients; ++rank) {
    EXPECT_EQ(results[rank], winner);
    if (winner == "rank" + std::to_string(rank)) ++winners;
  }
  EXPECT_EQ(winners, 1);
}

TEST_P(StoreSemantics, OneClientIsSafeToShareBetweenThreads) {
  testing::run_ranks_on_threads(4, [&](int rank) {
    for (int i = 0; i < 50; ++i) {
      const std::string key = "t" + std::to_string(rank) + "_" + std::to_string(i);
      store_->set(key, key);
      EXPECT_EQ(store_->get(key), key);
      store_->add("shared_by_threads", 1);
    }
  });
  EXPECT_EQ(store_->get("shared_by_threads"), "200");
}

TEST_P(StoreSemantics, EachThreadsRequestsTakeEffectInCallOrder) {
  // set() has no reply on some wires (torch's): a check() or add() right after it, from the same
  // thread, must still see it while other threads use the same client.
  testing::run_ranks_on_threads(4, [&](int rank) {
    for (int i = 0; i < 1000; ++i) {
      const std::string key = "order" + std::to_string(rank) + "_" + std::to_string(i);
      store_->set(key, "5");
      EXPECT_TRUE(store_->check({key})) << key;
      EXPECT_EQ(store_->add(key, 1), 6) << key;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllStores, StoreSemantics, ::testing::ValuesIn(all_kinds()),
                         [](const ::testing::TestParamInfo<StoreKind>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace groupcoord
