// Bad input raises std::invalid_argument naming the group, the op and the value, without
// touching the group (every rank passes the same bad value, so the group stays in step); an
// absent rank makes the others fail with TimeoutError, and everything still shuts down cleanly.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/errors.h"

namespace groupcoord {
namespace testing {
namespace {

class CoordinatorErrors : public CoordinatorTest {};

using Clock = std::chrono::steady_clock;

Tensor ones(const Shape& shape) {
  return make_tensor(shape, DType::Float32, [](std::int64_t) { return 1.0; });
}

// Symmetric memory belongs to the cuda communicator: a gloo coordinator says so (naming the
// group and the backend); at world size 1 there is no communicator and a plain tensor serves.
TEST_F(CoordinatorErrors, SymmetricMemoryIsCudaOnly) {
  GroupCoordinator& c = reversed_coord();
  const SymmetricMemoryStats stats = c.symmetric_memory_stats();
  EXPECT_FALSE(stats.enabled);
  EXPECT_EQ(stats.windows_registered, 0);
  if (c.world_size() == 1) {
    EXPECT_NE(stats.disabled_reason.find("world size 1"), std::string::npos);
    const Tensor t = c.symmetric_empty({3, 4}, DType::BFloat16);
    EXPECT_EQ(t.shape(), (Shape{3, 4}));
    EXPECT_EQ(t.dtype(), DType::BFloat16);
    c.reserve_symmetric_scratch(1 << 20);  // nothing to reserve
    return;
  }
  EXPECT_NE(stats.disabled_reason.find("cpu"), std::string::npos) << stats.disabled_reason;
  expect_invalid_argument([&] { c.symmetric_empty({4}, DType::Float32); },
                          {c.unique_name(), "symmetric_empty", "nccl backend", "gloo"});
  expect_invalid_argument([&] { c.reserve_symmetric_scratch(1 << 20); },
                          {c.unique_name(), "reserve_symmetric_scratch", "nccl backend"});
}

TEST_F(CoordinatorErrors, BadArgumentsNameGroupOpAndValue) {
  GroupCoordinator& c = reversed_coord();
  const std::string name = c.unique_name();
  const int n = c.world_size();
  const int me = c.rank_in_group();
  const Tensor t = ones({2, 3, 4});
  const std::string ws = std::to_string(n);

  if (n > 1) {  // at world size 1 these return their input, as in vLLM
    expect_invalid_argument([&] { c.all_gather(t, 3); },
                            {name, "all_gather", "dim 3", "out of range"});
    expect_invalid_argument([&] { c.all_gather(t, -4); }, {name, "all_gather", "dim -4"});
    expect_invalid_argument([&] { c.reduce_scatter(t, 5); }, {name, "reduce_scatter", "dim 5"});
    expect_invalid_argument(
        [&] {
          c.reduce_scatter(ones({3, 2}), 0);
        },
        {name, "reduce_scatter", "size 3", "not divisible", ws});
    expect_invalid_argument([&] { c.gather(t, 0, 3); }, {name, "gather", "dim 3"});
    // v-variants: wrong length, negative entry, wrong own size, wrong sum.
    std::vector<std::int64_t> too_long(n + 1, 2);
    expect_invalid_argument(
        [&] {
          c.all_gatherv(ones({2, 3}), 0, too_long);
        },
        {name, "all_gatherv", "entries", ws});
    std::vector<std::int64_t> negative(n, 2);
    negative[0] = -1;
    expect_invalid_argument(
        [&] {
          c.all_gatherv(ones({2, 3}), 0, negative);
        },
        {name, "all_gatherv", "negative", "-1"});
    std::vector<std::int64_t> wrong_own(n, 5);
    expect_invalid_argument(
        [&] {
          c.all_gatherv(ones({2, 3}), 0, wrong_own);
        },
        {name, "all_gatherv", "has 5", "has 2"});
    std::vector<std::int64_t> wrong_sum(n, 1);
    expect_invalid_argument(
        [&] {
          c.reduce_scatterv(ones({n + 1, 3}), 0, wrong_sum);
        },
        {name, "reduce_scatterv", "sum to " + ws, "has " + std::to_string(n + 1)});
    expect_invalid_argument(
        [&] {
          c.reduce_scatterv(ones({2, 3}), 0, too_long);
        },
        {name, "reduce_scatterv", "entries"});
    expect_invalid_argument(
        [&] {
          c.all_gatherv(ones({2, 3}), 2);
        },
        {name, "all_gatherv", "dim 2"});
    // Point to point: out of range, or this rank itself.
    expect_invalid_argument([&] { c.send(t, me); },
                            {name, "send", "dst " + std::to_string(me), "itself"});
    expect_invalid_argument([&] { c.send(t, n); }, {name, "send", "dst " + ws, "out of range"});
    expect_invalid_argument([&] { c.recv({2}, DType::Float32, -1); }, {name, "recv", "src -1"});
    expect_invalid_argument([&] { c.isend_tensor_dict({}, me); },
                            {name, "isend_tensor_dict", "dst " + std::to_string(me), "itself"});
    expect_invalid_argument([&] { c.recv_tensor_dict(me); },
                            {name, "recv_tensor_dict", "src " + std::to_string(me)});
    expect_invalid_argument([&] { c.send_object("x", me); }, {name, "send_object", "itself"});
    expect_invalid_argument([&] { c.recv_object(me); }, {name, "recv_object", "itself"});
    expect_invalid_argument([&] { c.isend_object("x", me); }, {name, "isend_object", "itself"});
  }
  expect_invalid_argument([&] { c.gather(t, n); }, {name, "gather", "dst " + ws, "out of range"});
  expect_invalid_argument([&] { c.gather(t, -1); }, {name, "gather", "dst -1"});
  expect_invalid_argument([&] { c.broadcast(t, n); }, {name, "broadcast", "src " + ws});
  expect_invalid_argument([&] { c.broadcast_object(Bytes("x"), n); },
                          {name, "broadcast_object", "src " + ws});
  expect_invalid_argument([&] { c.broadcast_object_list({"x"}, -2); },
                          {name, "broadcast_object_list", "src -2"});
  expect_invalid_argument([&] { c.broadcast_tensor_dict(TensorDict{}, n); },
                          {name, "broadcast_tensor_dict", "src " + ws});
  expect_invalid_argument([&] { c.send_object("x", n); }, {name, "send_object", "dst " + ws});
  expect_invalid_argument([&] { c.recv_object(n); }, {name, "recv_object", "src " + ws});
  expect_invalid_argument([&] { c.send_tensor_dict({}, n); },
                          {name, "send_tensor_dict", "dst " + ws});
  expect_invalid_argument([&] { c.irecv_tensor_dict(-1); }, {name, "irecv_tensor_dict", "src -1"});

  // Errors only the source can see: the source raises the error, the ranks waiting for it are
  // told (DistributedError carrying the source's message) and the group stays in step.
  std::vector<std::pair<std::string, std::function<void()>>> source_only = {
      {"no object", [&] { c.broadcast_object(std::nullopt, 0); }}};
  if (n > 1) {  // at world size 1 vLLM hands the dict (or None) back
    source_only.emplace_back("no tensor dict", [&] { c.broadcast_tensor_dict(std::nullopt, 0); });
    source_only.emplace_back("twice", [&] {
      c.broadcast_tensor_dict(TensorDict{{"k", t}, {"k", Bytes("again")}}, 0);
    });
  }
  for (const auto& [error, call] : source_only) {
    if (me == 0) {
      expect_invalid_argument(call, {name, error});
    } else {
      expect_error<SourceFailedError>(call, {name, "src 0 failed instead of sending", error});
    }
  }
  if (n > 1) {
    // Point to point: rank 0 tells the next rank, which receives the failure.
    if (me == 0) {
      expect_invalid_argument(
          [&] {
            c.send_tensor_dict({{"u", Tensor()}});
          },
          {name, "isend_tensor_dict", "'u'", "undefined"});
    } else if (me == 1) {
      expect_error<SourceFailedError>([&] { c.recv_tensor_dict(0); },
                                      {name, "src 0 failed instead of sending", "'u'"});
    }
  }
  // The group is still in step.
  EXPECT_EQ(c.broadcast_object(me == 0 ? std::optional<Bytes>("in step") : std::nullopt),
            "in step");
  c.barrier();
}

TEST_F(CoordinatorErrors, AbsentRankMakesTheOthersTimeOut) {
  if (world_size() < 2) GTEST_SKIP() << "needs a peer to be absent";
  const auto timeout = std::chrono::seconds(5);  // the configured timeout
  GroupCoordinator c(world_layout(world_size()), local_rank(), "gloo", true, false, "short", false,
                     std::chrono::milliseconds(timeout));
  const int absent = world_size() - 1;
  if (rank() != absent) {
    // The device group (through the communicator) ...
    auto start = Clock::now();
    expect_error<TimeoutError>([&] { c.all_reduce(ones({16})); }, {"short:0"});
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(waited, 4.5);
    EXPECT_LT(waited, 15.0);
    // ... and the CPU group.
    start = Clock::now();
    expect_error<TimeoutError>([&] { c.broadcast_object(std::nullopt, absent); }, {"short:0"});
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 15.0);
  }
  // The absent rank waits on the healthy harness world until the others have timed out, so its
  // connections stay open meanwhile; then everybody tears the coordinator down.
  world()->barrier();
  c.destroy();
  c.destroy();
  EXPECT_EQ(GroupCoordinator::find("short:0"), nullptr);
  // The shared coordinators are unaffected.
  world_coord().barrier();
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
