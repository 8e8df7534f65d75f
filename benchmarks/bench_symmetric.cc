// all_gather, reduce_scatter and all_reduce on bf16: the NCCL symmetric-memory path against the
// regular NCCL path, in the same process (two GroupCoordinators over the same ranks, the second
// made with GROUPCOORD_USE_NCCL_SYMM_MEM=1 and all_reduce always routed). For the multi-GPU run:
//
//   NCCL_NVLS_ENABLE=0 mpirun -np 2 build/benchmarks/bench_symmetric [max_bytes] [iterations]
//
// Sizes go from 1 KiB to max_bytes (default 1 GiB) in steps of 4x; "bytes" is the all_reduce
// tensor, the all_gather output and the reduce_scatter input (nccl-tests' convention). Rank 0
// prints one line per (op, size): microseconds per call on each path, their ratio, and how many
// calls the symmetric path really took (its counter), so a silent fallback shows. One GPU per
// rank where there are enough; NCCL_SYM_CTAS and NCCL_DEBUG_SUBSYS=TUNING pass through.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "groupcoord/cuda/stream.h"
#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"

namespace {

using groupcoord::DType;
using groupcoord::GroupCoordinator;
using groupcoord::Tensor;

using Call = std::function<Tensor(GroupCoordinator&, const Tensor&)>;

struct Op {
  const char* name;
  Call call;
  /// Elements of the input for a size in bytes, on `world_size` ranks.
  std::int64_t (*input_elements)(std::int64_t bytes, int world_size);
};

std::int64_t whole(std::int64_t bytes, int) { return bytes / 2; }
std::int64_t share(std::int64_t bytes, int world_size) { return bytes / 2 / world_size; }

const Op kOps[] = {
    {"all_gather", [](GroupCoordinator& g, const Tensor& x) { return g.all_gather(x, 0); }, share},
    {"reduce_scatter", [](GroupCoordinator& g, const Tensor& x) { return g.reduce_scatter(x, 0); },
     whole},
    {"all_reduce", [](GroupCoordinator& g, const Tensor& x) { return g.all_reduce(x); }, whole},
};

/// Microseconds per call of `iterations` back-to-back calls on the current stream.
double time_calls(GroupCoordinator& group, const Op& op, const Tensor& x, int iterations) {
  for (int i = 0; i < 3; ++i) op.call(group, x);  // warm-up: connections, allocator, scratch
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaStream_t stream = groupcoord::current_cuda_stream(group.device());
  cudaEventRecord(start, stream);
  for (int i = 0; i < iterations; ++i) op.call(group, x);
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 1000.0 * ms / iterations;
}

std::unique_ptr<GroupCoordinator> make_group(const char* name, int world_size, int local_rank) {
  std::vector<int> all(world_size);
  std::iota(all.begin(), all.end(), 0);
  return std::make_unique<GroupCoordinator>(std::vector<std::vector<int>>{all}, local_rank, "nccl",
                                            true, false, std::string(name));
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t max_bytes = argc > 1 ? std::atoll(argv[1]) : (1ll << 30);
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("bench_symmetric: no CUDA device visible; nothing to measure\n");
    return 0;
  }
  try {
    groupcoord::init_distributed_environment(-1, -1, "env://", -1, "nccl");
    const groupcoord::RendezvousResult info = groupcoord::world_info();
    unsetenv("GROUPCOORD_USE_NCCL_SYMM_MEM");
    auto regular = make_group("bench-regular", info.world_size, info.local_rank);
    setenv("GROUPCOORD_USE_NCCL_SYMM_MEM", "1", 1);
    setenv("GROUPCOORD_SYMM_ALL_REDUCE", "always", 1);
    // Room for the largest reduce_scatter (input + output) without falling back; the scratch
    // grows during each size's warm-up.
    setenv("GROUPCOORD_SYMM_SCRATCH_MAX_BYTES",
           std::to_string(std::max<std::int64_t>(3 * max_bytes, 64ll << 20)).c_str(), 1);
    auto symmetric = make_group("bench-symmetric", info.world_size, info.local_rank);
    const groupcoord::SymmetricMemoryStats on = symmetric->symmetric_memory_stats();
    const bool print = info.rank == 0;
    if (print) {
      std::printf("bench_symmetric: %d ranks, bf16, %d calls per size; symmetric path %s%s\n",
                  info.world_size, iterations, on.enabled ? "on, windows " : "OFF: ",
                  on.enabled ? on.window_kind.c_str() : on.disabled_reason.c_str());
      std::printf("%-15s %12s %12s %12s %8s %10s\n", "op", "bytes", "regular_us", "symm_us",
                  "ratio", "symm_calls");
    }
    for (const Op& op : kOps) {
      for (std::int64_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
        const std::int64_t n = op.input_elements(bytes, info.world_size);
        if (n == 0) continue;
        Tensor x = Tensor::empty({n}, DType::BFloat16, regular->device());
        // On the stream the calls use (a plain cudaMemset runs on the legacy stream, which our
        // non-blocking streams do not wait for).
        cudaStream_t stream = current_cuda_stream(regular->device());
        cudaMemsetAsync(x.data_ptr(), 0, x.nbytes(), stream);
        cudaStreamSynchronize(stream);
        const double plain_us = time_calls(*regular, op, x, iterations);
        const auto before = symmetric->symmetric_memory_stats().symmetric_calls;
        const double symm_us = time_calls(*symmetric, op, x, iterations);
        const auto taken = symmetric->symmetric_memory_stats().symmetric_calls - before;
        if (print) {
          std::printf("%-15s %12lld %12.2f %12.2f %8.3f %7lld/%d\n", op.name,
                      static_cast<long long>(bytes), plain_us, symm_us, symm_us / plain_us,
                      static_cast<long long>(taken), iterations + 3);
        }
      }
    }
    symmetric->destroy();
    regular->destroy();
    groupcoord::destroy_distributed_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_symmetric: %s\n", e.what());
    return 1;
  }
  return 0;
}
