// Surviving a dead rank on the GPU (docs/elastic.md): 4 forked ranks on the nccl backend
// (tests/harness/forked_job.h; several ranks share a GPU through their own NCCL host ids), with
// NCCL symmetric memory on. Rank 3 is SIGKILLed while the ranks all-reduce on the EP group (the
// watchdog aborts that NCCL communicator, so the survivors create a new one); then rank 2 while
// the survivors sit in a CPU barrier (EP's NCCL communicator is still alive: ncclCommShrink keeps
// it where the loaded NCCL has it). After each shrink the CUDA collectives give the right results
// and the new communicator registers its scratch window once. Skips where no GPU is visible (the
// probe runs in a child: CUDA must not be initialised in the process that forks the ranks).
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda_values.h"
#include "forked_job.h"
#include "groupcoord/errors.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/tensor.h"
#include "groupcoord/world.h"
#include "test_support.h"

namespace groupcoord {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using testing::Job;

/// Whether a CUDA device is visible, asked in a child process.
bool gpu_visible() {
  const pid_t child = ::fork();
  if (child == 0) {
    int count = 0;
    ::_exit(cudaGetDeviceCount(&count) == cudaSuccess && count > 0 ? 0 : 1);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// A float32 tensor of `n` elements equal to `value` on `device`, uploaded through the current
/// stream (cuda_values.h: a plain cudaMemcpy on the legacy stream is not ordered before our
/// non-blocking streams).
Tensor device_filled(std::int64_t n, float value, Device device) {
  return testing::device_floats({n}, device, [value](std::int64_t) { return value; });
}

void expect_all(int rank, const std::string& what, const Tensor& t, float (*expected)(std::size_t),
                float scale = 1.0f) {
  const std::vector<double> host = testing::host_values(t);
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != expected(i) * scale) {
      Job::fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(host[i]) +
                          ", expected " + std::to_string(expected(i) * scale));
    }
  }
}

/// The CUDA collectives on `ep` against sequential results, then the new communicator's windows.
void check_cuda_collectives(GroupCoordinator& ep, int rank, const std::string& when) {
  const Device device = ep.device();
  const int n = ep.world_size();
  const float me = static_cast<float>(ep.rank_in_group());
  const float total = n * (n + 1) / 2.0f;
  for (int round = 0; round < 3; ++round) {
    expect_all(
        rank, when + " all_reduce", ep.all_reduce(device_filled(1 << 16, me + 1.0f, device)),
        [](std::size_t) { return 1.0f; }, total);
  }
  expect_all(rank, when + " all_gather", ep.all_gather(device_filled(4, me, device), 0),
             [](std::size_t i) { return static_cast<float>(i / 4); });
  expect_all(
      rank, when + " reduce_scatter", ep.reduce_scatter(device_filled(2 * n, me + 1.0f, device), 0),
      [](std::size_t) { return 1.0f; }, total);
  expect_all(rank, when + " broadcast",
             ep.broadcast(device_filled(16, me == n - 1 ? 5.0f : 0.0f, device), n - 1),
             [](std::size_t) { return 5.0f; });
  const SymmetricMemoryStats stats = ep.symmetric_memory_stats();
  std::fprintf(stderr, "[rank %d] %s: symmetric %s%s, windows %lld, symmetric calls %lld\n", rank,
               when.c_str(), stats.enabled ? "on" : "off", stats.disabled_reason.c_str(),
               static_cast<long long>(stats.windows_registered),
               static_cast<long long>(stats.symmetric_calls));
  if (stats.enabled && stats.windows_registered != 1) {
    Job::fail(rank, when + ": the new communicator registered " +
                        std::to_string(stats.windows_registered) + " windows, not one");
  }
  if (stats.enabled && stats.symmetric_calls == 0) {
    Job::fail(rank, when + ": no collective went through the new communicator's window");
  }
}

/// The dead ranks of the RankFailureError that `step` (repeated) ends with.
template <typename Step>
std::vector<int> until_a_death(Job& job, int rank, const std::string& marker, Step step) {
  step();
  job.at(rank, marker);
  try {
    for (;;) step();
  } catch (const RankFailureError& e) {
    std::fprintf(stderr, "[rank %d] RankFailureError: %s\n", rank, e.what());
    return e.dead_ranks();
  }
}

