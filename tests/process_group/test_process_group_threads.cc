// ProcessGroup with ranks as threads of one process, sharing an in-memory HashStore. Each test
// builds a fresh world of N = 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "groupcoord/hash_store.h"
#include "groupcoord/process_group.h"
#include "pg_checks.h"
#include "test_support.h"

namespace groupcoord {
namespace testing {
namespace {

class ProcessGroupThreads : public ::testing::TestWithParam<int> {
 protected:
  /// Runs `body(world)` on every rank of a fresh world of GetParam() threads.
  void run(const std::function<void(ProcessGroup&)>& body,
           std::shared_ptr<Store> store = std::make_shared<HashStore>(std::chrono::seconds(60))) {
    const int n = GetParam();
    run_ranks_on_threads(n, [&](int rank) {
      ProcessGroupOptions options;
      options.name = "world";
      options.timeout = std::chrono::seconds(60);
      options.single_node = true;
      auto world = ProcessGroup::create_world(store, rank, n, options);
      EXPECT_EQ(world->rank(), rank);
      EXPECT_EQ(world->size(), n);
      body(*world);
      world->destroy();
    });
  }
};

TEST_P(ProcessGroupThreads, CollectivesOnEveryDType) { run(check_all_collectives_small); }

TEST_P(ProcessGroupThreads, Collectives64MiB) { run(check_collectives_64mib); }

TEST_P(ProcessGroupThreads, AllReduceOfSeveralChunks) { run(check_all_reduce_multi_chunk); }

// The direct (single-copy) all_reduce at every group size, from 64 KiB on: by default only groups
// of 2 take it, and only from 2 MiB.
TEST_P(ProcessGroupThreads, AllReduceThroughThePeersMemory) {
  ScopedEnv direct("GROUPCOORD_CPU_DIRECT_ALL_REDUCE_KIB", "64");
  run([](ProcessGroup& pg) {
    check_all_reduce_multi_chunk(pg);
    // Pieces of 256 KiB per rank and a tail, odd counts, the narrow types.
    for (std::size_t count : {16385u, 196609u}) {
      for (DType dtype : {DType::Float32, DType::Float16, DType::Int32}) {
        check_all_reduce(pg, dtype, ReduceOp::Sum, count, /*out_of_place=*/true);
        check_all_reduce(pg, dtype, ReduceOp::Min, count, /*out_of_place=*/false);
      }
    }
  });
}

TEST_P(ProcessGroupThreads, PointToPoint) {
  run([](ProcessGroup& pg) {
    for (std::size_t nbytes : {0, 1, 1023, 1 << 20}) check_send_recv(pg, nbytes);
    check_tags_are_independent(pg);
    check_many_async_sends_in_order(pg, 100);
    check_irecv_completion(pg);
    check_irecv_stream_order(pg);
    check_size_mismatch(pg);
    check_p2p_concurrent_with_collectives(pg);
  });
}

TEST_P(ProcessGroupThreads, BadArguments) { run(check_bad_arguments); }

TEST_P(ProcessGroupThreads, SubGroups) { run(check_subgroup_layouts); }

TEST_P(ProcessGroupThreads, AbsentRankTimesOut) { run(check_absent_rank_times_out); }

TEST_P(ProcessGroupThreads, DestroyWithPendingWork) { run(check_destroy_with_pending_work); }

TEST_P(ProcessGroupThreads, TwoWorldsOnOneStore) {
  // A second create_world on the same store (e.g. after destroy_distributed_environment) must
  // rendezvous afresh rather than read the first world's addresses.
  auto store = std::make_shared<HashStore>(std::chrono::seconds(60));
  run([](ProcessGroup& first) { first.barrier(); }, store);
  run([](ProcessGroup& second) { check_all_reduce(second, DType::Int32, ReduceOp::Sum, 9, false); },
      store);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ProcessGroupThreads, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "n" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace testing
}  // namespace groupcoord
