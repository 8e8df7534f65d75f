// CUDA graphs the way engines capture them: an all_reduce captured inside a GraphCaptureContext
// after a warm-up; every op of a fresh communicator whose first call happens inside the capture
// (vLLM's own pynccl graph test does no call before it), replayed many times with the inputs
// rewritten and every result checked; several graphs on one communicator; a failed capture that
// leaves the communicator usable.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

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

// A captured op: its result tensor (captured allocations included) and the value expected at
// element i for a given replay.
struct CapturedOp {
  std::string name;
  Tensor result;
  std::function<double(int replay, std::int64_t i)> expected;
};

// The inputs of the captured ops, rewritten before each replay: rank r holds
// (r + 1) * replay + i at element i (x: kRows x kCols, wide: world size times as many rows).
struct ReplayInputs {
  static constexpr std::int64_t kRows = 4, kCols = 8, kBlock = kRows * kCols;
  Tensor x, wide, broadcast_buffer;

  ReplayInputs(int n, Device device)
      : x(Tensor::empty({kRows, kCols}, DType::Float32, device)),
        wide(Tensor::empty({n * kRows, kCols}, DType::Float32, device)),
        broadcast_buffer(Tensor::empty({kRows, kCols}, DType::Float32, device)) {}

  void write(int rank, int replay, Device device) const {
    for (const Tensor* t : {&x, &wide, &broadcast_buffer}) {
      std::vector<float> host(static_cast<std::size_t>(t->numel()));
      for (std::size_t i = 0; i < host.size(); ++i) {
        host[i] = static_cast<float>((rank + 1) * replay + static_cast<std::int64_t>(i));
      }
      upload(t->data_ptr(), host.data(), host.size() * sizeof(float), device);
    }
  }
};

// Captures every op of `c` on the current stream (which the caller is capturing) and says what
// each result must hold after a replay.
std::vector<CapturedOp> capture_every_op(CudaCommunicator& c, const ReplayInputs& in,
                                         const Tensor& all_reduce_out) {
  const int r = c.rank_in_group();
  const int n = c.world_size();
  const double rank_sum = n * (n + 1) / 2.0;  // sum of (q + 1) over the ranks
  constexpr std::int64_t kRows = ReplayInputs::kRows, kCols = ReplayInputs::kCols;
  constexpr std::int64_t kBlock = ReplayInputs::kBlock;
  const std::vector<std::int64_t> uniform(n, kRows);
  auto reduced = [=](int replay, std::int64_t i) { return replay * rank_sum + n * i; };
  // Gathered along dim 0: block q is rank q's x.
  auto gathered_rows = [=](int replay, std::int64_t i) {
    return (i / kBlock + 1) * replay + i % kBlock;
  };
  // Scattered along dim 0: this rank's block of the sum of the wide inputs.
  auto scattered = [=](int replay, std::int64_t i) { return reduced(replay, r * kBlock + i); };
  std::vector<CapturedOp> ops;
  ops.push_back({"all_reduce", c.all_reduce(in.x), reduced});
  ops.push_back({"all_reduce(out)", c.all_reduce(in.x, all_reduce_out), reduced});
  ops.push_back({"all_gather dim 0", c.all_gather(in.x, 0), gathered_rows});
  ops.push_back({"all_gather dim -1", c.all_gather(in.x, -1), [=](int replay, std::int64_t i) {
                   const std::int64_t row = i / (n * kCols), q = (i % (n * kCols)) / kCols;
                   return (q + 1) * replay + row * kCols + i % kCols;
                 }});
  ops.push_back({"reduce_scatter", c.reduce_scatter(in.wide, 0), scattered});
  ops.push_back({"all_gatherv", c.all_gatherv(in.x, 0, uniform), gathered_rows});
  ops.push_back({"reduce_scatterv", c.reduce_scatterv(in.wide, 0, uniform), scattered});
  // Uneven sizes (from 2 ranks on) take the v-variants' own path and allocate their results:
  // odd ranks give one row fewer; rank 0 gets one row more, rank 1 one fewer.
  std::vector<std::int64_t> given(n), got(n);
  for (int q = 0; q < n; ++q) {
    given[q] = kRows - q % 2;
    got[q] = n == 1 ? kRows : kRows + (q == 0 ? 1 : q == 1 ? -1 : 0);
  }
  ops.push_back({"all_gatherv uneven", c.all_gatherv(in.x.narrow(0, 0, given[r]), 0, given),
                 [=](int replay, std::int64_t i) {
                   int q = 0;
                   while (i >= given[q] * kCols) i -= given[q++] * kCols;
                   return (q + 1) * replay + static_cast<double>(i);
                 }});
  std::int64_t first = 0;
  for (int q = 0; q < r; ++q) first += got[q];
  ops.push_back({"reduce_scatterv uneven", c.reduce_scatterv(in.wide, 0, got),
                 [=](int replay, std::int64_t i) { return reduced(replay, first * kCols + i); }});
  ops.push_back({"broadcast", c.broadcast(in.broadcast_buffer, 0),
                 [](int replay, std::int64_t i) { return replay + i; }});
  if (n == 2) {
    if (r == 0) {
      c.send(in.x, 1);
    } else {
      ops.push_back({"recv", c.recv({kRows, kCols}, DType::Float32, 0),
                     [](int replay, std::int64_t i) { return replay + i; }});
    }
  }
  return ops;
}

