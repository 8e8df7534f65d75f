// Uniform collectives of the "cuda" communicator (cases of vLLM's test_pynccl.py, plus dims 0, 1
// and 2 of 3-d tensors), checked against values every rank computes for every other rank.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "cuda_fixture.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaCollectives : public CudaCommTest {};

// Element of group rank r's 3-d input at (a, b, c): unique per rank and position, exact in f32.
double value3(int r, std::int64_t a, std::int64_t b, std::int64_t c) {
  return r * 1000 + a * 100 + b * 10 + c;
}

TEST_F(CudaCollectives, AllReduceOfOnesIsTheWorldSize) {
  const Tensor ones = device_floats({16, 1024, 1024}, device(), [](std::int64_t) { return 1; });
  const Tensor out = comm().all_reduce(ones);
  EXPECT_EQ(out.shape(), ones.shape());
  EXPECT_EQ(out.device(), device());
  EXPECT_NE(out.data_ptr(), ones.data_ptr()) << "out of place";
  const std::vector<double> got = host_values(out);
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], group_size()) << "element " << i;
  }
  const std::vector<double> input = host_values(ones);
  EXPECT_EQ(input[0], 1) << "the input is left alone";
}

TEST_F(CudaCollectives, AllReduceOfAStridedView) {
  const int r = group_rank();
  const Tensor base = device_floats({8, 6}, device(), [&](std::int64_t i) { return r * 100 + i; });
  const Tensor view = base.movedim(0, 1);  // [6, 8], element (a, b) = base(b, a)
  const Tensor out = comm().all_reduce(view);
  ASSERT_EQ(out.shape(), (Shape{6, 8}));
  const std::vector<double> got = host_values(out);
  const int n = group_size();
  for (int a = 0; a < 6; ++a) {
    for (int b = 0; b < 8; ++b) {
      const double expected = 100.0 * n * (n - 1) / 2 + n * (b * 6 + a);
      ASSERT_EQ(got[a * 8 + b], expected) << "(" << a << ", " << b << ")";
    }
  }
}

TEST_F(CudaCollectives, AllGatherOfArange) {
  const int r = group_rank();
  const Tensor x = device_floats({1000}, device(), [&](std::int64_t i) { return i + r * 1000; });
  const Tensor out = comm().all_gather(x, 0);
  ASSERT_EQ(out.shape(), (Shape{1000 * group_size()}));
  const std::vector<double> got = host_values(out);
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(got[i], static_cast<double>(i)) << "element " << i;
}

TEST_F(CudaCollectives, ReduceScatterOfArange) {
  const int r = group_rank();
  const int n = group_size();
  const Tensor x = device_floats({1000}, device(), [&](std::int64_t i) { return i + r * 1000; });
  const Tensor out = comm().reduce_scatter(x, 0);
  const std::int64_t chunk = 1000 / n;
  ASSERT_EQ(out.shape(), (Shape{chunk}));
  const std::vector<double> got = host_values(out);
  for (std::int64_t j = 0; j < chunk; ++j) {
    const double expected = n * (r * chunk + j) + 1000.0 * n * (n - 1) / 2;
    ASSERT_EQ(got[j], expected) << "element " << j;
  }
}

TEST_F(CudaCollectives, AllGatherAlongEachDimOf3d) {
  const Shape shape{2, 3, 4};
  const int r = group_rank();
  const int n = group_size();
  const Tensor x = device_floats(shape, device(), [&](std::int64_t i) {
    const auto c = unravel(i, shape);
    return value3(r, c[0], c[1], c[2]);
  });
  for (int dim : {0, 1, 2, -1}) {
    const int d = dim < 0 ? dim + 3 : dim;
    const Tensor out = comm().all_gather(x, dim);
    Shape expected_shape = shape;
    expected_shape[d] *= n;
    ASSERT_EQ(out.shape(), expected_shape) << "dim " << dim;
    const std::vector<double> got = host_values(out);
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      auto c = unravel(i, expected_shape);
      const int owner = static_cast<int>(c[d] / shape[d]);
      c[d] %= shape[d];
      ASSERT_EQ(got[i], value3(owner, c[0], c[1], c[2])) << "dim " << dim << " element " << i;
    }
  }
}

