// Errors of the "cuda" communicator: bad arguments are std::invalid_argument naming the group,
// the op and the value; a peer that stops taking part makes the other rank throw TimeoutError
// within the group's timeout instead of hanging; a destroyed communicator throws
// DistributedError.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <thread>

#include "cuda_fixture.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/errors.h"
#include "groupcoord/store.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaFailures : public CudaCommTest {};

// Sets `key` in the store when the waiting rank leaves its branch, however it leaves it, so that
// the other rank (which stopped taking part) goes on to the teardown.
class SignalOnExit {
 public:
  SignalOnExit(Store& store, std::string key, bool waiting)
      : store_(store), key_(std::move(key)), waiting_(waiting) {}
  ~SignalOnExit() {
    if (waiting_) store_.set(key_, "1");
  }
  SignalOnExit(const SignalOnExit&) = delete;
  SignalOnExit& operator=(const SignalOnExit&) = delete;

 private:
  Store& store_;
  std::string key_;
  bool waiting_;
};

using Clock = std::chrono::steady_clock;

TEST_F(CudaFailures, HostTensorsAreRejected) {
  const Tensor host = Tensor::empty({4}, DType::Float32);
  expect_invalid_argument([&] { comm().all_reduce(host); },
                          {kCudaGroupName, "all_reduce", "must be a CUDA tensor", "device=cpu"});
  expect_invalid_argument([&] { comm().all_gather(host, 0); }, {"all_gather", "device=cpu"});
  expect_invalid_argument([&] { comm().broadcast(host, 0); }, {"broadcast", "device=cpu"});
  expect_invalid_argument([&] { comm().all_gatherv(host, 0); }, {"all_gatherv", "device=cpu"});
}

TEST_F(CudaFailures, BadDimsAndShapesAreRejected) {
  const Tensor x = device_floats({3, 4}, device(), [](std::int64_t) { return 0; });
  expect_invalid_argument([&] { comm().all_gather(x, 2); },
                          {kCudaGroupName, "all_gather", "dim 2"});
  expect_invalid_argument([&] { comm().gather(x, group_size(), 0); }, {"gather", "dst"});
  if (group_size() > 1) {
    const Tensor odd = device_floats({3}, device(), [](std::int64_t) { return 0; });
    expect_invalid_argument([&] { comm().reduce_scatter(odd, 0); },
                            {"reduce_scatter", "size 3", "not divisible"});
  }
}

TEST_F(CudaFailures, DestroyedCommunicatorThrowsDistributedError) {
  std::unique_ptr<CudaCommunicator> c =
      make_communicator("cudatest-destroy", std::chrono::seconds(60));
  const Tensor x = device_floats({8}, device(), [](std::int64_t) { return 1; });
  EXPECT_EQ(host_values(c->all_reduce(x))[0], group_size());
  c->destroy();
  c->destroy();  // idempotent
  try {
    c->all_reduce(x);
    FAIL() << "expected DistributedError";
  } catch (const TimeoutError& e) {
    FAIL() << "expected a plain DistributedError, got TimeoutError: " << e.what();
  } catch (const DistributedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("cudatest-destroy all_reduce"), std::string::npos) << message;
    EXPECT_NE(message.find("destroyed"), std::string::npos) << message;
  }
}

TEST_F(CudaFailures, APeerThatStopsMakesTheOtherRankTimeOut) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr auto kTimeout = std::chrono::seconds(5);
  std::unique_ptr<CudaCommunicator> c = make_communicator("cudatest-hang", kTimeout);
  const Tensor x = device_floats({1 << 20}, device(), [](std::int64_t) { return 1; });
  // Warm up: every rank takes part once, so the failure below is about the missing peer only.
  EXPECT_EQ(host_values(c->all_reduce(x))[0], world_size());
  const bool waiting_rank = c->rank_in_group() == 0;
  SignalOnExit done(*store(), "hang/done", waiting_rank);
  if (waiting_rank) {
    const auto start = Clock::now();
    try {
      // The peer never joins this all_reduce. Whether NCCL notices while issuing it or the
      // watchdog notices while we wait, a TimeoutError must come within the timeout.
      const Tensor out = c->all_reduce(x);
      c->synchronize();
      ADD_FAILURE() << "synchronize returned although a peer never joined the all_reduce";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cudatest-hang"), std::string::npos) << message;
      EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    EXPECT_GE(waited, kTimeout - std::chrono::milliseconds(100));
    EXPECT_LT(waited, kTimeout + std::chrono::seconds(5)) << "raised late";
    // The communicator is broken now: the next call fails at once, naming the group and op.
    try {
      c->all_reduce(x);
      ADD_FAILURE() << "the next call after the abort did not throw";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cudatest-hang all_reduce"), std::string::npos) << message;
      EXPECT_NE(message.find("aborted"), std::string::npos) << message;
    }
  } else {
    // Stop taking part until the waiting rank has seen its error.
    store()->wait({"hang/done"}, std::chrono::seconds(60));
  }
  const auto start = Clock::now();
  c->destroy();  // bounded on both sides, broken or not
  EXPECT_LT(Clock::now() - start, kTimeout + std::chrono::seconds(5)) << "teardown was slow";
}

