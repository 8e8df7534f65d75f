// Bad arguments raise std::invalid_argument naming the group, the op and the value, on every
// rank alike and before anything is sent (so the group stays in step; the last test checks it).
#include <gtest/gtest.h>

#include "comm_fixture.h"
#include "communicator/cpu_communicator.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

class CpuErrorsTest : public CommunicatorTest {
 protected:
  Tensor t234() const { return rank_tensor({2, 3, 4}, DType::Float32, group_rank()); }
};

TEST_F(CpuErrorsTest, InvalidDims) {
  const std::vector<std::string> dim3{kGroupName, "dim 3", "3-d"};
  auto with = [](std::vector<std::string> parts, const char* op) {
    parts.push_back(op);
    return parts;
  };
  expect_invalid_argument([&] { comm().all_gather(t234(), 3); }, with(dim3, "all_gather"));
  expect_invalid_argument([&] { comm().all_gather(t234(), -4); },
                          {kGroupName, "all_gather", "dim -4"});
  expect_invalid_argument([&] { comm().reduce_scatter(t234(), 3); }, with(dim3, "reduce_scatter"));
  expect_invalid_argument([&] { comm().gather(t234(), 0, 3); }, with(dim3, "gather"));
  expect_invalid_argument([&] { comm().all_gatherv(t234(), 3); }, with(dim3, "all_gatherv"));
  expect_invalid_argument([&] { comm().reduce_scatterv(t234(), 3); },
                          with(dim3, "reduce_scatterv"));
  const Tensor scalar = Tensor::empty({}, DType::Float32);
  expect_invalid_argument([&] { comm().all_gather(scalar); },
                          {kGroupName, "all_gather", "dim -1", "0-d"});
}

TEST_F(CpuErrorsTest, PeersOutOfRangeOrSelf) {
  const int n = group_size();
  const std::string n_text = std::to_string(n);
  expect_invalid_argument([&] { comm().gather(t234(), n); },
                          {kGroupName, "gather", "dst " + n_text});
  expect_invalid_argument([&] { comm().broadcast(t234(), -1); },
                          {kGroupName, "broadcast", "src -1"});
  expect_invalid_argument([&] { comm().send(t234(), n); }, {kGroupName, "send", "dst " + n_text});
  const std::string self = std::to_string(group_rank());
  expect_invalid_argument([&] { comm().send(t234(), group_rank()); },
                          {kGroupName, "send", "dst " + self, "itself"});
  expect_invalid_argument([&] { comm().recv({2}, DType::Float32, group_rank()); },
                          {kGroupName, "recv", "src " + self, "itself"});
  expect_invalid_argument([&] { comm().recv({2}, DType::Float32, -2); },
                          {kGroupName, "recv", "src -2"});
  expect_invalid_argument([&] { comm().isend(t234(), -1); }, {kGroupName, "isend", "dst -1"});
  expect_invalid_argument([&] { comm().irecv(t234(), n); }, {kGroupName, "irecv", "src " + n_text});
  if (n == 1) {
    // The default peer of a one-rank group is the rank itself.
    expect_invalid_argument([&] { comm().send(t234()); }, {kGroupName, "send", "dst 0"});
  }
  if (n > 1) {
    expect_invalid_argument(
        [&] {
          comm().recv({2, -1}, DType::Float32, (group_rank() + 1) % n);
        },
        {kGroupName, "recv", "shape [2, -1]"});
  }
}

TEST_F(CpuErrorsTest, NonDivisibleReduceScatter) {
  if (group_size() == 1) GTEST_SKIP() << "every size divides by 1";
  const std::int64_t size = 2 * group_size() + 1;
  expect_invalid_argument(
      [&] {
        comm().reduce_scatter(rank_tensor({2, size}, DType::Float32, 0));
      },
      {kGroupName, "reduce_scatter", std::to_string(size), "divisible"});
  expect_invalid_argument(
      [&] {
        comm().reduce_scatterv(rank_tensor({size, 2}, DType::Float32, 0), 0);
      },
      {kGroupName, "reduce_scatterv", std::to_string(size), "divisible"});
}

