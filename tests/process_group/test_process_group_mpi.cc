// ProcessGroup across processes: run by ctest under `mpirun -np N` (N = 1, 2, 4) through the
// harness in tests/harness. Every rank runs every test; a failure on any rank fails it everywhere.
#include <gtest/gtest.h>

#include "groupcoord/process_group.h"
#include "multi_process_test.h"
#include "pg_checks.h"

namespace groupcoord {
namespace testing {
namespace {

class ProcessGroupTest : public MultiProcessTest {};

TEST_F(ProcessGroupTest, WorldShape) {
  EXPECT_EQ(world()->rank(), rank());
  EXPECT_EQ(world()->size(), world_size());
  std::vector<int> expected(world_size());
  for (int r = 0; r < world_size(); ++r) expected[r] = r;
  EXPECT_EQ(world()->world_ranks(), expected);
}

TEST_F(ProcessGroupTest, CollectivesOnEveryDType) { check_all_collectives_small(*world()); }

TEST_F(ProcessGroupTest, Collectives64MiB) { check_collectives_64mib(*world()); }

TEST_F(ProcessGroupTest, AllReduceOfSeveralChunks) { check_all_reduce_multi_chunk(*world()); }

TEST_F(ProcessGroupTest, Barrier) {
  for (int i = 0; i < 5; ++i) check_barrier(*world());
}

TEST_F(ProcessGroupTest, SendRecv) {
  for (std::size_t nbytes : {0, 1, 1023, 64 << 20}) check_send_recv(*world(), nbytes);
}

TEST_F(ProcessGroupTest, TagsAreIndependent) { check_tags_are_independent(*world()); }

TEST_F(ProcessGroupTest, HundredAsyncSendsArriveInOrder) {
  check_many_async_sends_in_order(*world(), 100);
}

TEST_F(ProcessGroupTest, IrecvCompletion) { check_irecv_completion(*world()); }

TEST_F(ProcessGroupTest, IrecvStreamOrder) { check_irecv_stream_order(*world()); }

TEST_F(ProcessGroupTest, SizeMismatchIsAnErrorNotACrash) { check_size_mismatch(*world()); }

TEST_F(ProcessGroupTest, PointToPointConcurrentWithCollectives) {
  check_p2p_concurrent_with_collectives(*world());
}

TEST_F(ProcessGroupTest, BadArgumentsRaiseInvalidArgument) { check_bad_arguments(*world()); }

TEST_F(ProcessGroupTest, SubGroupLayouts) { check_subgroup_layouts(*world()); }

TEST_F(ProcessGroupTest, AbsentRankTimesOut) { check_absent_rank_times_out(*world()); }

TEST_F(ProcessGroupTest, DestroyWithPendingWork) { check_destroy_with_pending_work(*world()); }

TEST_F(ProcessGroupTest, WorldStillHealthyAtTheEnd) {
  EXPECT_FALSE(world()->is_broken());
  check_all_reduce(*world(), DType::Float16, ReduceOp::Sum, 1023, true);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
