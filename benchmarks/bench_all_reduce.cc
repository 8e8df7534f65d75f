// Per-call time of GroupCoordinator::all_reduce on a 1-element float32 tensor, from C++: the
// reference for the Python binding's overhead (benchmarks/bench_python_overhead.py).
//
//   mpirun -np 2 build/benchmarks/bench_all_reduce [iterations] [rounds]
//
// Every rank runs the same loop over the TP group (the whole world); rank 0 prints the per-call
// time of each round and the median.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "groupcoord/groupcoord.h"
#include "groupcoord/parallel_state.h"

namespace {

using groupcoord::DType;
using groupcoord::GroupCoordinator;
using groupcoord::Tensor;

/// Seconds per call of `iterations` back-to-back all_reduce calls.
double time_all_reduce(GroupCoordinator& group, const Tensor& x, int iterations) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) group.all_reduce(x);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / iterations;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  try {
    // Host memory over Gloo, also on hosts with GPUs (where the default backend is nccl).
    groupcoord::init_distributed_environment(-1, -1, "env://", -1, "gloo");
    const int world_size = groupcoord::get_world_group().world_size();
    groupcoord::initialize_model_parallel(world_size, 1, 1, 1, 1, "gloo");
    GroupCoordinator& tp = groupcoord::get_tp_group();
    Tensor x = Tensor::empty({1}, DType::Float32);
    *x.data_ptr<float>() = 1.0f;
    time_all_reduce(tp, x, iterations / 10 + 1);  // warm-up: connections, allocator
    std::vector<double> per_call;
    for (int r = 0; r < rounds; ++r) {
      per_call.push_back(time_all_reduce(tp, x, iterations));
      if (tp.rank_in_group() == 0) {
        std::printf("round %d: %.2f us/call\n", r, per_call.back() * 1e6);
      }
    }
    if (tp.rank_in_group() == 0) {
      std::printf("C++ all_reduce(1 x float32), %d ranks: median %.2f us/call\n", world_size,
                  median(per_call) * 1e6);
    }
    groupcoord::get_world_group().barrier();
    groupcoord::destroy_distributed_environment();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_all_reduce: %s\n", e.what());
    return 1;
  }
  return 0;
}