// The hot path: calls into caller-provided outputs that return at once, and the caller then waits
// on its own stream (not through groupcoord). The watchdog alone must abort the communicator
// within the timeout, so that the stream drains instead of hanging, and the next call throws.
TEST_F(CudaFailures, APeerThatStopsDrainsTheCallersOwnStreamWait) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr auto kTimeout = std::chrono::seconds(5);
  std::unique_ptr<CudaCommunicator> c = make_communicator("cudatest-fast", kTimeout);
  const Tensor x = device_floats({1 << 16}, device(), [](std::int64_t) { return 1; });
  Tensor out = Tensor::empty(x.shape(), x.dtype(), device());
  c->all_reduce(x, out);
  EXPECT_EQ(host_values(out)[0], world_size());
  const bool waiting_rank = c->rank_in_group() == 0;
  SignalOnExit done(*store(), "fast/done", waiting_rank);
  if (waiting_rank) {
    const auto start = Clock::now();
    for (int i = 0; i < 3; ++i) c->all_reduce(x, out);  // the peer joins none of them
    cudaStream_t stream = current_cuda_stream(device());
    // Bounded polling rather than cudaStreamSynchronize, so that a failure cannot hang the suite.
    cudaError_t state = cudaErrorNotReady;
    while ((state = cudaStreamQuery(stream)) == cudaErrorNotReady &&
           Clock::now() - start < kTimeout + std::chrono::seconds(20)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    (void)cudaGetLastError();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    EXPECT_NE(state, cudaErrorNotReady) << "the stream still runs the hung all_reduce";
    EXPECT_GE(waited, kTimeout - std::chrono::milliseconds(100));
    EXPECT_LT(waited, kTimeout + std::chrono::seconds(5)) << "the watchdog aborted late";
    expect_error<TimeoutError>([&] { c->all_reduce(x, out); },
                               {"cudatest-fast all_reduce", "aborted"});
  } else {
    store()->wait({"fast/done"}, std::chrono::seconds(60));
  }
  const auto start = Clock::now();
  c->destroy();
  EXPECT_LT(Clock::now() - start, kTimeout + std::chrono::seconds(5)) << "teardown was slow";
}

// The first call of a fresh communicator makes NCCL set up its connections on the host, inside
// the call: a peer that never joins leaves the caller inside NCCL (not on the GPU), and the
// watchdog must get it out within the timeout.
TEST_F(CudaFailures, APeerThatNeverJoinsTheFirstCallMakesTheOtherRankTimeOut) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  constexpr auto kTimeout = std::chrono::seconds(5);
  std::unique_ptr<CudaCommunicator> c = make_communicator("cudatest-cold", kTimeout);
  const Tensor x = device_floats({1 << 16}, device(), [](std::int64_t) { return 1; });
  const bool waiting_rank = c->rank_in_group() == 0;
  SignalOnExit done(*store(), "cold/done", waiting_rank);
  if (waiting_rank) {
    const auto start = Clock::now();
    try {
      const Tensor out = c->all_reduce(x);
      c->synchronize();
      ADD_FAILURE() << "the first all_reduce completed although a peer never joined it";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("cudatest-cold"), std::string::npos) << message;
      EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    EXPECT_GE(waited, kTimeout - std::chrono::milliseconds(100));
    EXPECT_LT(waited, kTimeout + std::chrono::seconds(5)) << "raised late";
    expect_error<TimeoutError>([&] { c->all_reduce(x); }, {"cudatest-cold all_reduce", "aborted"});
  } else {
    store()->wait({"cold/done"}, std::chrono::seconds(60));
  }
  const auto start = Clock::now();
  c->destroy();
  EXPECT_LT(Clock::now() - start, kTimeout + std::chrono::seconds(5)) << "teardown was slow";
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
