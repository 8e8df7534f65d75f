// GroupCoordinator on the nccl backend: CUDA tensors go through the "cuda" communicator, host
// tensors through the CPU group, tensor dicts may mix both. Skips without a visible GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

#include <cuda_runtime.h>
#include "cuda_values.h"

#include "groupcoord/cuda/graph_capture.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/group_coordinator.h"
#include "groupcoord/world.h"
#include "multi_process_test.h"

namespace groupcoord {
namespace testing {
namespace {

// One nccl coordinator over the world, shared by the tests (built collectively once).
class NcclCoordinatorEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (default_backend() != "nccl") return;
    WorldOptions options;
    options.timeout = std::chrono::seconds(60);
    init_world(options);
    const int local_rank = world_info().local_rank;
    const auto& me = world_info();
    prepare_nccl_environment(me.rank,
                             me.local_world_size > 0 ? me.local_world_size : me.world_size);
    coordinator() = std::make_unique<GroupCoordinator>(
        std::vector<std::vector<int>>{all_ranks(world_info().world_size)}, local_rank, "nccl",
        /*use_device_communicator=*/true, /*use_message_queue_broadcaster=*/false, "ncclworld");
  }
  void TearDown() override {
    if (!coordinator()) return;
    coordinator()->barrier();
    coordinator().reset();
    world_group()->barrier();
    destroy_world();
  }
  static std::unique_ptr<GroupCoordinator>& coordinator() {
    static std::unique_ptr<GroupCoordinator> instance;
    return instance;
  }
  static std::vector<int> all_ranks(int n) {
    std::vector<int> ranks(n);
    for (int r = 0; r < n; ++r) ranks[r] = r;
    return ranks;
  }
};

class NcclCoordinatorTest : public MultiProcessTest {
 protected:
  void SetUp() override {
    MultiProcessTest::SetUp();
    if (!NcclCoordinatorEnvironment::coordinator()) GTEST_SKIP() << "no visible CUDA device";
  }
  GroupCoordinator& coord() { return *NcclCoordinatorEnvironment::coordinator(); }
};

Tensor host_floats(std::int64_t n, float value) {
  Tensor t = Tensor::empty({n}, DType::Float32);
  for (std::int64_t i = 0; i < n; ++i) t.data_ptr<float>()[i] = value;
  return t;
}

TEST_F(NcclCoordinatorTest, DeviceIsCudaAndBackendIsNccl) {
  EXPECT_EQ(coord().backend(), "nccl");
  EXPECT_TRUE(coord().device().is_cuda());
  EXPECT_EQ(coord().device().index, coord().local_rank() % cuda_device_count());
}

TEST_F(NcclCoordinatorTest, AllReduceOfCudaAndHostTensors) {
  const int ws = coord().world_size();
  Tensor cuda = device_floats({4096}, coord().device(),
                              [&](std::int64_t i) { return static_cast<double>(rank() + 1); });
  Tensor summed = coord().all_reduce(cuda);
  EXPECT_TRUE(summed.device().is_cuda());
  const double expected = ws * (ws + 1) / 2.0;
  for (double v : host_values(summed)) ASSERT_EQ(v, expected);

  Tensor host = host_floats(1000, static_cast<float>(rank() + 1));
  Tensor host_sum = coord().all_reduce(host);
  EXPECT_TRUE(host_sum.device().is_cpu());
  for (std::int64_t i = 0; i < 1000; ++i) ASSERT_EQ(host_sum.data_ptr<float>()[i], expected);
}

TEST_F(NcclCoordinatorTest, AllGatherOnDimOneOfCudaTensor) {
  const int ws = coord().world_size();
  // (2, 3, 4) per rank, value = rank * 100 + flat index; gathered along dim 1 -> (2, 3*ws, 4).
  Tensor input = device_floats({2, 3, 4}, coord().device(), [&](std::int64_t i) {
    return rank() * 100.0 + static_cast<double>(i);
  });
  Tensor out = coord().all_gather(input, 1);
  ASSERT_EQ(out.shape(), (Shape{2, 3 * ws, 4}));
  std::vector<double> got = host_values(out.contiguous());
  for (std::int64_t a = 0; a < 2; ++a) {
    for (std::int64_t b = 0; b < 3 * ws; ++b) {
      for (std::int64_t c = 0; c < 4; ++c) {
        const int r = static_cast<int>(b / 3);
        const double want = r * 100.0 + ravel({a, b % 3, c}, {2, 3, 4});
        ASSERT_EQ(got[ravel({a, b, c}, {2, 3 * ws, 4})], want) << a << "," << b << "," << c;
      }
    }
  }
}

TEST_F(NcclCoordinatorTest, BroadcastTensorDictMixingCudaAndHostValues) {
  std::optional<TensorDict> dict;
  if (coord().rank_in_group() == 0) {
    Tensor host = Tensor::empty({16}, DType::Int64);
    for (int i = 0; i < 16; ++i) host.data_ptr<std::int64_t>()[i] = 7 * i;
    dict = TensorDict{
        {"cuda", device_floats({8}, coord().device(),
                               [](std::int64_t i) { return static_cast<double>(i) * 0.5; })},
        {"host", host},
        {"meta", Bytes("step 3")},
        {"empty", device_floats({0}, coord().device(), [](std::int64_t) { return 0.0; })}};
  }
  std::optional<TensorDict> got = coord().broadcast_tensor_dict(dict, 0);
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(got->size(), 4u);
  Tensor cuda = std::get<Tensor>((*got)[0].second);
  Tensor host = std::get<Tensor>((*got)[1].second);
  EXPECT_TRUE(cuda.device().is_cuda());
  EXPECT_TRUE(host.device().is_cpu());
  std::vector<double> values = host_values(cuda);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(values[i], i * 0.5);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(host.data_ptr<std::int64_t>()[i], 7 * i);
  EXPECT_EQ(std::get<Bytes>((*got)[2].second), "step 3");
  EXPECT_EQ(std::get<Tensor>((*got)[3].second).numel(), 0);
}

TEST_F(NcclCoordinatorTest, SendAndRecvTensorDictBetweenStages) {
  if (coord().world_size() < 2) GTEST_SKIP() << "needs two ranks";
  if (coord().rank_in_group() == 0) {
    TensorDict dict{
        {"hidden", device_floats({4, 8}, coord().device(), [](std::int64_t i) { return 1.0 + i; })},
        {"positions", host_floats(4, 9.0f)},
        {"step", Bytes("42")}};
    coord().send_tensor_dict(dict, 1);
  } else if (coord().rank_in_group() == 1) {
    std::optional<TensorDict> got = coord().recv_tensor_dict(0);
    ASSERT_TRUE(got.has_value());
    std::vector<double> hidden = host_values(std::get<Tensor>((*got)[0].second));
    for (int i = 0; i < 32; ++i) ASSERT_EQ(hidden[i], 1.0 + i);
    Tensor positions = std::get<Tensor>((*got)[1].second);
    EXPECT_TRUE(positions.device().is_cpu());
    EXPECT_EQ(positions.data_ptr<float>()[3], 9.0f);
    EXPECT_EQ(std::get<Bytes>((*got)[2].second), "42");
  }
  coord().barrier();
}

TEST_F(NcclCoordinatorTest, AllReduceCapturedInGraphCaptureReplays) {
  const int ws = coord().world_size();
  Tensor input = device_floats({1024}, coord().device(), [&](std::int64_t) { return 1.0; });
  Tensor output;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  {
    std::shared_ptr<GraphCaptureContext> context = coord().graph_capture();
    cudaStream_t stream = context->stream();
    // Warm up outside the capture (NCCL sets up lazily), then capture one all_reduce.
    coord().all_reduce(input);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    output = coord().all_reduce(input);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch),
              cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (double v : host_values(output)) ASSERT_EQ(v, static_cast<double>(ws));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(NcclCoordinatorTest, GraphCaptureNeedsTheNcclBackend) {
  GroupCoordinator gloo(
      std::vector<std::vector<int>>{NcclCoordinatorEnvironment::all_ranks(world_info().world_size)},
      world_info().local_rank, "gloo", true, false, "gloo_graph");
  EXPECT_THROW(gloo.graph_capture(), std::invalid_argument);
  gloo.barrier();
}

[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new NcclCoordinatorEnvironment);

}  // namespace
}  // namespace testing
}  // namespace groupcoord