void expect_replay_results(const std::vector<CapturedOp>& ops, int replay) {
  for (const CapturedOp& op : ops) {
    const std::vector<double> got = host_values(op.result);
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], op.expected(replay, static_cast<std::int64_t>(i)))
          << op.name << ", replay " << replay << ", element " << i;
    }
  }
}

// The measured failure: a fresh communicator whose first call is inside a capture (global
// mode, the capture on a side stream, not the communicator's), then many replays.
TEST_F(CudaGraphCapture, EveryOpOfAFreshCommunicatorIsCapturedOnItsFirstCall) {
  std::unique_ptr<CudaCommunicator> c =
      make_communicator("cudatest-graph-first", std::chrono::seconds(60));
  const int r = c->rank_in_group();
  const int replays = c->world_size() <= 2 ? 1000 : 100;  // more ranks time-slice one GPU
  ReplayInputs in(c->world_size(), device());
  const Tensor all_reduce_out = Tensor::empty(in.x.shape(), in.x.dtype(), device());
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<CapturedOp> ops;
  {
    CudaStreamGuard on_side(device(), side);
    ASSERT_EQ(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal), cudaSuccess);
    ops = capture_every_op(*c, in, all_reduce_out);
    ASSERT_EQ(cudaStreamEndCapture(side, &graph), cudaSuccess) << "the capture was invalidated";
  }
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaSuccess);
  for (int replay = 1; replay <= replays; ++replay) {
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    in.write(r, replay, device());
    ASSERT_EQ(cudaGraphLaunch(exec, side), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
    ASSERT_NO_FATAL_FAILURE(expect_replay_results(ops, replay));
  }
  // A second graph on the same communicator, captured after the first was replayed.
  cudaGraph_t second = nullptr;
  cudaGraphExec_t second_exec = nullptr;
  Tensor again;
  {
    CudaStreamGuard on_side(device(), side);
    ASSERT_EQ(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal), cudaSuccess);
    again = c->all_reduce(in.x);
    ASSERT_EQ(cudaStreamEndCapture(side, &second), cudaSuccess);
  }
  ASSERT_EQ(cudaGraphInstantiate(&second_exec, second, cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaSuccess);
  in.write(r, 7, device());
  ASSERT_EQ(cudaGraphLaunch(second_exec, side), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  const double n = c->world_size();
  EXPECT_EQ(host_values(again)[1], 7 * n * (n + 1) / 2 + n);
  ASSERT_NO_FATAL_FAILURE(expect_replay_results(ops, 7));
  // Eager calls still work, and results of the graphs are released before the graphs go.
  for (CapturedOp& op : ops) op.result = Tensor();
  again = Tensor();
  EXPECT_EQ(host_values(c->all_reduce(in.x))[0], 7 * n * (n + 1) / 2);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  cudaGraphExecDestroy(second_exec);
  cudaGraphDestroy(second);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(side);
  c->destroy();
}

// A capture that the caller's own mistake invalidates (a host synchronisation inside it) must not
// break the communicator: eager calls and a new capture work afterwards.
TEST_F(CudaGraphCapture, AFailedCaptureLeavesTheCommunicatorUsable) {
  const int n = group_size();
  const Tensor x = device_floats({64}, device(), [&](std::int64_t) { return group_rank() + 1; });
  host_values(comm().all_reduce(x));
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  {
    CudaStreamGuard on_side(device(), side);
    ASSERT_EQ(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal), cudaSuccess);
    Tensor captured = comm().all_reduce(x);
    // Illegal during a global capture: invalidates it.
    EXPECT_NE(cudaStreamSynchronize(side), cudaSuccess);
    cudaGraph_t broken = nullptr;
    EXPECT_NE(cudaStreamEndCapture(side, &broken), cudaSuccess);
    if (broken != nullptr) cudaGraphDestroy(broken);
    (void)cudaGetLastError();
  }
  EXPECT_EQ(host_values(comm().all_reduce(x))[0], n * (n + 1) / 2.0) << "eager after the failure";
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  Tensor out;
  {
    CudaStreamGuard on_side(device(), side);
    ASSERT_EQ(cudaStreamBeginCapture(side, cudaStreamCaptureModeGlobal), cudaSuccess);
    out = comm().all_reduce(x);
    ASSERT_EQ(cudaStreamEndCapture(side, &graph), cudaSuccess);
  }
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
            cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, side), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  EXPECT_EQ(host_values(out)[0], n * (n + 1) / 2.0) << "a new capture after the failure";
  out = Tensor();
  ASSERT_EQ(cudaStreamSynchronize(side), cudaSuccess);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(side);
}

}  // namespace
}  // namespace testing
}  // namespace groupcoord
