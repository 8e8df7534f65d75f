// The private Gloo adapter: our stores seen through gloo::rendezvous::Store, including Gloo's
// own PrefixStore and a real Gloo full-mesh rendezvous over a TcpStore on 127.0.0.1.
#include "store/gloo_store_adapter.h"

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/hash_store.h"
#include "groupcoord/tcp_store.h"
#include "store_test_util.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using namespace std::chrono_literals;
using store_test::Clock;
using store_test::elapsed_ms;

TEST(GlooStoreAdapter, RejectsANullStore) {
  EXPECT_THROW(make_gloo_store(nullptr), std::invalid_argument);
}

TEST(GlooStoreAdapter, RoundTripsThroughGlooPrefixStore) {
  auto ours = std::make_shared<HashStore>(5s);
  auto adapter = make_gloo_store(ours);
  gloo::rendezvous::PrefixStore prefixed("pg0", *adapter);
  const std::vector<char> value = {'a', '\0', 'b', '\xff'};
  prefixed.set("addr", value);
  EXPECT_EQ(prefixed.get("addr"), value);
  // Gloo's PrefixStore joins with "/", like ours: the key is visible in our store.
  EXPECT_EQ(ours->get("pg0/addr"), std::string("a\0b\xff", 4));
  prefixed.wait({"addr"}, 1s);
  ours->set("pg0/other", "x");
  EXPECT_EQ(prefixed.get("other"), std::vector<char>{'x'});
}

TEST(GlooStoreAdapter, OurTimeoutErrorPropagatesThroughGloo) {
  auto adapter = make_gloo_store(std::make_shared<HashStore>(200ms));
  gloo::rendezvous::PrefixStore prefixed("pg1", *adapter);
  const auto start = Clock::now();
  EXPECT_THROW(prefixed.get("missing"), TimeoutError);
  EXPECT_THROW(prefixed.wait({"missing"}, 100ms), TimeoutError);
  EXPECT_LT(elapsed_ms(start), 5000);
}

TEST(GlooStoreAdapter, WaitWithoutTimeoutUsesOurStoreTimeout) {
  auto adapter = make_gloo_store(std::make_shared<HashStore>(200ms));  // not Gloo's 30 s
  const auto start = Clock::now();
  EXPECT_THROW(adapter->wait({"missing"}), TimeoutError);
  EXPECT_LT(elapsed_ms(start), 5000);
}

TEST(GlooStoreAdapter, GlooFullMeshRendezvousOverTcpStore) {
  constexpr int kRanks = 3;
  auto server = TcpStoreServer::start(TcpStoreServerOptions());
  testing::run_ranks_on_threads(kRanks, [&](int rank) {
    auto store = std::make_shared<TcpStore>("127.0.0.1", server->port(), 10s);
    auto adapter = make_gloo_store(store);
    gloo::rendezvous::PrefixStore prefixed("mesh", *adapter);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, kRanks);
    context->setTimeout(10s);
    context->connectFullMesh(prefixed, device);
    EXPECT_EQ(context->size, kRanks);
    // Keep this rank's connections open until every rank has finished connecting: a rank that
    // tore its device down early would close pairs its peers are still setting up.
    store->set("connected/" + std::to_string(rank), "1");
    for (int r = 0; r < kRanks; ++r) store->wait({"connected/" + std::to_string(r)});
  });
}

}  // namespace
}  // namespace groupcoord
