// all_reduce, all_gather, reduce_scatter, gather and broadcast of the "cpu" communicator, for
// every dim of 3-d and 4-d tensors (the dims >= 2 catch vLLM's movedim(0, dim) bug), strided
// inputs and five dtypes, against references computed from datum(rank, index).
#include <gtest/gtest.h>

#include "comm_fixture.h"
#include "groupcoord/errors.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

const DType kDTypes[] = {DType::Float32, DType::Float16, DType::BFloat16, DType::Int32,
                         DType::Int64};

class CpuCollectivesTest : public CommunicatorTest {
 protected:
  /// The value rank r's input of `shape` has at `index`.
  static double input_value(int r, const Shape& shape, const Shape& index) {
    return datum(r, ravel(index, shape));
  }

  /// Reference of a gather along wrapped dim `d` of inputs of `shape`: the concatenation.
  IndexFn concatenation(const Shape& shape, int d) const {
    return [shape, d](const Shape& index) {
      Shape local = index;
      local[d] = index[d] % shape[d];
      return input_value(static_cast<int>(index[d] / shape[d]), shape, local);
    };
  }

  /// Reference of a reduce_scatter along wrapped dim `d` of inputs of `shape`.
  IndexFn scattered_sum(const Shape& shape, int d) const {
    const int n = group_size();
    const std::int64_t chunk = shape[d] / n;
    const std::int64_t offset = chunk * group_rank();
    return [shape, d, n, offset](const Shape& index) {
      Shape full = index;
      full[d] += offset;
      double sum = 0;
      for (int r = 0; r < n; ++r) sum += input_value(r, shape, full);
      return sum;
    };
  }

  void check_all_gather(const Shape& shape, DType dtype, int dim, bool strided) {
    SCOPED_TRACE(::testing::Message()
                 << dtype_name(dtype) << " dim " << dim << (strided ? " strided" : ""));
    const Tensor input = strided ? rank_tensor_strided(shape, dtype, group_rank())
                                 : rank_tensor(shape, dtype, group_rank());
    const int d = dim < 0 ? dim + static_cast<int>(shape.size()) : dim;
    Shape out_shape = shape;
    out_shape[d] *= group_size();
    EXPECT_EQ(compare(comm().all_gather(input, dim), out_shape, dtype, concatenation(shape, d)),
              "");
  }

  void check_reduce_scatter(Shape out_shape, DType dtype, int dim, bool strided) {
    SCOPED_TRACE(::testing::Message()
                 << dtype_name(dtype) << " dim " << dim << (strided ? " strided" : ""));
    const int d = dim < 0 ? dim + static_cast<int>(out_shape.size()) : dim;
    Shape shape = out_shape;
    shape[d] *= group_size();
    const Tensor input = strided ? rank_tensor_strided(shape, dtype, group_rank())
                                 : rank_tensor(shape, dtype, group_rank());
    const Tensor out = comm().reduce_scatter(input, dim);
    EXPECT_EQ(compare(out, out_shape, dtype, scattered_sum(shape, d)), "");
    EXPECT_TRUE(out.is_contiguous());
  }
};

TEST_F(CpuCollectivesTest, AllReduceEveryDType) {
  for (DType dtype : kDTypes) {
    const Shape shape{3, 5};
    const Tensor input = rank_tensor(shape, dtype, group_rank());
    const Tensor out = comm().all_reduce(input);
    EXPECT_NE(out.data_ptr(), input.data_ptr()) << "all_reduce must be out of place";
    EXPECT_EQ(compare(out, shape, dtype,
                      [&](const Shape& index) {
                        double sum = 0;
                        for (int r = 0; r < group_size(); ++r) sum += input_value(r, shape, index);
                        return sum;
                      }),
              "")
        << dtype_name(dtype);
    // The input is untouched.
    EXPECT_EQ(compare(input, shape, dtype,
                      [&](const Shape& i) { return input_value(group_rank(), shape, i); }),
              "");
  }
}

