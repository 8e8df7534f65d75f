// compute_model_parallel_layout against rank lists written out by hand from vLLM's
// initialize_model_parallel (all_ranks = arange(W).reshape(-1, DP, PP, PCP, TP); each kind's axis
// transposed last, then reshape(-1, size).unbind(0)). The expected lists are literals, not
// computed, so they cannot share a mistake with the code under test.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "groupcoord/parallel_state.h"

namespace groupcoord {
namespace {

using Groups = std::vector<std::vector<int>>;

ModelParallelLayout layout(int world, int tp, int pp, int pcp, int dcp, int dp) {
  return compute_model_parallel_layout(world, tp, pp, pcp, dcp, dp);
}

Groups singletons(std::vector<int> order) {
  Groups groups;
  for (int r : order) groups.push_back({r});
  return groups;
}

// The first example: W=8, DP=2, PP=2, TP=2.
TEST(ModelParallelLayout, Dp2Pp2Tp2) {
  ModelParallelLayout l = layout(8, 2, 2, 1, 1, 2);
  EXPECT_EQ(l.tp, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.pp, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.dp, (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  EXPECT_EQ(l.ep, (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  EXPECT_EQ(l.dcp, singletons({0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(l.pcp, singletons({0, 1, 2, 3, 4, 5, 6, 7}));
}

// The second example: W=8, PP=2, TP=4, DCP=2 (DP=1: singletons in transpose order).
TEST(ModelParallelLayout, Pp2Tp4Dcp2) {
  ModelParallelLayout l = layout(8, 4, 2, 1, 2, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(l.dcp, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.pp, (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // DP axis moved last: TP outer, PP inner.
  EXPECT_EQ(l.dp, singletons({0, 4, 1, 5, 2, 6, 3, 7}));
  EXPECT_EQ(l.ep, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(l.pcp, singletons({0, 1, 2, 3, 4, 5, 6, 7}));
}

// PCP: W=8, PP=2, PCP=2, TP=2, so rank = 4*pp + 2*pcp + tp.
TEST(ModelParallelLayout, Pp2Pcp2Tp2) {
  ModelParallelLayout l = layout(8, 2, 2, 2, 1, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.pcp, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.pp, (Groups{{0, 4}, {2, 6}, {1, 5}, {3, 7}}));
  EXPECT_EQ(l.dp, singletons({0, 2, 4, 6, 1, 3, 5, 7}));
  EXPECT_EQ(l.ep, (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(l.dcp, singletons({0, 1, 2, 3, 4, 5, 6, 7}));
}

// PCP with DCP: DCP cuts contiguous chunks (vLLM's all_ranks.reshape(-1, dcp)), inside TP rows.
TEST(ModelParallelLayout, Pcp2Tp2Dcp2) {
  ModelParallelLayout l = layout(4, 2, 1, 2, 2, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(l.dcp, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(l.pcp, (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(l.pp, singletons({0, 2, 1, 3}));
  EXPECT_EQ(l.dp, singletons({0, 2, 1, 3}));
  EXPECT_EQ(l.ep, (Groups{{0, 1, 2, 3}}));
}

// An external DP dimension (W = 2 x DP x PP x TP): groups never cross the outer replicas.
TEST(ModelParallelLayout, ExternalDp) {
  ModelParallelLayout l = layout(8, 2, 2, 1, 1, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.pp, (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.dp, singletons({0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_EQ(l.ep, (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

// The layouts the multi-process test and the demo use.
TEST(ModelParallelLayout, Tp2Pp2OnFourRanks) {
  ModelParallelLayout l = layout(4, 2, 2, 1, 1, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(l.pp, (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(l.dp, singletons({0, 2, 1, 3}));
  EXPECT_EQ(l.ep, (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(l.dcp, singletons({0, 1, 2, 3}));
  EXPECT_EQ(l.pcp, singletons({0, 1, 2, 3}));
}

TEST(ModelParallelLayout, SingleRank) {
  ModelParallelLayout l = layout(1, 1, 1, 1, 1, 1);
  for (const Groups* g : {&l.tp, &l.pp, &l.dcp, &l.pcp, &l.dp, &l.ep}) EXPECT_EQ(*g, (Groups{{0}}));
}

TEST(ModelParallelLayout, TpSpansTheWorld) {
  ModelParallelLayout l = layout(2, 2, 1, 1, 1, 1);
  EXPECT_EQ(l.tp, (Groups{{0, 1}}));
  EXPECT_EQ(l.pp, singletons({0, 1}));
  EXPECT_EQ(l.ep, (Groups{{0, 1}}));
}

// Every layout is a partition of the world: each rank in exactly one group of each kind.
TEST(ModelParallelLayout, EveryKindPartitionsTheWorld) {
  ModelParallelLayout l = layout(16, 2, 2, 2, 2, 2);
  for (const Groups* groups : {&l.tp, &l.pp, &l.dcp, &l.pcp, &l.dp, &l.ep}) {
    std::vector<int> seen(16, 0);
    for (const auto& group : *groups) {
      for (int r : group) ++seen[r];
    }
    EXPECT_EQ(seen, std::vector<int>(16, 1));
  }
}

// Checks that `body` throws std::invalid_argument whose message contains every piece of `needles`.
template <typename Body>
void expect_invalid(Body body, const std::vector<std::string>& needles) {
  try {
    body();
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
}

TEST(ModelParallelLayout, SizesThatDoNotDivideTheWorldAreRejected) {
  expect_invalid([] { layout(6, 4, 1, 1, 1, 1); },
                 {"world_size=6", "tensor_model_parallel_size=4", "does not divide"});
  expect_invalid([] { layout(8, 2, 3, 1, 1, 1); }, {"pipeline_model_parallel_size=3"});
  expect_invalid([] { layout(8, 2, 2, 1, 1, 4); }, {"data_parallel_size=4"});
  expect_invalid([] { layout(4, 2, 1, 3, 1, 1); }, {"prefill_context_model_parallel_size=3"});
}

TEST(ModelParallelLayout, DcpMustDivideTp) {
  expect_invalid([] { layout(8, 4, 1, 1, 3, 1); },
                 {"decode_context_model_parallel_size=3", "tensor_model_parallel_size=4"});
  expect_invalid([] { layout(8, 2, 1, 1, 4, 1); }, {"decode_context_model_parallel_size=4"});
}

TEST(ModelParallelLayout, NonPositiveSizesAreRejected) {
  expect_invalid([] { layout(4, 0, 1, 1, 1, 1); }, {"positive", "tensor_model_parallel_size=0"});
  expect_invalid([] { layout(4, 1, -1, 1, 1, 1); }, {"pipeline_model_parallel_size=-1"});
  expect_invalid([] { layout(0, 1, 1, 1, 1, 1); }, {"world_size=0"});
  expect_invalid([] { layout(4, 1, 1, 1, 0, 1); }, {"decode_context_model_parallel_size=0"});
  expect_invalid([] { layout(4, 1, 1, 1, 1, 0); }, {"data_parallel_size=0"});
}

}  // namespace
}  // namespace groupcoord