TEST_F(CudaCollectives, ReduceScatterAlongEachDimOf3d) {
  const Shape shape{4, 6, 8};  // every dim divides by 1 and 2 ranks
  const int r = group_rank();
  const int n = group_size();
  const Tensor x = device_floats(shape, device(), [&](std::int64_t i) {
    const auto c = unravel(i, shape);
    return value3(r, c[0], c[1], c[2]);
  });
  for (int dim : {0, 1, 2, -1}) {
    const int d = dim < 0 ? dim + 3 : dim;
    const Tensor out = comm().reduce_scatter(x, dim);
    Shape expected_shape = shape;
    expected_shape[d] /= n;
    ASSERT_EQ(out.shape(), expected_shape) << "dim " << dim;
    const std::vector<double> got = host_values(out);
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      auto c = unravel(i, expected_shape);
      c[d] += r * expected_shape[d];  // this rank's slice of the summed tensor
      double expected = 0;
      for (int q = 0; q < n; ++q) expected += value3(q, c[0], c[1], c[2]);
      ASSERT_EQ(got[i], expected) << "dim " << dim << " element " << i;
    }
  }
}

TEST_F(CudaCollectives, BroadcastFromEachRoot) {
  const int r = group_rank();
  for (int root = 0; root < group_size(); ++root) {
    Tensor t = device_floats({3, 5}, device(), [&](std::int64_t i) { return r * 100 + i; });
    const Tensor out = comm().broadcast(t, root);
    EXPECT_EQ(out.data_ptr(), t.data_ptr()) << "in place";
    const std::vector<double> got = host_values(t);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], static_cast<double>(root * 100 + i)) << "root " << root << " element " << i;
    }
  }
}

TEST_F(CudaCollectives, BroadcastIntoAStridedView) {
  const int r = group_rank();
  const Tensor base = device_floats({4, 3}, device(), [&](std::int64_t i) { return r * 100 + i; });
  comm().broadcast(base.narrow(1, 0, 2), 0);  // columns 0 and 1 only
  const std::vector<double> got = host_values(base);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 3; ++b) {
      const int owner = b < 2 ? 0 : r;
      ASSERT_EQ(got[a * 3 + b], owner * 100 + a * 3 + b) << "(" << a << ", " << b << ")";
    }
  }
}

TEST_F(CudaCollectives, GatherToEachRankAlongDims) {
  const Shape shape{2, 3, 4};
  const int r = group_rank();
  const int n = group_size();
  const Tensor x = device_floats(shape, device(), [&](std::int64_t i) {
    const auto c = unravel(i, shape);
    return value3(r, c[0], c[1], c[2]);
  });
  for (int dst = 0; dst < n; ++dst) {
    for (int dim : {0, 2}) {
      const std::optional<Tensor> out = comm().gather(x, dst, dim);
      ASSERT_EQ(out.has_value(), r == dst) << "dst " << dst;
      if (!out) continue;
      Shape expected_shape = shape;
      expected_shape[dim] *= n;
      ASSERT_EQ(out->shape(), expected_shape);
      const std::vector<double> got = host_values(*out);
      for (std::int64_t i = 0; i < out->numel(); ++i) {
        auto c = unravel(i, expected_shape);
        const int owner = static_cast<int>(c[dim] / shape[dim]);
        c[dim] %= shape[dim];
        ASSERT_EQ(got[i], value3(owner, c[0], c[1], c[2])) << "dst " << dst << " dim " << dim;
      }
    }
  }
}

TEST_F(CudaCollectives, WorksOnACallerStream) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  {
    CudaStreamGuard guard(device(), stream);
    const Tensor x = device_floats({256}, device(), [&](std::int64_t i) { return i; });
    const Tensor out = comm().all_reduce(x);
    const std::vector<double> got = host_values(out);  // waits for `stream`, the current one
    for (std::size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], static_cast<double>(group_size() * i));
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
