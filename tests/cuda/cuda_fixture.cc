#include "cuda_fixture.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "groupcoord/cuda/runtime.h"

namespace groupcoord {
namespace testing {

namespace {

struct Shared {
  std::shared_ptr<ProcessGroup> group;
  std::unique_ptr<CudaCommunicator> comm;
  std::string setup_error;
};

Shared& shared() {
  static Shared state;
  return state;
}

Device rank_device() {
  const int count = visible_gpus();
  return Device::cuda(count > 0 ? test_world().rendezvous.local_rank % count : 0);
}

std::shared_ptr<ProcessGroup> reversed_world_group(const std::string& name,
                                                   std::chrono::milliseconds timeout) {
  const auto& world = test_world().world_group;
  std::vector<int> reversed(world->size());
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  ProcessGroupOptions options;
  options.timeout = timeout;
  options.name = name;
  return world->new_group(reversed, options);
}

class CudaCommEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (visible_gpus() == 0) return;
    // Ranks on this node; without launcher information assume they all are (the test is local).
    const auto& rendezvous = test_world().rendezvous;
    prepare_nccl_environment(rendezvous.rank, rendezvous.local_world_size > 0
                                                  ? rendezvous.local_world_size
                                                  : rendezvous.world_size);
    try {
      shared().group = reversed_world_group("cudatest-cpu", test_world().world_group->timeout());
      DeviceCommunicatorContext context;
      context.cpu_group = shared().group;
      context.device = rank_device();
      context.unique_name = kCudaGroupName;
      context.use_all2all = true;
      shared().comm = std::make_unique<CudaCommunicator>(context);
    } catch (const std::exception& e) {
      shared().setup_error = e.what();
    }
  }
  void TearDown() override {
    if (shared().comm) shared().comm->destroy();
    shared().comm.reset();
    if (shared().group) shared().group->destroy();
    shared().group.reset();
  }
};

const auto* const kEnvironment = ::testing::AddGlobalTestEnvironment(new CudaCommEnvironment);

}  // namespace

void CudaCommTest::SetUp() {
  MultiProcessTest::SetUp();
  if (visible_gpus() == 0) GTEST_SKIP() << kNoGpuMessage;
  ASSERT_TRUE(shared().setup_error.empty())
      << "creating the shared cuda communicator failed: " << shared().setup_error;
  ASSERT_NE(shared().comm, nullptr);
  ASSERT_EQ(shared().comm->rank_in_group(), world_size() - 1 - rank());
}

CudaCommunicator& CudaCommTest::comm() { return *shared().comm; }

Device CudaCommTest::device() const { return rank_device(); }

std::unique_ptr<CudaCommunicator> CudaCommTest::make_communicator(
    const std::string& name, std::chrono::milliseconds timeout) {
  DeviceCommunicatorContext context;
  context.cpu_group = reversed_world_group(name + "-cpu", timeout);
  context.device = rank_device();
  context.unique_name = name;
  return std::make_unique<CudaCommunicator>(context);
}

}  // namespace testing
}  // namespace groupcoord
