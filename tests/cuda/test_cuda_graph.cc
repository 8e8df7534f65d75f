// An all_reduce captured into a CUDA graph inside a GraphCaptureContext and replayed.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "cuda_fixture.h"
#include "groupcoord/cuda/graph_capture.h"

namespace groupcoord {
namespace testing {
namespace {

class CudaGraphCapture : public CudaCommTest {};

TEST_F(CudaGraphCapture, AllReduceReplays) {
  const int r = group_rank();
  const int n = group_size();
  constexpr std::int64_t kCount = 4096;
  const Tensor x = device_floats({kCount}, device(), [&](std::int64_t i) { return r + 1; });
  const CudaStream outer = current_cuda_stream(device());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  {
    GraphCaptureContext context(device());
    cudaStream_t stream = context.stream();
    ASSERT_EQ(current_cuda_stream(device()), stream);
    // Warm-up outside the capture (NCCL connects lazily), as vLLM does before capturing.
    host_values(comm().all_reduce(x));
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    Tensor out = comm().all_reduce(x);  // allocated and reduced inside the graph
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    // The output is a graph allocation that outlives each launch; relaunching needs this flag.
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
              cudaSuccess);
    for (int replay = 1; replay <= 4; ++replay) {
      // New input values each time: the graph reads x's memory when it runs.
      std::vector<float> host(kCount, static_cast<float>((r + 1) * replay));
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      upload(x.data_ptr(), host.data(), kCount * sizeof(float), device());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      const std::vector<double> got = host_values(out);
      const double expected = replay * n * (n + 1) / 2.0;
      for (std::int64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(got[i], expected) << "replay " << replay << " element " << i;
      }
    }
    out = Tensor();  // freed (stream-ordered) on the capture stream after the last replay
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  EXPECT_EQ(current_cuda_stream(device()), outer);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  // The communicator still works normally afterwards.
  const std::vector<double> after = host_values(comm().all_reduce(x));
  EXPECT_EQ(after[0], 4.0 * n * (n + 1) / 2.0);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
