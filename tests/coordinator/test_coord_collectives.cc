// Tensor collectives and point-to-point tensors of GroupCoordinator against sequential
// references: every rank builds every other rank's input (a function of its world rank) and
// computes the expected result itself.
#include <gtest/gtest.h>

#include <functional>

#include "coord_env.h"
#include "coord_tensors.h"
#include "groupcoord/dtype.h"

namespace groupcoord {
namespace testing {
namespace {

class CoordinatorCollectives : public CoordinatorTest {};

const Shape kShape = {2, 3, 4};
const std::vector<int> kDims = {0, 1, 2, -1};
const std::vector<std::int64_t> kVSizes = {81, 20, 57, 52, 81, 5, 49, 49};

// World rank `r`'s input of `shape`; `strided` builds it as a movedim view (non-contiguous).
Tensor input_of(int r, const Shape& shape, DType dtype, bool strided = false, int salt = 0) {
  auto value = [&](std::int64_t i) { return rank_value(r, i + salt); };
  if (!strided) return make_tensor(shape, dtype, value);
  // A (shape[2], shape[0], shape[1]) tensor viewed as `shape` through movedim(0, 2).
  return make_tensor({shape[2], shape[0], shape[1]}, dtype, value).movedim(0, 2);
}

std::vector<std::vector<double>> inputs_of_group(const GroupCoordinator& c, const Shape& shape,
                                                 bool strided = false) {
  std::vector<std::vector<double>> values;
  for (int r : c.ranks())
    values.push_back(tensor_values(input_of(r, shape, DType::Float64, strided)));
  return values;
}

// Concatenation along `dim` of the group's inputs (in group order).
std::vector<double> ref_all_gather(const std::vector<std::vector<double>>& inputs,
                                   const Shape& shape, int dim, Shape* out_shape) {
  const int d = dim < 0 ? dim + static_cast<int>(shape.size()) : dim;
  Shape out = shape;
  out[d] *= static_cast<std::int64_t>(inputs.size());
  std::vector<double> result;
  std::int64_t total = 1;
  for (auto s : out) total *= s;
  for (std::int64_t i = 0; i < total; ++i) {
    Shape index = unravel(i, out);
    const std::int64_t g = index[d] / shape[d];
    index[d] %= shape[d];
    result.push_back(inputs[g][ravel(index, shape)]);
  }
  *out_shape = out;
  return result;
}

// Element-wise sum over the group, then group rank `me`'s slice along `dim` of `out_shape`.
std::vector<double> ref_reduce_scatter(const std::vector<std::vector<double>>& inputs,
                                       const Shape& in_shape, int dim, int me,
                                       const Shape& out_shape,
                                       const std::vector<std::int64_t>& offsets) {
  const int d = dim < 0 ? dim + static_cast<int>(in_shape.size()) : dim;
  std::int64_t total = 1;
  for (auto s : out_shape) total *= s;
  std::vector<double> result;
  for (std::int64_t i = 0; i < total; ++i) {
    Shape index = unravel(i, out_shape);
    index[d] += offsets[me];
    double sum = 0;
    for (const auto& input : inputs) sum += input[ravel(index, in_shape)];
    result.push_back(sum);
  }
  return result;
}

std::string trace(const GroupCoordinator& c, DType dtype, int dim) {
  return c.unique_name() + " " + dtype_name(dtype) + " dim " + std::to_string(dim);
}

TEST_F(CoordinatorCollectives, AllReduceSumsOverTheGroupOnly) {
  for (GroupCoordinator* c :
       {&world_coord(), &reversed_coord(), &columns_coord(), &pairs_coord()}) {
    for (DType dtype : test_dtypes()) {
      Tensor input = input_of(rank(), kShape, dtype);
      std::vector<double> expected(24, 0.0);
      for (const auto& values : inputs_of_group(*c, kShape)) {
        for (int i = 0; i < 24; ++i) expected[i] += values[i];
      }
      Tensor out = c->all_reduce(input);
      expect_tensor(out, kShape, dtype, expected, trace(*c, dtype, 0));
      // Out of place: the input is untouched (it is the very same tensor at group size 1).
      expect_tensor(input, kShape, dtype, tensor_values(input_of(rank(), kShape, dtype)), "input");
    }
  }
}

TEST_F(CoordinatorCollectives, AllGatherEveryDimAndDType) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    for (DType dtype : test_dtypes()) {
      for (int dim : kDims) {
        for (bool strided : {false, true}) {
          if (strided && dtype != DType::Float32) continue;
          Shape out_shape;
          auto expected =
              ref_all_gather(inputs_of_group(*c, kShape, strided), kShape, dim, &out_shape);
          Tensor out = c->all_gather(input_of(rank(), kShape, dtype, strided), dim);
          expect_tensor(out, out_shape, dtype, expected,
                        trace(*c, dtype, dim) + (strided ? " strided" : ""));
        }
      }
    }
  }
}

TEST_F(CoordinatorCollectives, ReduceScatterEveryDimAndDType) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    const int n = c->world_size();
    for (DType dtype : test_dtypes()) {
      for (int dim : kDims) {
        const int d = dim < 0 ? dim + 3 : dim;
        Shape in_shape = kShape;
        in_shape[d] *= n;  // divisible by the group size; the output has kShape
        std::vector<std::int64_t> offsets;
        for (int g = 0; g < n; ++g) offsets.push_back(g * kShape[d]);
        std::vector<std::vector<double>> inputs;
        for (int r : c->ranks())
          inputs.push_back(tensor_values(input_of(r, in_shape, DType::Float64)));
        auto expected =
            ref_reduce_scatter(inputs, in_shape, dim, c->rank_in_group(), kShape, offsets);
        Tensor out = c->reduce_scatter(input_of(rank(), in_shape, dtype), dim);
        expect_tensor(out, kShape, dtype, expected, trace(*c, dtype, dim));
      }
    }
  }
}

