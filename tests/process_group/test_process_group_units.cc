// In-process unit tests of the process group's building blocks (no peers needed).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/half.h"
#include "groupcoord/hash_store.h"
#include "groupcoord/process_group.h"
#include "process_group/gloo_errors.h"
#include "process_group/gloo_transport.h"
#include "process_group/reduce_functions.h"
#include "process_group/waiter_pool.h"
#include "test_support.h"

namespace groupcoord {
namespace {

TEST(ReduceFunctions, HalfSumAccumulatesInFloatAndRounds) {
  // 2048 + 1 is not a float16; the sum must round to nearest even (2048), and 1 + 0.5 is exact.
  std::uint16_t a[2] = {float_to_half(2048.f), float_to_half(1.f)};
  std::uint16_t b[2] = {float_to_half(1.f), float_to_half(0.5f)};
  std::uint16_t out[2];
  reduce_function(DType::Float16, ReduceOp::Sum)(out, a, b, 2);
  EXPECT_EQ(half_to_float(out[0]), 2048.f);
  EXPECT_EQ(half_to_float(out[1]), 1.5f);
}

TEST(ReduceFunctions, BFloat16MinMaxCopyBits) {
  std::uint16_t a[2] = {float_to_bfloat16(-3.f), float_to_bfloat16(7.f)};
  std::uint16_t b[2] = {float_to_bfloat16(2.f), float_to_bfloat16(-8.f)};
  std::uint16_t lo[2], hi[2];
  reduce_function(DType::BFloat16, ReduceOp::Min)(lo, a, b, 2);
  reduce_function(DType::BFloat16, ReduceOp::Max)(hi, a, b, 2);
  EXPECT_EQ(lo[0], a[0]);
  EXPECT_EQ(lo[1], b[1]);
  EXPECT_EQ(hi[0], b[0]);
  EXPECT_EQ(hi[1], a[1]);
}

TEST(ReduceFunctions, Fp8SumSaturatesE4M3) {
  std::uint8_t a = float_to_float8_e4m3fn(448.f), b = float_to_float8_e4m3fn(448.f), out = 0;
  reduce_function(DType::Float8E4M3, ReduceOp::Sum)(&out, &a, &b, 1);
  EXPECT_EQ(float8_e4m3fn_to_float(out), 448.f);
  std::uint8_t c = float_to_float8_e5m2(-2.f), d = float_to_float8_e5m2(3.f), out2 = 0;
  reduce_function(DType::Float8E5M2, ReduceOp::Sum)(&out2, &c, &d, 1);
  EXPECT_EQ(float8_e5m2_to_float(out2), 1.f);
}

TEST(ReduceFunctions, BoolIsLogical) {
  std::uint8_t a[4] = {0, 0, 1, 2};
  std::uint8_t b[4] = {0, 1, 0, 1};
  std::uint8_t out[4];
  reduce_function(DType::Bool, ReduceOp::Sum)(out, a, b, 4);
  EXPECT_EQ(std::vector<std::uint8_t>(out, out + 4), (std::vector<std::uint8_t>{0, 1, 1, 1}));
  reduce_function(DType::Bool, ReduceOp::Max)(out, a, b, 4);
  EXPECT_EQ(std::vector<std::uint8_t>(out, out + 4), (std::vector<std::uint8_t>{0, 1, 1, 1}));
  reduce_function(DType::Bool, ReduceOp::Min)(out, a, b, 4);
  EXPECT_EQ(std::vector<std::uint8_t>(out, out + 4), (std::vector<std::uint8_t>{0, 0, 0, 1}));
}

TEST(ReduceFunctions, SignedSumsWrap) {
  std::int32_t a = 2147483647, b = 1, out = 0;
  reduce_function(DType::Int32, ReduceOp::Sum)(&out, &a, &b, 1);
  EXPECT_EQ(out, -2147483647 - 1);
  std::int8_t c = -128, d = -1, out8 = 0;
  reduce_function(DType::Int8, ReduceOp::Sum)(&out8, &c, &d, 1);
  EXPECT_EQ(out8, 127);
}

TEST(ReduceFunctions, NativeMinMaxSum) {
  double a[3] = {1.5, -2, 3}, b[3] = {0.25, 4, -3}, out[3];
  reduce_function(DType::Float64, ReduceOp::Sum)(out, a, b, 3);
  EXPECT_EQ(std::vector<double>(out, out + 3), (std::vector<double>{1.75, 2, 0}));
  reduce_function(DType::Float64, ReduceOp::Min)(out, a, b, 3);
  EXPECT_EQ(std::vector<double>(out, out + 3), (std::vector<double>{0.25, -2, -3}));
  std::uint8_t u[2] = {200, 3}, v[2] = {100, 4}, uo[2];
  reduce_function(DType::UInt8, ReduceOp::Sum)(uo, u, v, 2);
  EXPECT_EQ(uo[0], 44);  // wraps modulo 256
  EXPECT_EQ(uo[1], 7);
}

TEST(WaiterPool, GrowsToOutstandingTasksAndRetiresIdleThreads) {
  WaiterPool pool(std::chrono::milliseconds(200));
  std::atomic<int> started{0};
  std::atomic<bool> release{false};
  for (int i = 0; i < 8; ++i) {
    pool.submit([&] {
      ++started;
      while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  // Every blocked task runs at once: none waits for another to finish.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (started < 8 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(started.load(), 8);
  EXPECT_EQ(pool.thread_count(), 8u);
  release = true;
  const auto idle_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.thread_count() > 0 && std::chrono::steady_clock::now() < idle_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(pool.thread_count(), 0u);
  std::atomic<bool> ran{false};
  pool.submit([&] { ran = true; });
  const auto ran_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!ran && std::chrono::steady_clock::now() < ran_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(ran.load());
}

TEST(TransportAddress, FollowsTheBindRule) {
  ProcessGroupOptions options;
  options.bind_address = "10.1.2.3";
  EXPECT_EQ(choose_transport_address(options).hostname, "10.1.2.3");
  options.bind_address.clear();
  {
    testing::ScopedEnv env("GLOO_SOCKET_IFNAME", std::string("lo,eth0"));
    const TransportAddress address = choose_transport_address(options);
    EXPECT_EQ(address.iface, "lo");
    EXPECT_TRUE(address.hostname.empty());
  }
  testing::ScopedEnv unset("GLOO_SOCKET_IFNAME", std::nullopt);
  options.single_node = true;
  EXPECT_EQ(choose_transport_address(options).hostname, "127.0.0.1");
  options.single_node = false;
  EXPECT_FALSE(choose_transport_address(options).hostname.empty());
}

TEST(GlooErrors, TimeoutsAreRecognised) {
  EXPECT_TRUE(is_gloo_timeout_message(
      "[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 2000ms for recv operation to "
      "complete"));
  EXPECT_FALSE(is_gloo_timeout_message("Connection closed by peer [127.0.0.1]:1234"));
}

TEST(GlooErrors, MappingMarksTheGroupBroken) {
  GroupHealth health("group 'g' (rank 0 of 2, world ranks [0, 1])");
  auto mapped = map_gloo_error(std::make_exception_ptr(std::runtime_error("peer vanished")), health,
                               "barrier", std::chrono::milliseconds(100));
  EXPECT_THROW(std::rethrow_exception(mapped), DistributedError);
  EXPECT_TRUE(health.is_broken());
  try {
    health.check_usable("all_reduce");
    ADD_FAILURE() << "broken group accepted a call";
  } catch (const DistributedError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("is broken after an earlier error"), std::string::npos) << what;
    EXPECT_NE(what.find("peer vanished"), std::string::npos) << what;
  }
  GroupHealth other("group 'h'");
  auto same = map_gloo_error(std::make_exception_ptr(std::invalid_argument("bad")), other, "x",
                             std::chrono::milliseconds(1));
  EXPECT_THROW(std::rethrow_exception(same), std::invalid_argument);
  EXPECT_FALSE(other.is_broken());
}

TEST(CreateWorld, RejectsBadArguments) {
  auto store = std::make_shared<HashStore>();
  EXPECT_THROW(ProcessGroup::create_world(store, 2, 2, {}), std::invalid_argument);
  EXPECT_THROW(ProcessGroup::create_world(store, 0, 0, {}), std::invalid_argument);
  EXPECT_THROW(ProcessGroup::create_world(nullptr, 0, 1, {}), std::invalid_argument);
  ProcessGroupOptions options;
  options.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(ProcessGroup::create_world(store, 0, 1, options), std::invalid_argument);
}

TEST(CreateWorld, MissingPeersTimeOut) {
  auto store = std::make_shared<HashStore>();
  ProcessGroupOptions options;
  options.timeout = std::chrono::milliseconds(500);
  options.single_node = true;
  options.name = "lonely";
  const auto start = std::chrono::steady_clock::now();
  try {
    ProcessGroup::create_world(store, 0, 2, options);
    ADD_FAILURE() << "rendezvous without the peer returned";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("lonely"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(CreateWorld, SizeOneGroupWorks) {
  auto store = std::make_shared<HashStore>();
  ProcessGroupOptions options;
  options.single_node = true;
  auto world = ProcessGroup::create_world(store, 0, 1, options);
  EXPECT_EQ(world->name(), "world");
  EXPECT_EQ(world->world_ranks(), std::vector<int>{0});
  float data[3] = {1, 2, 3}, out[3] = {};
  world->all_reduce(data, out, 3, DType::Float32);
  EXPECT_EQ(out[2], 3.f);
  world->barrier();
  auto sub = world->new_group({0});
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->name(), "world/1");
  sub->all_gather(data, out, 3, DType::Float32);
  EXPECT_EQ(out[1], 2.f);
  world->store()->set("k", "v");
  EXPECT_EQ(world->store()->get("k"), "v");
  EXPECT_NE(sub->store()->check({"k"}), true);  // each group has its own namespace
  world->destroy();
  EXPECT_THROW(world->barrier(), DistributedError);
  sub->barrier();  // the sub-group keeps the shared transport alive
}

}  // namespace
}  // namespace groupcoord
