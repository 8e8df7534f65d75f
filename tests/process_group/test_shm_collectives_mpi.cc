// The same-node shared-memory collectives of ProcessGroup (src/process_group/shm_collectives.h),
// under mpirun at world sizes 1, 2 and 4 (all ranks on this node). pg_checks.cc's collective
// checks (every dtype, 64 MiB, sub-groups, an absent rank) run on this path too, since it is on by
// default; these tests pin what is specific to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "groupcoord/errors.h"
#include "groupcoord/half.h"
#include "groupcoord/process_group.h"
#include "multi_process_test.h"
#include "test_support.h"

namespace groupcoord {
namespace testing {
namespace {

class ShmCollectivesTest : public MultiProcessTest {};

std::vector<long> job_pids(ProcessGroup& world) {
  std::vector<std::int64_t> pids(world.size());
  const std::int64_t mine = ::getpid();
  world.all_gather(&mine, pids.data(), 1, DType::Int64);
  return std::vector<long>(pids.begin(), pids.end());
}

std::shared_ptr<ProcessGroup> whole_group(ProcessGroup& world, const std::string& name) {
  std::vector<int> all(world.size());
  for (int r = 0; r < world.size(); ++r) all[r] = r;
  ProcessGroupOptions options;
  options.name = name;
  options.timeout = std::chrono::seconds(20);
  return world.new_group(all, options);
}

TEST_F(ShmCollectivesTest, SetUpWithTheGroupAndNoNameLeftBehind) {
  auto group = whole_group(*world(), "shm-setup");
  EXPECT_EQ(group->uses_shared_memory(), world_size() > 1);
  EXPECT_EQ(world()->uses_shared_memory(), world_size() > 1);
  world()->barrier();
  EXPECT_TRUE(shm_segments_of(job_pids(*world()), "gccpu-").empty())
      << "the segment's name is unlinked once every rank mapped it";
  group->destroy();
}

TEST_F(ShmCollectivesTest, OneRankSwitchingItOffKeepsTheWholeGroupOnGloo) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  if (rank() == world_size() - 1) setenv("GROUPCOORD_CPU_SHM", "0", 1);
  auto group = whole_group(*world(), "shm-off");
  std::vector<float> values(1000, static_cast<float>(rank() + 1));
  group->all_reduce(values.data(), values.size(), DType::Float32);
  unsetenv("GROUPCOORD_CPU_SHM");
  EXPECT_FALSE(group->uses_shared_memory()) << "the ranks agree: all on shared memory or none";
  const float expected = world_size() * (world_size() + 1) / 2.0f;
  for (float v : values) ASSERT_EQ(v, expected);
  group->destroy();
}

TEST_F(ShmCollectivesTest, ManyStepsAcrossBothBanksStayInStep) {
  // Alternating ops and sizes around the chunk size (256 KiB): every step reuses a bank the
  // previous-but-one step used, so a rank that overwrote a slot too early would show up here.
  auto group = whole_group(*world(), "shm-steps");
  const int n = world_size();
  for (int i = 0; i < 300; ++i) {
    const std::size_t count = (i % 3 == 0) ? 65536 + i : (i % 3 == 1) ? 1 + i : 3 * 65536 + 7;
    std::vector<std::int64_t> sum(count);
    for (std::size_t k = 0; k < count; ++k)
      sum[k] = static_cast<std::int64_t>(k) * (rank() + 1) + i;
    group->all_reduce(sum.data(), count, DType::Int64);
    for (std::size_t k = 0; k < count; k += 997) {
      ASSERT_EQ(sum[k],
                static_cast<std::int64_t>(k) * n * (n + 1) / 2 + static_cast<std::int64_t>(i) * n)
          << "call " << i << " element " << k;
    }
    const int root = i % n;
    std::vector<std::int32_t> data(count / 2 + 1, rank() == root ? i : -1);
    group->broadcast(data.data(), data.size(), DType::Int32, root);
    ASSERT_EQ(data.front(), i);
    ASSERT_EQ(data.back(), i);
    std::vector<std::int32_t> mine(count / 4 + 1, rank() * 1000 + i);
    std::vector<std::int32_t> all(mine.size() * n);
    group->all_gather(mine.data(), all.data(), mine.size(), DType::Int32);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(all[r * mine.size()], r * 1000 + i);
      ASSERT_EQ(all[(r + 1) * mine.size() - 1], r * 1000 + i);
    }
  }
  EXPECT_EQ(group->uses_shared_memory(), n > 1);
  group->destroy();
}

TEST_F(ShmCollectivesTest, SmallBroadcastsLetTheRootRunAheadByTheEagerSlotsAndNoFurther) {
  // The readers arrive 200 ms late: the root's first kEagerSlots - 1 broadcasts (at most
  // kEagerBytes each) return without them, the next one waits until the slot it reuses was read.
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  auto group = whole_group(*world(), "shm-eager");
  ASSERT_TRUE(group->uses_shared_memory());
  constexpr int kAhead = 15;  // ShmCollectives::kEagerSlots - 1
  constexpr auto kLate = std::chrono::milliseconds(200);
  group->barrier();
  const auto start = std::chrono::steady_clock::now();
  if (rank() != 0) std::this_thread::sleep_for(kLate);
  for (int i = 0; i <= kAhead; ++i) {
    const std::size_t count = i == kAhead ? 256 : 1 + 16 * i;  // 4 B .. 1 KiB
    std::vector<std::int32_t> data(count, -1);
    if (rank() == 0) {
      for (std::size_t k = 0; k < count; ++k) data[k] = i * 10000 + static_cast<int>(k);
    }
    group->broadcast(data.data(), data.size(), DType::Int32, 0);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (rank() == 0 && i == kAhead - 1) {
      EXPECT_LT(elapsed, kLate / 2)
          << "the root waited for its late readers within " << kAhead << " broadcasts";
    }
    if (rank() == 0 && i == kAhead) {
      EXPECT_GE(elapsed, kLate) << "the root reused an eager slot before its readers read it";
    }
    for (std::size_t k = 0; k < count; ++k) {
      ASSERT_EQ(data[k], i * 10000 + static_cast<int>(k)) << "broadcast " << i << " element " << k;
    }
  }
  group->destroy();
}

TEST_F(ShmCollectivesTest, EagerAndSlotBroadcastsOfChangingRootsStayInStep) {
  // Roots change every 7 calls, sizes cross kEagerBytes (1 KiB) both ways, a reader now and then
  // falls behind, and other collectives come in between: every value arrives.
  auto group = whole_group(*world(), "shm-eager-mix");
  const int n = world_size();
  for (int i = 0; i < 400; ++i) {
    const int root = (i / 7) % n;
    const std::size_t count = i % 5 == 4 ? 257 + i : 1 + (i * 131) % 256;  // over, up to 1 KiB
    std::vector<std::int32_t> data(count, -1);
    if (rank() == root) {
      for (std::size_t k = 0; k < count; ++k) data[k] = i * 7919 + static_cast<int>(k);
    }
    if (rank() == n - 1 && i % 23 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    group->broadcast(data.data(), data.size(), DType::Int32, root);
    for (std::size_t k = 0; k < count; ++k) {
      ASSERT_EQ(data[k], i * 7919 + static_cast<int>(k)) << "broadcast " << i << " from " << root;
    }
    if (i % 50 == 49) {
      std::int64_t value = rank() + i;
      group->all_reduce(&value, 1, DType::Int64);
      ASSERT_EQ(value,
                static_cast<std::int64_t>(n) * (n - 1) / 2 + static_cast<std::int64_t>(n) * i);
    }
  }
  group->destroy();
}

// The root's input may overlap its output (ProcessGroup::gather's contract): a few bytes below
// its own place, an earlier rank's place, exactly its own place. The shared-memory paths write
// the others' parts while the root's input is still being read, so such an input is staged; this
// failed on the single-copy path (an earlier rank's part read over the input; the streamed copy
// of 4 MiB and more running forward over its own source) and on the slots (a later chunk of the
// input overwritten before it was copied).
TEST_F(ShmCollectivesTest, GatherTakesARootInputThatOverlapsItsOutput) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int n = world_size();
  setenv("GROUPCOORD_CPU_SINGLE_COPY", "0", 1);
  auto slots = whole_group(*world(), "gather-overlap-slots");
  setenv("GROUPCOORD_CPU_SHM", "0", 1);
  auto gloo = whole_group(*world(), "gather-overlap-gloo");
  unsetenv("GROUPCOORD_CPU_SHM");
  unsetenv("GROUPCOORD_CPU_SINGLE_COPY");
  auto direct = whole_group(*world(), "gather-overlap-direct");
  EXPECT_TRUE(direct->uses_single_copy()) << "cross-memory attach refused on this machine?";
  EXPECT_FALSE(gloo->uses_shared_memory());
  constexpr std::size_t kStreamed = (std::size_t{4} << 20) / 4 + 16;  // 4 MiB and 64 B
  constexpr std::size_t kChunks = (std::size_t{600} << 10) / 4 + 3;   // 3 slot chunks
  struct Case {
    int root;
    std::ptrdiff_t shift;  ///< the root's input starts this many elements after out[root * count]
    const char* what;
  };
  for (ProcessGroup* g : {direct.get(), slots.get(), gloo.get()}) {
    for (std::size_t count : {kStreamed, kChunks}) {
      const auto c = static_cast<std::ptrdiff_t>(count);
      for (const Case& k :
           {Case{0, -2, "8 bytes below its own place"}, Case{n - 1, -(n - 1) * c, "rank 0's place"},
            Case{n - 1, 0, "exactly its own place"}}) {
        const std::size_t pad = 64;
        std::vector<std::int32_t> buffer(pad + n * count + pad, -7);
        std::int32_t* out = buffer.data() + pad;
        std::vector<std::int32_t> own(count);
        for (std::size_t i = 0; i < count; ++i) own[i] = rank() * 1000003 + static_cast<int>(i);
        const std::int32_t* in = own.data();
        if (rank() == k.root) {
          std::int32_t* placed = out + k.root * c + k.shift;
          std::copy(own.begin(), own.end(), placed);
          in = placed;
        }
        g->gather(in, rank() == k.root ? out : nullptr, count, DType::Int32, k.root);
        if (rank() != k.root) continue;
        std::size_t wrong = 0;
        for (int r = 0; r < n; ++r) {
          for (std::size_t i = 0; i < count; ++i) {
            wrong += out[r * count + i] != r * 1000003 + static_cast<int>(i);
          }
        }
        EXPECT_EQ(wrong, 0u) << g->name() << ": root " << k.root << "'s input at " << k.what << ", "
                             << count * 4 << " bytes per rank";
      }
    }
  }
  slots->destroy();
  gloo->destroy();
  direct->destroy();
}

TEST_F(ShmCollectivesTest, LargeMessagesAreTheSameThroughSingleCopyAndThroughTheSlots) {
  // The same large broadcast, all_gather and gather on a group that reads the peers' buffers
  // directly and on one that goes through the slots (GROUPCOORD_CPU_SINGLE_COPY=0).
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int n = world_size();
  setenv("GROUPCOORD_CPU_SINGLE_COPY", "0", 1);
  auto slots = whole_group(*world(), "shm-slots");
  unsetenv("GROUPCOORD_CPU_SINGLE_COPY");
  auto direct = whole_group(*world(), "shm-direct");
  EXPECT_FALSE(slots->uses_single_copy());
  EXPECT_TRUE(direct->uses_single_copy()) << "cross-memory attach refused on this machine?";
  for (ProcessGroup* g : {slots.get(), direct.get()}) {
    const std::size_t per_rank = (300 << 10) / sizeof(std::int32_t) + 3;  // 300 KiB and a bit
    std::vector<std::int32_t> mine(per_rank), all(per_rank * n, -1);
    for (std::size_t i = 0; i < per_rank; ++i) mine[i] = rank() * 1000003 + static_cast<int>(i);
    g->all_gather(mine.data(), all.data(), per_rank, DType::Int32);
    for (int r = 0; r < n; ++r) {
      for (std::size_t i = 0; i < per_rank; i += 4099) {
        ASSERT_EQ(all[r * per_rank + i], r * 1000003 + static_cast<int>(i)) << g->name();
      }
      ASSERT_EQ(all[(r + 1) * per_rank - 1], r * 1000003 + static_cast<int>(per_rank - 1));
    }
    std::vector<std::int32_t> gathered(rank() == 0 ? per_rank * n : 0, -1);
    g->gather(mine.data(), gathered.data(), per_rank, DType::Int32, 0);
    if (rank() == 0) ASSERT_EQ(gathered, all) << g->name();
    const int root = n - 1;
    std::vector<std::int64_t> data((1 << 20) / 8 + 5);  // 1 MiB and a bit
    for (std::size_t i = 0; i < data.size(); ++i) {
      data[i] = rank() == root ? static_cast<std::int64_t>(i * 7 + 1) : -1;
    }
    g->broadcast(data.data(), data.size(), DType::Int64, root);
    for (std::size_t i = 0; i < data.size(); ++i) {
      ASSERT_EQ(data[i], static_cast<std::int64_t>(i * 7 + 1)) << g->name() << " element " << i;
    }
  }
  slots->destroy();
  direct->destroy();
}

TEST_F(ShmCollectivesTest, NarrowFloatSumsAccumulateInFloatAndRoundOnce) {
  // Rank 0 adds a large value, every other rank 1: rounding after each pair would lose every 1
  // (at 256, bf16's spacing is 2; at 2048, fp16's is 2); one rounding of the float sum keeps them.
  if (world_size() < 3) GTEST_SKIP() << "needs three ranks for a pair-wise rounding to differ";
  const int n = world_size();
  auto group = whole_group(*world(), "shm-narrow");
  ASSERT_TRUE(group->uses_shared_memory());
  std::vector<std::uint16_t> bf(5, float_to_bfloat16(rank() == 0 ? 256.0f : 1.0f));
  group->all_reduce(bf.data(), bf.size(), DType::BFloat16);
  EXPECT_EQ(bf.front(), float_to_bfloat16(256.0f + (n - 1))) << bfloat16_to_float(bf.front());
  std::vector<std::uint16_t> half(5, float_to_half(rank() == 0 ? 2048.0f : 1.0f));
  group->all_reduce(half.data(), half.size(), DType::Float16);
  EXPECT_EQ(half.back(), float_to_half(2048.0f + (n - 1))) << half_to_float(half.back());
  group->destroy();
}

TEST_F(ShmCollectivesTest, ARankThatDoesNotComeNamesItselfInTheTimeout) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks";
  std::vector<int> all(world_size());
  for (int r = 0; r < world_size(); ++r) all[r] = r;
  ProcessGroupOptions options;
  options.name = "shm-absent";
  options.timeout = std::chrono::milliseconds(1500);
  auto group = world()->new_group(all, options);
  ASSERT_TRUE(group->uses_shared_memory());
  const int absent = world_size() - 1;
  if (rank() != absent) {
    float x = 1;
    try {
      group->all_reduce(&x, 1, DType::Float32);
      ADD_FAILURE() << "an all_reduce without rank " << absent << " returned";
    } catch (const TimeoutError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("shm-absent"), std::string::npos) << what;
      EXPECT_NE(what.find("all_reduce"), std::string::npos) << what;
      // The first to reach its deadline says so; the others hear it from that rank at once, and
      // name the rank they waited for too.
      const bool named =
          what.find(" " + std::to_string(absent) + " did not arrive") != std::string::npos ||
          what.find("waited for rank(s) " + std::to_string(absent)) != std::string::npos;
      EXPECT_TRUE(named) << what;
    }
    EXPECT_TRUE(group->is_broken());
    EXPECT_THROW(group->barrier(), DistributedError) << "a broken group fails fast";
  }
  world()->barrier();
  if (rank() == absent) {
    // It comes late: the others gave up at their deadline and said so in the segment, so it
    // fails at once (with a timeout, as theirs) rather than at its own deadline (1.5 s).
    const auto start = std::chrono::steady_clock::now();
    try {
      group->barrier();
      ADD_FAILURE() << "a barrier of a group the others gave up on returned";
    } catch (const TimeoutError& e) {
      EXPECT_NE(std::string(e.what()).find("gave up"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
    EXPECT_TRUE(group->is_broken());
  }
  world()->barrier();
  group->destroy();
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