TEST_F(CoordinatorCollectives, AllGathervAndReduceScattervWithPerRankSizes) {
  if (world_size() == 1) GTEST_SKIP() << "world size 1 has no communicator (see the bypass test)";
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    const int n = c->world_size();
    const int me = c->rank_in_group();
    std::vector<std::int64_t> sizes(kVSizes.begin(), kVSizes.begin() + n);
    std::int64_t total = 0;
    std::vector<std::int64_t> offsets;
    for (auto s : sizes) {
      offsets.push_back(total);
      total += s;
    }
    for (DType dtype : test_dtypes()) {
      SCOPED_TRACE(trace(*c, dtype, 0));
      // all_gatherv: rank g contributes sizes[g] rows of width 3 (and, in the list form, of 2).
      std::vector<double> expected3, expected2;
      for (int g = 0; g < n; ++g) {
        auto v3 = tensor_values(input_of(c->ranks()[g], {sizes[g], 3}, DType::Float64));
        auto v2 = tensor_values(input_of(c->ranks()[g], {sizes[g], 2}, DType::Float64, false, 50));
        expected3.insert(expected3.end(), v3.begin(), v3.end());
        expected2.insert(expected2.end(), v2.begin(), v2.end());
      }
      Tensor mine3 = input_of(rank(), {sizes[me], 3}, dtype);
      Tensor mine2 = input_of(rank(), {sizes[me], 2}, DType::Int64, false, 50);
      expect_tensor(c->all_gatherv(mine3, 0, sizes), {total, 3}, dtype, expected3, "all_gatherv");
      auto both = c->all_gatherv(std::vector<Tensor>{mine3, mine2}, 0, sizes);
      ASSERT_EQ(both.size(), 2u);
      expect_tensor(both[0], {total, 3}, dtype, expected3, "all_gatherv list [0]");
      expect_tensor(both[1], {total, 2}, DType::Int64, expected2, "all_gatherv list [1]");

      // reduce_scatterv: a (total, 3) input, rank g keeps sizes[g] rows of the sum.
      std::vector<std::vector<double>> inputs;
      for (int r : c->ranks())
        inputs.push_back(tensor_values(input_of(r, {total, 3}, DType::Float64)));
      auto expected = ref_reduce_scatter(inputs, {total, 3}, 0, me, {sizes[me], 3}, offsets);
      expect_tensor(c->reduce_scatterv(input_of(rank(), {total, 3}, dtype), 0, sizes),
                    {sizes[me], 3}, dtype, expected, "reduce_scatterv");
    }
    // Uniform sizes behave as the plain collectives.
    std::vector<std::int64_t> uniform(n, 4);
    Shape gathered_shape;
    auto gathered = ref_all_gather(inputs_of_group(*c, {4, 3}), {4, 3}, 0, &gathered_shape);
    expect_tensor(c->all_gatherv(input_of(rank(), {4, 3}, DType::Float32), 0, uniform),
                  gathered_shape, DType::Float32, gathered, "uniform all_gatherv");
    expect_tensor(c->all_gatherv(input_of(rank(), {4, 3}, DType::Float32)), gathered_shape,
                  DType::Float32, gathered, "all_gatherv without sizes");
  }
}