void survive_on_the_gpu(Job& job, int rank) {
  set_rank_failure_policy(RankFailurePolicy::kIdentify);
  initialize_model_parallel(1, 1, 1, 1, /*data_parallel_size=*/4);  // EP spans the world
  GroupCoordinator& ep = get_ep_group();
  check_cuda_collectives(ep, rank, "world size 4");
  Tensor x = device_filled(1 << 16, 1.0f, ep.device());

  // Death during a CUDA collective: the watchdog aborts EP's NCCL communicator.
  std::vector<int> dead = until_a_death(job, rank, "working-4", [&] {
    ep.all_reduce(x);
    if (cudaDeviceSynchronize() != cudaSuccess) Job::fail(rank, "cudaDeviceSynchronize failed");
  });
  if (dead != std::vector<int>{3}) Job::fail(rank, "the first error did not name world rank 3");
  ModelParallelShrink shrink = shrink_model_parallel(dead);
  job.at(rank, "shrunk-3");
  if (shrink.world_size != 3 || ep.world_size() != 3 || ep.rank_in_group() != rank) {
    Job::fail(rank, "the EP group is not the three survivors");
  }
  check_cuda_collectives(ep, rank, "world size 3");

  // Death while the survivors wait in a CPU barrier: EP's NCCL communicator is alive.
  dead = until_a_death(job, rank, "working-3", [] { get_world_group().barrier(); });
  if (dead != std::vector<int>{2}) Job::fail(rank, "the second error did not name world rank 2");
  shrink = shrink_model_parallel(dead);
  job.at(rank, "shrunk-2");
  if (shrink.world_size != 2 || ep.world_size() != 2 || ep.rank_in_group() != rank) {
    Job::fail(rank, "the EP group is not the two survivors");
  }
  check_cuda_collectives(ep, rank, "world size 2");
  get_world_group().barrier();
}

TEST(CudaElastic, SurvivorsShrinkTheNcclCommunicatorAndComputeRightResults) {
  if (!gpu_visible()) GTEST_SKIP() << "no CUDA device visible: skipping the GPU test";
  groupcoord::testing::TempDir dir;
  groupcoord::testing::ScopedEnv symmetric("GROUPCOORD_USE_NCCL_SYMM_MEM", "1");
  groupcoord::testing::JobOptions options;
  options.backend = "nccl";
  options.timeout = 20s;
  options.nccl_host_per_rank = true;
  Job job(dir.path(), "cuda-elastic-" + std::to_string(::getpid()), 4, options);
  for (int r = 0; r < 4; ++r) job.start(r, survive_on_the_gpu);
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(job.wait_for(r, "working-4", 120s)) << "rank " << r;
  auto killed = job.kill(3);
  for (int r : {0, 1, 2}) EXPECT_TRUE(job.wait_for(r, "shrunk-3", 60s)) << "rank " << r;
  std::printf("[cuda elastic] 4 -> 3 (killed in a CUDA all_reduce): shrunk %.2f s after the kill\n",
              std::chrono::duration<double>(Clock::now() - killed).count());
  for (int r : {0, 1, 2}) ASSERT_TRUE(job.wait_for(r, "working-3", 120s)) << "rank " << r;
  killed = job.kill(2);
  for (int r : {0, 1}) EXPECT_TRUE(job.wait_for(r, "shrunk-2", 60s)) << "rank " << r;
  std::printf("[cuda elastic] 3 -> 2 (killed in a CPU barrier): shrunk %.2f s after the kill\n",
              std::chrono::duration<double>(Clock::now() - killed).count());
  const auto deadline = Clock::now() + 120s;
  for (int r : {0, 1}) {
    const int outcome = job.wait_exit(r, deadline);
    EXPECT_EQ(outcome, testing::kCompleted)
        << "rank " << r << ": " << testing::outcome_name(outcome);
  }
}

}  // namespace
}  // namespace groupcoord
