// in_the_same_node_as and get_node_count(group) with ranks as threads of one process (which are,
// by construction, on one node), over an in-memory store, at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "groupcoord/hash_store.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/process_group.h"
#include "test_support.h"

namespace groupcoord {
namespace {

class SameNodeThreads : public ::testing::TestWithParam<int> {
 protected:
  void run(const std::function<void(ProcessGroup&)>& body) {
    const int n = GetParam();
    auto store = std::make_shared<HashStore>(std::chrono::seconds(30));
    testing::run_ranks_on_threads(n, [&](int rank) {
      ProcessGroupOptions options;
      options.name = "world";
      options.timeout = std::chrono::seconds(30);
      options.single_node = true;
      auto world = ProcessGroup::create_world(store, rank, n, options);
      body(*world);
      world->destroy();
    });
  }
};

TEST_P(SameNodeThreads, EveryRankIsOnTheSourceNode) {
  run([](ProcessGroup& group) {
    for (int source = 0; source < group.size(); ++source) {
      EXPECT_EQ(in_the_same_node_as(group, source), std::vector<bool>(group.size(), true));
    }
  });
}

TEST_P(SameNodeThreads, OneNode) {
  run([](ProcessGroup& group) { EXPECT_EQ(get_node_count(group), 1); });
}

TEST_P(SameNodeThreads, SourceRankOutOfRangeIsRejectedOnEveryRank) {
  run([](ProcessGroup& group) {
    EXPECT_THROW(in_the_same_node_as(group, group.size()), std::invalid_argument);
    EXPECT_THROW(in_the_same_node_as(group, -1), std::invalid_argument);
    // Nothing was sent: the group still works.
    EXPECT_EQ(get_node_count(group), 1);
  });
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SameNodeThreads, ::testing::Values(1, 2, 4));

}  // namespace
}  // namespace groupcoord