TEST_F(CoordinatorCollectives, GatherToEachDst) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    for (int dst = 0; dst < c->world_size(); ++dst) {
      for (int dim : {0, -1}) {
        Shape out_shape;
        auto expected = ref_all_gather(inputs_of_group(*c, kShape), kShape, dim, &out_shape);
        auto out = c->gather(input_of(rank(), kShape, DType::BFloat16), dst, dim);
        if (c->rank_in_group() == dst) {
          ASSERT_TRUE(out.has_value());
          expect_tensor(*out, out_shape, DType::BFloat16, expected,
                        trace(*c, DType::BFloat16, dim));
        } else {
          EXPECT_FALSE(out.has_value());
        }
      }
    }
  }
}

TEST_F(CoordinatorCollectives, BroadcastFromEachSrcInPlace) {
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord(), &columns_coord()}) {
    for (int src = 0; src < c->world_size(); ++src) {
      for (DType dtype : test_dtypes()) {
        for (bool strided : {false, true}) {
          Tensor t = input_of(rank(), kShape, dtype, strided);
          Tensor out = c->broadcast(t, src);
          EXPECT_EQ(out.data_ptr(), t.data_ptr());
          const int src_world = c->ranks()[src];
          auto expected = tensor_values(input_of(src_world, kShape, DType::Float64, strided));
          expect_tensor(t, kShape, dtype, expected,
                        trace(*c, dtype, 0) + " src " + std::to_string(src));
        }
      }
    }
  }
}

// One ring exchange: every rank sends `mine` to the next group rank and returns what `receive`
// got from the previous one. Blocking sends wait for the receiver: even group ranks send first,
// odd ones receive first.
Tensor ring_exchange(GroupCoordinator& c, const Tensor& mine,
                     const std::function<Tensor()>& receive) {
  if (c.rank_in_group() % 2 == 0) {
    c.send(mine);
    return receive();
  }
  const Tensor got = receive();
  c.send(mine);
  return got;
}

TEST_F(CoordinatorCollectives, SendRecvRingThroughTheCommunicator) {
  if (world_size() == 1) GTEST_SKIP() << "no peer";
  for (GroupCoordinator* c : {&world_coord(), &reversed_coord()}) {
    const int me = c->rank_in_group();
    const int n = c->world_size();
    const int prev_world = c->ranks()[(me + n - 1) % n];
    const Tensor mine = input_of(rank(), {7, 3}, DType::Float16);
    auto expected = tensor_values(input_of(prev_world, {7, 3}, DType::Float64));
    const Tensor got = ring_exchange(*c, mine, [&] { return c->recv({7, 3}, DType::Float16); });
    expect_tensor(got, {7, 3}, DType::Float16, expected, c->unique_name() + " ring");
    // Into a caller's tensor (beyond vLLM's API): written there, returned as is.
    const Tensor out = input_of(1000, {7, 3}, DType::Float16);  // stale contents to replace
    const Tensor into = ring_exchange(*c, mine, [&] { return c->recv(out, (me + n - 1) % n); });
    EXPECT_EQ(into.data_ptr(), out.data_ptr()) << c->unique_name();
    expect_tensor(out, {7, 3}, DType::Float16, expected, c->unique_name() + " recv into out");
  }
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
