// Surviving a dead rank on the GPU (docs/elastic.md): 3 forked ranks on the nccl backend
// (tests/harness/forked_job.h; several ranks share a GPU through their own NCCL host ids), with
// NCCL symmetric memory on. Rank 2 is SIGKILLed while the ranks all-reduce on the EP group; the
// survivors get RankFailureError, shrink (ncclCommShrink where the loaded NCCL has it, else a new
// communicator), and the CUDA collectives then give the right results at world size 2, with the
// scratch window registered once on the new communicator. Skips where no GPU is visible (the
// probe runs in a child: CUDA must not be initialised in the process that forks the ranks).
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

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

/// A float32 tensor of `n` elements equal to `value` on `device`.
Tensor device_filled(std::int64_t n, float value, Device device) {
  Tensor t = Tensor::empty({n}, DType::Float32, device);
  const std::vector<float> host(n, value);
  if (cudaMemcpy(t.data_ptr(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice) !=
      cudaSuccess) {
    throw std::runtime_error("cudaMemcpy to the device failed");
  }
  return t;
}

std::vector<float> to_host(const Tensor& t) {
  std::vector<float> host(t.numel());
  if (cudaMemcpy(host.data(), t.data_ptr(), host.size() * sizeof(float), cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    throw std::runtime_error("cudaMemcpy to the host failed");
  }
  return host;
}

void expect_all(int rank, const std::string& what, const Tensor& t, float (*expected)(std::size_t),
                float scale = 1.0f) {
  const std::vector<float> host = to_host(t);
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (host[i] != expected(i) * scale) {
      Job::fail(rank, what + ": element " + std::to_string(i) + " is " + std::to_string(host[i]) +
                          ", expected " + std::to_string(expected(i) * scale));
    }
  }
}

void survive_on_the_gpu(Job& job, int rank) {
  set_rank_failure_policy(RankFailurePolicy::kIdentify);
  initialize_model_parallel(1, 1, 1, 1, /*data_parallel_size=*/3);  // EP spans the world
  GroupCoordinator& ep = get_ep_group();
  const Device device = ep.device();
  Tensor x = device_filled(1 << 16, 1.0f, device);
  ep.all_reduce(x);
  cudaDeviceSynchronize();
  const std::int64_t windows_before = ep.symmetric_memory_stats().windows_registered;
  job.at(rank, "working");
  std::vector<int> dead;
  try {
    for (;;) {
      ep.all_reduce(x);
      if (cudaDeviceSynchronize() != cudaSuccess) Job::fail(rank, "cudaDeviceSynchronize failed");
    }
  } catch (const RankFailureError& e) {
    std::fprintf(stderr, "[rank %d] RankFailureError: %s\n", rank, e.what());
    dead = e.dead_ranks();
  }
  if (dead != std::vector<int>{2}) Job::fail(rank, "the error did not name world rank 2");
  const ModelParallelShrink shrink = shrink_model_parallel(dead);
  job.at(rank, "shrunk");
  if (shrink.world_size != 2 || ep.world_size() != 2 || ep.rank_in_group() != rank) {
    Job::fail(rank, "the EP group is not the two survivors");
  }
  const SymmetricMemoryStats fresh = ep.symmetric_memory_stats();
  std::fprintf(
      stderr, "[rank %d] after the shrink: symmetric %s (%s), windows %lld (before %lld)\n", rank,
      fresh.enabled ? "on" : "off", fresh.disabled_reason.c_str(),
      static_cast<long long>(fresh.windows_registered), static_cast<long long>(windows_before));
  // The CUDA collectives over the survivors, against sequential results.
  const float me = static_cast<float>(rank);
  for (int round = 0; round < 3; ++round) {
    expect_all(rank, "all_reduce", ep.all_reduce(device_filled(1 << 16, me + 1.0f, device)),
               [](std::size_t) { return 3.0f; });
  }
  expect_all(rank, "all_gather", ep.all_gather(device_filled(4, me, device), 0),
             [](std::size_t i) { return static_cast<float>(i / 4); });
  expect_all(rank, "reduce_scatter", ep.reduce_scatter(device_filled(8, me + 1.0f, device), 0),
             [](std::size_t) { return 3.0f; });
  expect_all(rank, "broadcast", ep.broadcast(device_filled(16, rank == 1 ? 5.0f : 0.0f, device), 1),
             [](std::size_t) { return 5.0f; });
  const SymmetricMemoryStats after = ep.symmetric_memory_stats();
  if (fresh.enabled && after.windows_registered != 1) {
    Job::fail(rank, "the new communicator registered " + std::to_string(after.windows_registered) +
                        " windows, not one");
  }
  if (fresh.enabled && after.symmetric_calls == 0) {
    Job::fail(rank, "no collective went through the new communicator's window");
  }
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
  Job job(dir.path(), "cuda-elastic-" + std::to_string(::getpid()), 3, options);
  for (int r = 0; r < 3; ++r) job.start(r, survive_on_the_gpu);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(job.wait_for(r, "working", 120s)) << "rank " << r;
  const auto killed = job.kill(2);
  for (int r : {0, 1}) {
    EXPECT_TRUE(job.wait_for(r, "shrunk", 60s)) << "rank " << r << " did not shrink";
  }
  std::printf("[cuda elastic] survivors shrunk %.2f s after the kill\n",
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
