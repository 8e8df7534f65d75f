// all_gatherv and reduce_scatterv: per-rank sizes from [81, 20, 57, 52, 81, 5, 49, 49][:ws],
// lists of tensors, other dims, and uniform sizes taking the same path as no sizes.
#include <gtest/gtest.h>

#include <numeric>

#include "comm_fixture.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

class CpuVVariantsTest : public CommunicatorTest {
 protected:
  std::vector<std::int64_t> varying_sizes() const {
    const std::vector<std::int64_t> all{81, 20, 57, 52, 81, 5, 49, 49};
    return std::vector<std::int64_t>(all.begin(), all.begin() + group_size());
  }

  /// Shape of rank r's input: `shape` with sizes[r] at `d`.
  static Shape rank_shape(Shape shape, int d, std::int64_t size) {
    shape[d] = size;
    return shape;
  }

  /// Reference of all_gatherv along `d`: rank r's datum at the index local to its block.
  static IndexFn concatenation(const Shape& shape, int d, const std::vector<std::int64_t>& sizes) {
    return [=](const Shape& index) {
      int r = 0;
      std::int64_t start = 0;
      while (index[d] >= start + sizes[r]) start += sizes[r++];
      Shape local = index;
      local[d] -= start;
      return datum(r, ravel(local, rank_shape(shape, d, sizes[r])));
    };
  }

  void check_all_gatherv(const Shape& shape, int dim, const std::vector<std::int64_t>& sizes,
                         DType dtype) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim << " " << dtype_name(dtype));
    const int d = dim < 0 ? dim + static_cast<int>(shape.size()) : dim;
    const Shape mine = rank_shape(shape, d, sizes[group_rank()]);
    const Tensor out = comm().all_gatherv(rank_tensor(mine, dtype, group_rank()), dim, sizes);
    const Shape out_shape =
        rank_shape(shape, d, std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}));
    EXPECT_EQ(compare(out, out_shape, dtype, concatenation(shape, d, sizes)), "");
  }

  void check_reduce_scatterv(const Shape& out_base, int dim,
                             const std::optional<std::vector<std::int64_t>>& sizes, DType dtype) {
    SCOPED_TRACE(::testing::Message() << "dim " << dim << (sizes ? "" : " no sizes"));
    const int d = dim < 0 ? dim + static_cast<int>(out_base.size()) : dim;
    std::vector<std::int64_t> s =
        sizes ? *sizes : std::vector<std::int64_t>(group_size(), out_base[d]);
    const Shape shape =
        rank_shape(out_base, d, std::accumulate(s.begin(), s.end(), std::int64_t{0}));
    const std::int64_t offset =
        std::accumulate(s.begin(), s.begin() + group_rank(), std::int64_t{0});
    const Tensor out = comm().reduce_scatterv(rank_tensor(shape, dtype, group_rank()), dim, sizes);
    const int n = group_size();
    EXPECT_EQ(compare(out, rank_shape(shape, d, s[group_rank()]), dtype,
                      [&](const Shape& index) {
                        Shape full = index;
                        full[d] += offset;
                        double sum = 0;
                        for (int r = 0; r < n; ++r) sum += datum(r, ravel(full, shape));
                        return sum;
                      }),
              "");
  }
};

TEST_F(CpuVVariantsTest, AllGathervVaryingSizesDim0) {
  for (DType dtype : {DType::Float32, DType::BFloat16, DType::Int64}) {
    check_all_gatherv({0, 3}, 0, varying_sizes(), dtype);
  }
}

TEST_F(CpuVVariantsTest, AllGathervOtherDims) {
  check_all_gatherv({2, 0, 3}, 1, varying_sizes(), DType::Float16);
  check_all_gatherv({2, 3, 0}, -1, varying_sizes(), DType::Int32);
}

TEST_F(CpuVVariantsTest, AllGathervZeroSizedRank) {
  std::vector<std::int64_t> sizes = varying_sizes();
  sizes[0] = 0;
  check_all_gatherv({0, 2}, 0, sizes, DType::Float32);
}

TEST_F(CpuVVariantsTest, AllGathervListOfTensors) {
  const std::vector<std::int64_t> sizes = varying_sizes();
  const std::int64_t mine = sizes[group_rank()];
  const std::int64_t total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  const std::vector<Tensor> out = comm().all_gatherv(
      std::vector<Tensor>{rank_tensor({mine, 3}, DType::Float32, group_rank()),
                          rank_tensor_strided({mine, 2, 2}, DType::Int64, group_rank())},
      0, sizes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(compare(out[0], {total, 3}, DType::Float32, concatenation({0, 3}, 0, sizes)), "");
  EXPECT_EQ(compare(out[1], {total, 2, 2}, DType::Int64, concatenation({0, 2, 2}, 0, sizes)), "");
  EXPECT_TRUE(comm().all_gatherv(std::vector<Tensor>{}, 0, sizes).empty());
}

TEST_F(CpuVVariantsTest, UniformSizesEqualNoSizes) {
  const std::vector<std::int64_t> uniform(group_size(), 4);
  const Tensor input = rank_tensor({4, 3}, DType::Float32, group_rank());
  const Tensor with_sizes = comm().all_gatherv(input, 0, uniform);
  const Tensor without = comm().all_gatherv(input, 0, std::nullopt);
  const IndexFn expected = concatenation({0, 3}, 0, uniform);
  EXPECT_EQ(compare(with_sizes, {4 * group_size(), 3}, DType::Float32, expected), "");
  EXPECT_EQ(compare(without, {4 * group_size(), 3}, DType::Float32, expected), "");
  check_reduce_scatterv({4, 3}, 0, uniform, DType::Float32);
  check_reduce_scatterv({4, 3}, 0, std::nullopt, DType::Float32);
  check_reduce_scatterv({2, 3, 4}, -1, std::nullopt, DType::BFloat16);
}

TEST_F(CpuVVariantsTest, ReduceScattervVaryingSizes) {
  check_reduce_scatterv({0, 3}, 0, varying_sizes(), DType::Float32);
  check_reduce_scatterv({0, 3}, 0, varying_sizes(), DType::Int32);
  // Along a dim >= 2 of a 3-d tensor (the default dim -1, too).
  check_reduce_scatterv({2, 3, 0}, 2, varying_sizes(), DType::Float16);
  check_reduce_scatterv({2, 3, 0}, -1, varying_sizes(), DType::Int64);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