TEST_F(CpuCollectivesTest, AllGatherEveryDimAndDType) {
  for (DType dtype : kDTypes) {
    for (int dim : {0, 1, 2, -1}) check_all_gather({2, 3, 4}, dtype, dim, false);
  }
}

TEST_F(CpuCollectivesTest, AllGatherStridedInputs) {
  for (int dim : {0, 1, 2, -1}) check_all_gather({2, 3, 4}, DType::Float32, dim, true);
  for (int dim : {2, -2, 3}) check_all_gather({2, 3, 4, 2}, DType::BFloat16, dim, true);
}

TEST_F(CpuCollectivesTest, ReduceScatterEveryDimAndDType) {
  for (DType dtype : kDTypes) {
    for (int dim : {0, 1, 2, -1}) check_reduce_scatter({2, 3, 4}, dtype, dim, false);
  }
}

TEST_F(CpuCollectivesTest, ReduceScatterStridedAnd4d) {
  for (int dim : {0, 1, 2, -1}) check_reduce_scatter({2, 3, 4}, DType::Float16, dim, true);
  for (int dim : {2, -2, 3}) check_reduce_scatter({2, 3, 4, 2}, DType::Int64, dim, true);
}

TEST_F(CpuCollectivesTest, GatherToEachDst) {
  const Shape shape{2, 3, 4};
  for (int dst = 0; dst < group_size(); ++dst) {
    for (int dim : {0, 2, -2}) {
      SCOPED_TRACE(::testing::Message() << "dst " << dst << " dim " << dim);
      const std::optional<Tensor> out =
          comm().gather(rank_tensor_strided(shape, DType::Int32, group_rank()), dst, dim);
      if (group_rank() != dst) {
        EXPECT_FALSE(out.has_value());
        continue;
      }
      ASSERT_TRUE(out.has_value());
      const int d = dim < 0 ? dim + 3 : dim;
      Shape out_shape = shape;
      out_shape[d] *= group_size();
      EXPECT_EQ(compare(*out, out_shape, DType::Int32, concatenation(shape, d)), "");
    }
  }
}

TEST_F(CpuCollectivesTest, BroadcastFromEachSrcInPlace) {
  const Shape shape{4, 3};
  for (int src = 0; src < group_size(); ++src) {
    for (bool strided : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "src " << src << (strided ? " strided" : ""));
      // Every rank starts from its own values; after the broadcast all hold src's.
      Tensor tensor = strided ? rank_tensor_strided(shape, DType::BFloat16, group_rank())
                              : rank_tensor(shape, DType::BFloat16, group_rank());
      const Tensor out = comm().broadcast(tensor, src);
      EXPECT_EQ(out.data_ptr(), tensor.data_ptr()) << "broadcast is in place";
      EXPECT_EQ(compare(tensor, shape, DType::BFloat16,
                        [&](const Shape& i) { return input_value(src, shape, i); }),
                "");
    }
  }
}

TEST_F(CpuCollectivesTest, EmptyTensors) {
  const Shape shape{0, 3};
  EXPECT_EQ(comm().all_gather(Tensor::empty(shape, DType::Float32), 0).shape(), (Shape{0, 3}));
  EXPECT_EQ(comm().all_reduce(Tensor::empty(shape, DType::Float32)).shape(), (Shape{0, 3}));
}

TEST_F(CpuCollectivesTest, DestroyIsIdempotentAndLaterCallsThrow) {
  comm().destroy();
  comm().destroy();
  EXPECT_EQ(comm().world_size(), world_size());
  try {
    comm().all_reduce(rank_tensor({2}, DType::Float32, 0));
    ADD_FAILURE() << "expected DistributedError";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find(kGroupName), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos) << e.what();
  }
  EXPECT_THROW(comm().combine(rank_tensor({2}, DType::Float32, 0)), DistributedError);
  EXPECT_THROW(comm().send(rank_tensor({2}, DType::Float32, 0)), DistributedError);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
