// dispatch_router_logits / dispatch / combine: pass-through without use_all2all; with it, the
// naive all2all manager (per-rank token counts differ).
#include <gtest/gtest.h>

#include "comm_fixture.h"
#include "groupcoord/device_communicator.h"
#include "tensor_reference.h"

namespace groupcoord {
namespace testing {
namespace {

class CpuMoeTest : public CommunicatorTest {
 protected:
  void SetUp() override {
    CommunicatorTest::SetUp();
    all2all_ = create_device_communicator("cpu", context(/*use_all2all=*/true));
  }
  void TearDown() override {
    if (all2all_) all2all_->destroy();
    all2all_.reset();
    CommunicatorTest::TearDown();
  }

  /// Tokens of group rank r: different on every rank.
  static std::int64_t tokens(int r) { return 3 + 2 * r; }
  std::int64_t total_tokens() const {
    std::int64_t total = 0;
    for (int r = 0; r < group_size(); ++r) total += tokens(r);
    return total;
  }
  /// Rank r's tensor with `cols` columns; `salt` tells the tensors of one rank apart.
  static Tensor input(int r, std::int64_t cols, DType dtype, int salt) {
    return rank_tensor({tokens(r), cols}, dtype, r + 7 * salt);
  }
  /// Reference of the gathered tensor: the rows of every rank, in rank order.
  IndexFn gathered(std::int64_t cols, int salt) const {
    return [=](const Shape& index) {
      int r = 0;
      std::int64_t start = 0;
      while (index[0] >= start + tokens(r)) start += tokens(r++);
      return datum(r + 7 * salt, (index[0] - start) * cols + index[1]);
    };
  }

  std::unique_ptr<DeviceCommunicator> all2all_;
};

TEST_F(CpuMoeTest, WithoutAll2AllInputsComeBackUnchanged) {
  const Tensor h = input(group_rank(), 4, DType::Float32, 0);
  const Tensor w = input(group_rank(), 2, DType::Float32, 1);
  const Tensor ids = input(group_rank(), 2, DType::Int64, 2);
  const Tensor extra = input(group_rank(), 1, DType::Int32, 3);
  const DispatchResult d = comm().dispatch(h, w, ids, false, {extra});
  EXPECT_EQ(d.hidden_states.data_ptr(), h.data_ptr());
  EXPECT_EQ(d.topk_weights.data_ptr(), w.data_ptr());
  EXPECT_EQ(d.topk_ids.data_ptr(), ids.data_ptr());
  ASSERT_EQ(d.extra_tensors.size(), 1u);
  EXPECT_EQ(d.extra_tensors[0].data_ptr(), extra.data_ptr());
  const DispatchRouterLogitsResult r = comm().dispatch_router_logits(h, w);
  EXPECT_EQ(r.hidden_states.data_ptr(), h.data_ptr());
  EXPECT_EQ(r.router_logits.data_ptr(), w.data_ptr());
  EXPECT_EQ(comm().combine(h).data_ptr(), h.data_ptr());
}

TEST_F(CpuMoeTest, DispatchGathersEveryRanksTokens) {
  const int me = group_rank();
  for (bool sequence_parallel : {false, true}) {
    const DispatchResult d = all2all_->dispatch(
        input(me, 4, DType::Float32, 0), input(me, 2, DType::Float32, 1),
        input(me, 2, DType::Int64, 2), sequence_parallel, {input(me, 5, DType::BFloat16, 3)});
    const std::int64_t n = total_tokens();
    EXPECT_EQ(compare(d.hidden_states, {n, 4}, DType::Float32, gathered(4, 0)), "");
    EXPECT_EQ(compare(d.topk_weights, {n, 2}, DType::Float32, gathered(2, 1)), "");
    EXPECT_EQ(compare(d.topk_ids, {n, 2}, DType::Int64, gathered(2, 2)), "");
    ASSERT_EQ(d.extra_tensors.size(), 1u);
    EXPECT_EQ(compare(d.extra_tensors[0], {n, 5}, DType::BFloat16, gathered(5, 3)), "");
  }
}

TEST_F(CpuMoeTest, CombineOfDispatchWithIdentityExperts) {
  const int me = group_rank();
  const Tensor h = input(me, 4, DType::Float32, 0);
  // Router-logits flavour; identity experts: the combined output is the sum of world_size
  // copies of this rank's own tokens.
  const DispatchRouterLogitsResult d =
      all2all_->dispatch_router_logits(h, input(me, 3, DType::Float16, 1));
  EXPECT_EQ(compare(d.router_logits, {total_tokens(), 3}, DType::Float16, gathered(3, 1)), "");
  EXPECT_TRUE(d.extra_tensors.empty());
  const Tensor out = all2all_->combine(d.hidden_states);
  EXPECT_EQ(compare(out, {tokens(me), 4}, DType::Float32,
                    [&](const Shape& i) { return group_size() * datum(me, i[0] * 4 + i[1]); }),
            "");
  // combine keeps the last dispatch's counts: a second combine works alike.
  EXPECT_EQ(all2all_->combine(d.hidden_states, true).shape(), (Shape{tokens(me), 4}));
}

TEST_F(CpuMoeTest, CombineErrors) {
  expect_invalid_argument([&] { all2all_->combine(input(group_rank(), 4, DType::Float32, 0)); },
                          {kGroupName, "combine", "no dispatch"});
  all2all_->dispatch_router_logits(input(group_rank(), 4, DType::Float32, 0),
                                   input(group_rank(), 2, DType::Float32, 1));
  const std::int64_t wrong = total_tokens() + 1;
  expect_invalid_argument(
      [&] {
        all2all_->combine(Tensor::empty({wrong, 4}, DType::Float32));
      },
      {kGroupName, "combine", std::to_string(wrong)});
}

TEST_F(CpuMoeTest, BadInputOnOneRankFailsEveryRank) {
  // Only group rank 0 passes mismatched topk_ids; every rank must throw, none may hang.
  const int me = group_rank();
  const Tensor ids =
      me == 0 ? Tensor::empty({tokens(me) + 1, 2}, DType::Int64) : input(me, 2, DType::Int64, 2);
  expect_invalid_argument(
      [&] {
        all2all_->dispatch(input(me, 4, DType::Float32, 0), input(me, 2, DType::Float32, 1), ids);
      },
      {kGroupName, "dispatch", me == 0 ? "topk_ids" : "rank 0"});
  // The group is still usable afterwards.
  const DispatchResult d =
      all2all_->dispatch(input(me, 4, DType::Float32, 0), input(me, 2, DType::Float32, 1),
                         input(me, 2, DType::Int64, 2));
  EXPECT_EQ(compare(d.hidden_states, {total_tokens(), 4}, DType::Float32, gathered(4, 0)), "");
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