TEST_F(CpuErrorsTest, BadSizes) {
  const int n = group_size();
  const Tensor input = rank_tensor({3, 2}, DType::Float32, group_rank());
  std::vector<std::int64_t> too_many(n + 1, 3);
  expect_invalid_argument([&] { comm().all_gatherv(input, 0, too_many); },
                          {kGroupName, "all_gatherv", std::to_string(n + 1) + " entries"});
  expect_invalid_argument([&] { comm().reduce_scatterv(input, 0, too_many); },
                          {kGroupName, "reduce_scatterv", std::to_string(n + 1) + " entries"});
  std::vector<std::int64_t> negative(n, 3);
  negative[0] = -3;
  expect_invalid_argument([&] { comm().all_gatherv(input, 0, negative); },
                          {kGroupName, "all_gatherv", "-3"});
  // sizes[rank] must be this rank's own size (here every rank is wrong alike).
  std::vector<std::int64_t> not_mine(n, 4);
  expect_invalid_argument([&] { comm().all_gatherv(input, 0, not_mine); },
                          {kGroupName, "all_gatherv", "has 4 along dim 0"});
  std::vector<std::int64_t> wrong_sum(n, 1);
  wrong_sum[0] = 5;
  expect_invalid_argument([&] { comm().reduce_scatterv(input, 0, wrong_sum); },
                          {kGroupName, "reduce_scatterv", "sum to " + std::to_string(n + 4)});
}

TEST_F(CpuErrorsTest, NonCpuAndUndefinedTensors) {
  float storage[6] = {};
  const Tensor on_gpu = Tensor::from_blob(storage, {2, 3}, DType::Float32, Device::cuda(0));
  expect_invalid_argument([&] { comm().all_reduce(on_gpu); }, {kGroupName, "all_reduce", "cuda:0"});
  expect_invalid_argument([&] { comm().all_gather(on_gpu, 0); },
                          {kGroupName, "all_gather", "cuda:0"});
  expect_invalid_argument([&] { comm().broadcast(on_gpu); }, {kGroupName, "broadcast", "cuda:0"});
  expect_invalid_argument(
      [&] {
        comm().all_gatherv(std::vector<Tensor>{t234(), on_gpu});
      },
      {kGroupName, "all_gatherv", "inputs[1]", "cuda:0"});
  expect_invalid_argument([&] { comm().all_reduce(Tensor()); },
                          {kGroupName, "all_reduce", "undefined"});
}

TEST_F(CpuErrorsTest, BadContexts) {
  DeviceCommunicatorContext no_group;
  no_group.unique_name = kGroupName;
  expect_invalid_argument([&] { make_cpu_communicator(no_group); },
                          {kGroupName, "neither a device_group nor a cpu_group"});
  DeviceCommunicatorContext gpu = context();
  gpu.device = Device::cuda(0);
  expect_invalid_argument([&] { make_cpu_communicator(gpu); }, {kGroupName, "cuda:0"});
  if (world_size() > 1) {
    // cpu_group in world order, device_group reversed: their ranks would not line up.
    DeviceCommunicatorContext mixed = context();
    mixed.cpu_group = world();
    expect_invalid_argument([&] { make_cpu_communicator(mixed); }, {kGroupName, "same ranks"});
  }
  // Without a device group the cpu group carries everything.
  DeviceCommunicatorContext cpu_only = context();
  cpu_only.device_group = nullptr;
  auto communicator = make_cpu_communicator(cpu_only);
  EXPECT_EQ(communicator->rank_in_group(), world_size() - 1 - rank());
  const Tensor sum = communicator->all_reduce(rank_tensor({3}, DType::Int32, 1));
  EXPECT_EQ(compare(sum, {3}, DType::Int32,
                    [&](const Shape& i) { return world_size() * datum(1, i[0]); }),
            "");
}

TEST_F(CpuErrorsTest, GroupStaysInStepAfterErrors) {
  const Tensor out = comm().all_gather(rank_tensor({2}, DType::Int64, group_rank()), 0);
  EXPECT_EQ(compare(out, {2 * group_size()}, DType::Int64,
                    [&](const Shape& i) { return datum(static_cast<int>(i[0] / 2), i[0] % 2); }),
            "");
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
