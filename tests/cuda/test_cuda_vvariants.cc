// all_gatherv / reduce_scatterv with the per-rank sizes of vLLM's test_pynccl.py, and MoE
// dispatch/combine built on them.
#include <gtest/gtest.h>

#include <numeric>

#include "cuda_fixture.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaVVariants : public CudaCommTest {
 protected:
  std::vector<std::int64_t> sizes() {
    const std::vector<std::int64_t> all{81, 20, 57, 52, 81, 5, 49, 49};
    return std::vector<std::int64_t>(all.begin(), all.begin() + group_size());
  }
  std::int64_t offset_of(int rank) {
    const auto s = sizes();
    return std::accumulate(s.begin(), s.begin() + rank, std::int64_t{0});
  }
};

constexpr int kCols = 3;

// Row i, column j of group rank r's all_gatherv input.
double row_value(int r, std::int64_t i, std::int64_t j) { return r * 10000 + i * kCols + j; }

TEST_F(CudaVVariants, AllGathervAlongDim0) {
  const int r = group_rank();
  const auto s = sizes();
  const Tensor x = device_floats(
      {s[r], kCols}, device(), [&](std::int64_t i) { return row_value(r, i / kCols, i % kCols); });
  const Tensor out = comm().all_gatherv(x, 0, s);
  const std::int64_t total = std::accumulate(s.begin(), s.end(), std::int64_t{0});
  ASSERT_EQ(out.shape(), (Shape{total, kCols}));
  const std::vector<double> got = host_values(out);
  for (int owner = 0; owner < group_size(); ++owner) {
    for (std::int64_t i = 0; i < s[owner]; ++i) {
      for (int j = 0; j < kCols; ++j) {
        ASSERT_EQ(got[(offset_of(owner) + i) * kCols + j], row_value(owner, i, j))
            << "rank " << owner << " row " << i;
      }
    }
  }
}

TEST_F(CudaVVariants, AllGathervAlongDim1OfSeveralInputs) {
  const int r = group_rank();
  const auto s = sizes();
  // [kCols, s[r]]: the varying dim is the last one.
  const Tensor a = device_floats({kCols, s[r]}, device(),
                                 [&](std::int64_t i) { return row_value(r, i % s[r], i / s[r]); });
  const Tensor b = device_tensor({2, s[r]}, DType::Int64, device(),
                                 [&](std::int64_t i) { return r * 1000 + i; });
  const std::vector<Tensor> out = comm().all_gatherv({a, b}, 1, s);
  ASSERT_EQ(out.size(), 2u);
  const std::int64_t total = std::accumulate(s.begin(), s.end(), std::int64_t{0});
  ASSERT_EQ(out[0].shape(), (Shape{kCols, total}));
  ASSERT_EQ(out[1].shape(), (Shape{2, total}));
  const std::vector<double> got_a = host_values(out[0]);
  const std::vector<double> got_b = host_values(out[1]);
  for (int owner = 0; owner < group_size(); ++owner) {
    for (std::int64_t i = 0; i < s[owner]; ++i) {
      const std::int64_t col = offset_of(owner) + i;
      for (int j = 0; j < kCols; ++j) {
        ASSERT_EQ(got_a[j * total + col], row_value(owner, i, j));
      }
      for (int j = 0; j < 2; ++j) {
        ASSERT_EQ(got_b[j * total + col], owner * 1000 + j * s[owner] + i);
      }
    }
  }
}

TEST_F(CudaVVariants, ReduceScattervAlongDim0) {
  const int r = group_rank();
  const int n = group_size();
  const auto s = sizes();
  const std::int64_t total = std::accumulate(s.begin(), s.end(), std::int64_t{0});
  const Tensor x = device_floats({total, kCols}, device(), [&](std::int64_t i) { return r + i; });
  const Tensor out = comm().reduce_scatterv(x, 0, s);
  ASSERT_EQ(out.shape(), (Shape{s[r], kCols}));
  const std::vector<double> got = host_values(out);
  for (std::int64_t i = 0; i < s[r] * kCols; ++i) {
    const std::int64_t global = offset_of(r) * kCols + i;
    ASSERT_EQ(got[i], n * global + n * (n - 1) / 2.0) << "element " << i;
  }
}

