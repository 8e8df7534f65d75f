// Every DType through the "cuda" communicator, against host references: sums (bool sums as
// logical or; fp8 only where the loaded NCCL has fp8 types, else a clear std::invalid_argument),
// gathers, broadcasts and point-to-point transfers.
#include <gtest/gtest.h>

#include "cuda/nccl/nccl_dtype.h"
#include "cuda_fixture.h"
#include "groupcoord/cuda/runtime.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaDTypes : public CudaCommTest {};

constexpr std::int64_t kCount = 96;  // divisible by 1 and 2 ranks

// Element i of group rank r's input: 0, 1 or 2 (exact in every type; sums of 2 ranks <= 4).
double element(DType dtype, int r, std::int64_t i) {
  if (dtype == DType::Bool) return (r + i) % 2;
  return (r + i) % 3;
}

double sum_over_ranks(DType dtype, int n, std::int64_t i) {
  double total = 0;
  for (int q = 0; q < n; ++q) total += element(dtype, q, i);
  return dtype == DType::Bool ? (total > 0 ? 1 : 0) : total;
}

bool nccl_sums(DType dtype) {
  const bool fp8 = dtype == DType::Float8E4M3 || dtype == DType::Float8E5M2;
  return !fp8 || nccl_runtime_version() >= cuda::kNcclFp8Version;
}

TEST_F(CudaDTypes, AllReduceAndReduceScatter) {
  const int r = group_rank();
  const int n = group_size();
  for (int k = 0; k < kNumDTypes; ++k) {
    const DType dtype = all_dtypes()[k];
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = device_tensor({kCount}, dtype, device(),
                                   [&](std::int64_t i) { return element(dtype, r, i); });
    if (!nccl_sums(dtype)) {
      expect_invalid_argument([&] { comm().all_reduce(x); },
                              {kCudaGroupName, "all_reduce", "2.24"});
      expect_invalid_argument([&] { comm().reduce_scatter(x, 0); }, {"reduce_scatter", "2.24"});
      continue;
    }
    const Tensor sum = comm().all_reduce(x);
    ASSERT_EQ(sum.dtype(), dtype);
    const std::vector<double> got = host_values(sum);
    for (std::int64_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], sum_over_ranks(dtype, n, i)) << i;
    const Tensor part = comm().reduce_scatter(x, 0);
    const std::vector<double> got_part = host_values(part);
    const std::int64_t chunk = kCount / n;
    ASSERT_EQ(got_part.size(), static_cast<std::size_t>(chunk));
    for (std::int64_t j = 0; j < chunk; ++j) {
      ASSERT_EQ(got_part[j], sum_over_ranks(dtype, n, r * chunk + j)) << j;
    }
  }
}

TEST_F(CudaDTypes, AllGatherAndBroadcast) {
  const int r = group_rank();
  const int n = group_size();
  for (int k = 0; k < kNumDTypes; ++k) {
    const DType dtype = all_dtypes()[k];
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = device_tensor({2, kCount / 2}, dtype, device(),
                                   [&](std::int64_t i) { return element(dtype, r, i); });
    const Tensor gathered = comm().all_gather(x, 1);
    ASSERT_EQ(gathered.shape(), (Shape{2, kCount / 2 * n}));
    const std::vector<double> got = host_values(gathered);
    for (std::int64_t i = 0; i < gathered.numel(); ++i) {
      const auto c = unravel(i, gathered.shape());
      const int owner = static_cast<int>(c[1] / (kCount / 2));
      ASSERT_EQ(got[i], element(dtype, owner, c[0] * (kCount / 2) + c[1] % (kCount / 2))) << i;
    }
    const int root = n - 1;
    Tensor b = x.clone();
    comm().broadcast(b, root);
    const std::vector<double> got_b = host_values(b);
    for (std::int64_t i = 0; i < kCount; ++i) ASSERT_EQ(got_b[i], element(dtype, root, i)) << i;
  }
}

TEST_F(CudaDTypes, SendRecvRing) {
  if (group_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int r = group_rank();
  const int n = group_size();
  for (int k = 0; k < kNumDTypes; ++k) {
    const DType dtype = all_dtypes()[k];
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor x = device_tensor({kCount}, dtype, device(),
                                   [&](std::int64_t i) { return element(dtype, r, i); });
    // Even ranks send first; with 2 ranks that orders the pair (NCCL send/recv pair up).
    const int prev = (r + n - 1) % n;
    Tensor got_tensor;
    if (r % 2 == 0) {
      comm().send(x);
      got_tensor = comm().recv({kCount}, dtype);
    } else {
      got_tensor = comm().recv({kCount}, dtype);
      comm().send(x);
    }
    const std::vector<double> got = host_values(got_tensor);
    for (std::int64_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], element(dtype, prev, i)) << i;
  }
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
