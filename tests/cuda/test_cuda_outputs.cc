// Caller-provided outputs of the "cuda" communicator: all_reduce / all_gather / reduce_scatter
// write into `out` (returned as is), allocate nothing on the CUDA allocator for contiguous inputs
// along dim 0 (a counting allocator wraps the installed one), give the same values as the host
// references, and a wrong `out` is refused before anything is enqueued.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "cuda_fixture.h"
#include "cuda_values.h"
#include "groupcoord/allocator.h"

namespace groupcoord {
namespace testing {
namespace {

/// Counts allocations on the CUDA allocator while installed, forwarding to the one it replaced.
class CountingCudaAllocator final : public Allocator {
 public:
  explicit CountingCudaAllocator(std::shared_ptr<Allocator> inner) : inner_(std::move(inner)) {}
  void* allocate(std::size_t nbytes, Device device) override {
    ++count;
    return inner_->allocate(nbytes, device);
  }
  void deallocate(void* ptr, std::size_t nbytes, Device device) override {
    inner_->deallocate(ptr, nbytes, device);
  }
  std::atomic<int> count{0};

 private:
  std::shared_ptr<Allocator> inner_;
};

class CudaAllocationCounter {
 public:
  CudaAllocationCounter()
      : previous_(get_allocator(DeviceType::CUDA)),
        counting_(std::make_shared<CountingCudaAllocator>(previous_)) {
    set_allocator(DeviceType::CUDA, counting_);
  }
  ~CudaAllocationCounter() { set_allocator(DeviceType::CUDA, previous_); }
  int count() const { return counting_->count.load(); }

 private:
  std::shared_ptr<Allocator> previous_;
  std::shared_ptr<CountingCudaAllocator> counting_;
};

class CudaOutputs : public CudaCommTest {};

// Rank r's input element i.
double value(int r, std::int64_t i) { return 1 + r * 3 + (i % 17); }

TEST_F(CudaOutputs, IntoOutWithoutAllocating) {
  const int n = group_size();
  const int r = group_rank();
  const std::int64_t e = 4 * n;
  const Tensor x = device_floats({e}, device(), [&](std::int64_t i) { return value(r, i); });
  const Tensor reduced = device_floats({e}, device(), [](std::int64_t) { return -1; });
  const Tensor gathered = device_floats({e * n}, device(), [](std::int64_t) { return -1; });
  const Tensor scattered = device_floats({e / n}, device(), [](std::int64_t) { return -1; });
  comm().all_reduce(x, reduced);  // warm-up outside the count (NCCL connections)
  int allocations = 0;
  {
    CudaAllocationCounter counter;
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(comm().all_reduce(x, reduced).data_ptr(), reduced.data_ptr());
      EXPECT_EQ(comm().all_gather(x, 0, gathered).data_ptr(), gathered.data_ptr());
      EXPECT_EQ(comm().reduce_scatter(x, 0, scattered).data_ptr(), scattered.data_ptr());
    }
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0) << "30 calls with out= allocated";
  const std::vector<double> sum = host_values(reduced);
  const std::vector<double> cat = host_values(gathered);
  const std::vector<double> part = host_values(scattered);
  for (std::int64_t i = 0; i < e; ++i) {
    double expected = 0;
    for (int q = 0; q < n; ++q) expected += value(q, i);
    ASSERT_EQ(sum[i], expected) << "all_reduce element " << i;
    if (i / (e / n) == r) ASSERT_EQ(part[i % (e / n)], expected) << "reduce_scatter " << i;
  }
  for (std::int64_t i = 0; i < e * n; ++i) {
    ASSERT_EQ(cat[i], value(static_cast<int>(i / e), i % e)) << "all_gather element " << i;
  }
}

TEST_F(CudaOutputs, InPlaceAndAlongOtherDims) {
  const int n = group_size();
  const int r = group_rank();
  const Tensor x = device_floats({3, 2}, device(), [&](std::int64_t i) { return value(r, i); });
  const Tensor gathered = device_floats({3, 2 * n}, device(), [](std::int64_t) { return -1; });
  comm().all_gather(x, -1, gathered);
  const std::vector<double> cat = host_values(gathered);
  for (std::int64_t row = 0; row < 3; ++row) {
    for (std::int64_t col = 0; col < 2 * n; ++col) {
      ASSERT_EQ(cat[row * 2 * n + col], value(static_cast<int>(col / 2), row * 2 + col % 2));
    }
  }
  Tensor y = device_floats({5}, device(), [&](std::int64_t i) { return value(r, i); });
  comm().all_reduce(y, y);
  const std::vector<double> sum = host_values(y);
  for (std::int64_t i = 0; i < 5; ++i) {
    double expected = 0;
    for (int q = 0; q < n; ++q) expected += value(q, i);
    ASSERT_EQ(sum[i], expected);
  }
}

TEST_F(CudaOutputs, WrongOutIsRefused) {
  const Tensor x = device_floats({4}, device(), [](std::int64_t) { return 1; });
  expect_invalid_argument([&] { comm().all_reduce(x, Tensor::empty({4}, DType::Float32)); },
                          {kCudaGroupName, "all_reduce", "out must be on cuda"});
  expect_invalid_argument(
      [&] { comm().all_reduce(x, device_floats({5}, device(), [](std::int64_t) { return 0; })); },
      {kCudaGroupName, "all_reduce", "out has shape [5]"});
  expect_invalid_argument(
      [&] {
        comm().all_gather(x, 0, device_floats({3}, device(), [](std::int64_t) { return 0; }));
      },
      {kCudaGroupName, "all_gather", "out has shape [3]"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