TEST_F(CudaVVariants, ReduceScattervAlongDim1) {
  const int r = group_rank();
  const int n = group_size();
  const auto s = sizes();
  const std::int64_t total = std::accumulate(s.begin(), s.end(), std::int64_t{0});
  const Tensor x = device_floats({2, total}, device(), [&](std::int64_t i) { return r + i; });
  const Tensor out = comm().reduce_scatterv(x, 1, s);
  ASSERT_EQ(out.shape(), (Shape{2, s[r]}));
  const std::vector<double> got = host_values(out);
  for (int row = 0; row < 2; ++row) {
    for (std::int64_t c = 0; c < s[r]; ++c) {
      const std::int64_t global = row * total + offset_of(r) + c;
      ASSERT_EQ(got[row * s[r] + c], n * global + n * (n - 1) / 2.0);
    }
  }
}

TEST_F(CudaVVariants, ZeroSizedRanksAreSkipped) {
  const int r = group_rank();
  const int n = group_size();
  std::vector<std::int64_t> s(n, 0);
  s[n - 1] = 4;  // only the last rank contributes
  const Tensor x = device_floats({s[r], 2}, device(), [&](std::int64_t i) { return 7 + i; });
  const Tensor out = comm().all_gatherv(x, 0, s);
  ASSERT_EQ(out.shape(), (Shape{4, 2}));
  const std::vector<double> got = host_values(out);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 7.0 + i);
}

TEST_F(CudaVVariants, DispatchThenCombine) {
  const int r = group_rank();
  const int n = group_size();
  const auto s = sizes();
  const std::int64_t total = std::accumulate(s.begin(), s.end(), std::int64_t{0});
  const Tensor hidden =
      device_floats({s[r], 4}, device(), [&](std::int64_t i) { return r * 1000 + i; });
  const Tensor weights = device_floats({s[r], 2}, device(), [&](std::int64_t i) { return r; });
  const Tensor ids =
      device_tensor({s[r], 2}, DType::Int32, device(), [&](std::int64_t i) { return i % 8; });
  const DispatchResult d = comm().dispatch(hidden, weights, ids);
  ASSERT_EQ(d.hidden_states.shape(), (Shape{total, 4}));
  ASSERT_EQ(d.topk_ids.shape(), (Shape{total, 2}));
  const std::vector<double> got = host_values(d.hidden_states);
  const std::vector<double> got_w = host_values(d.topk_weights);
  for (int owner = 0; owner < n; ++owner) {
    for (std::int64_t i = 0; i < s[owner] * 4; ++i) {
      ASSERT_EQ(got[offset_of(owner) * 4 + i], owner * 1000 + i);
    }
    for (std::int64_t i = 0; i < s[owner] * 2; ++i)
      ASSERT_EQ(got_w[offset_of(owner) * 2 + i], owner);
  }
  // Every rank "runs the experts" as the identity: the sum over ranks is n times each token.
  const Tensor combined = comm().combine(d.hidden_states);
  ASSERT_EQ(combined.shape(), (Shape{s[r], 4}));
  const std::vector<double> back = host_values(combined);
  for (std::int64_t i = 0; i < s[r] * 4; ++i) ASSERT_EQ(back[i], n * (r * 1000.0 + i));
}

TEST_F(CudaVVariants, DispatchWithABadInputFailsOnEveryRank) {
  const int r = group_rank();
  const Tensor hidden = device_floats({2, 4}, device(), [](std::int64_t) { return 0; });
  // The last rank passes router logits with a wrong row count; everybody must throw.
  const std::int64_t rows = r == group_size() - 1 ? 3 : 2;
  const Tensor logits = device_floats({rows, 8}, device(), [](std::int64_t) { return 0; });
  EXPECT_THROW(comm().dispatch_router_logits(hidden, logits), std::invalid_argument);
}

TEST_F(CudaVVariants, BadSizesAreInvalid) {
  const Tensor x = device_floats({4, 2}, device(), [](std::int64_t) { return 0; });
  std::vector<std::int64_t> wrong_count(group_size() + 1, 1);
  expect_invalid_argument([&] { comm().all_gatherv(x, 0, wrong_count); },
                          {kCudaGroupName, "all_gatherv"});
  std::vector<std::int64_t> bad_sum(group_size(), 1);
  bad_sum[0] = 5;
  expect_invalid_argument([&] { comm().reduce_scatterv(x, 0, bad_sum); },
                          {kCudaGroupName, "reduce_scatterv"});
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
