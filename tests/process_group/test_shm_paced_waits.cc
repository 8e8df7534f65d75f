// The CPU group's shared-memory collectives pace their waits (process_group/shm_collectives.h,
// core/wait_pacing.h). Two ranks of one ShmCollectives segment as threads of this process; rank 0
// pauses regularly before each engine-like step (a small broadcast, then a 64 KiB all_reduce:
// three shared-memory steps in two calls), rank 1 is already waiting in it. With pacing (the
// default) rank 1 is awake when rank 0 publishes, so rank 0's publish makes no wake-up call; with
// GROUPCOORD_WAIT_PACING=0 (ctest runs this binary a second time so, as test_shm_paced_waits_off)
// rank 1 sleeps through every pause and rank 0 rings it, which also shows that the loop does
// produce the sleeps that pacing avoids. An idle rank still costs next to no CPU.
#include <sys/resource.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/wait_pacing.h"
#include "process_group/group_health.h"
#include "process_group/shm_collectives.h"

namespace groupcoord {
namespace {

using std::chrono::milliseconds;

/// The set-up's two collectives (ShmCollectives::SetupChannel) between two threads.
class TwoThreadChannel {
 public:
  ShmCollectives::SetupChannel for_rank(int rank) {
    ShmCollectives::SetupChannel channel;
    channel.broadcast = [this, rank](void* data, std::size_t bytes, int root) {
      if (rank == root)
        put([&] {
          bytes_.assign(static_cast<std::uint8_t*>(data), static_cast<std::uint8_t*>(data) + bytes);
        });
      sync();
      if (rank != root) put([&] { std::memcpy(data, bytes_.data(), bytes); });
      sync();  // nobody overwrites bytes_ before both have read it
    };
    channel.all_reduce_min = [this, rank](std::int32_t value) {
      put([&] { values_[rank] = value; });
      sync();
      std::int32_t least = 0;
      put([&] { least = std::min(values_[0], values_[1]); });
      sync();
      return least;
    };
    return channel;
  }

 private:
  template <typename F>
  void put(F f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f();
  }
  /// Returns once both threads have called it.
  void sync() {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    if (++arrived_ == 2) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<std::uint8_t> bytes_;
  std::int32_t values_[2] = {0, 0};
};

/// Both ranks' ShmCollectives of one new segment.
std::vector<std::unique_ptr<ShmCollectives>> two_ranks() {
  TwoThreadChannel channel;
  std::vector<std::unique_ptr<ShmCollectives>> ranks(2);
  auto make = [&](int rank) {
    ranks[rank] = ShmCollectives::create(
        rank, 2, "paced", std::make_shared<GroupHealth>("paced rank " + std::to_string(rank)),
        std::chrono::seconds(20), channel.for_rank(rank));
  };
  std::thread other(make, 1);
  make(0);
  other.join();
  return ranks;
}

/// What an engine's step sends over its CPU group: a little metadata from rank 0, then a
/// 64 KiB all_reduce (two steps: the split reduction).
void engine_step(ShmCollectives& group, int i) {
  std::int64_t metadata = i;
  group.broadcast(&metadata, sizeof(metadata), 0);
  std::vector<float> data(16384, 1.0f);
  group.all_reduce(data.data(), data.data(), data.size(), DType::Float32, ReduceOp::Sum);
  ASSERT_EQ(metadata, i);
  ASSERT_EQ(data.back(), 2.0f);
}

double thread_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-3;
}

constexpr auto kPause = milliseconds(5);

/// Rank 0 pauses kPause before each of `steps` engine steps, rank 1 waits in them on a thread;
/// returns, per step, whether rank 0's call made a wake-up call (rank 1 was asleep).
std::vector<bool> paced_steps(ShmCollectives& rank0, ShmCollectives& rank1, int steps) {
  std::thread waiter([&] {
    for (int i = 0; i < steps; ++i) engine_step(rank1, i);
  });
  std::vector<bool> rang;
  for (int i = 0; i < steps; ++i) {
    std::this_thread::sleep_for(kPause);
    const std::uint32_t before = rank0.wake_ups();
    engine_step(rank0, i);
    rang.push_back(rank0.wake_ups() != before);
  }
  waiter.join();
  return rang;
}

TEST(ShmPacedWaits, ARankWaitingThroughRegularPausesIsAwakeWhenThePeerPublishes) {
  auto ranks = two_ranks();
  ASSERT_TRUE(ranks[0] && ranks[1]) << "no shared memory for the collectives";
  // The first steps learn the pattern (four long waits); count the last 32 of 40. A wait that
  // the machine's noise makes irregular costs the next four steps their window (the pattern is
  // relearnt), seen once in about 20 runs on the 2-core VM: two are allowed. A loaded machine
  // (other tests on both cores) can break the pattern all along: up to three tries with pacing
  // on, the best one counts (with it off every try rings, so one is enough).
  const int tries = shm::WaitPacing::enabled_by_default() ? 3 : 1;
  long rings = 32;
  for (int t = 0; t < tries && rings > 10; ++t) {
    const std::vector<bool> rang = paced_steps(*ranks[0], *ranks[1], 40);
    rings = std::min<long>(rings, std::count(rang.end() - 32, rang.end(), true));
  }
  if (shm::WaitPacing::enabled_by_default()) {
    EXPECT_LE(rings, 10)
        << "rank 1 was asleep at rank 0's publish in " << rings
        << " of the last 32 steps after regular 5 ms pauses: its waits do not pace";
  } else {
    EXPECT_GE(rings, 24) << "with GROUPCOORD_WAIT_PACING=0 rank 1 should sleep through the pauses "
                            "(only "
                         << rings << " of 32 steps rang it): the test no longer measures pacing";
  }
}

TEST(ShmPacedWaits, AnIdleRankPollsAtMostOneWindow) {
  // After a pattern of 5 ms pauses, rank 0 pauses 300 ms: rank 1 polls at most through the one
  // window the pattern predicts (a few ms at most), then sleeps until rung.
  auto ranks = two_ranks();
  ASSERT_TRUE(ranks[0] && ranks[1]);
  paced_steps(*ranks[0], *ranks[1], 8);
  double cpu_ms = 0;
  std::thread waiter([&] {
    const double start = thread_cpu_ms();
    ranks[1]->barrier();
    cpu_ms = thread_cpu_ms() - start;
  });
  std::this_thread::sleep_for(milliseconds(300));
  ranks[0]->barrier();
  waiter.join();
  EXPECT_LT(cpu_ms, 30) << "rank 1 used " << cpu_ms << " ms of CPU waiting 300 ms for rank 0";
}

}  // namespace
}  // namespace groupcoord
