// Fixture of the multi-process CUDA communicator tests. A gtest Environment builds, once and
// collectively, a CPU group over the world with the rank order reversed (so group ranks differ
// from world ranks and a mix-up shows) and a "cuda" communicator over it, on
// Device::cuda(local_rank % device_count); the tests share it. Without a GPU every test skips.
//
// Several ranks may share one GPU (the GPU host has one): NCCL accepts that only when each
// process claims its own host (NCCL_HOSTID) and uses sockets on the loopback interface
// (NCCL_SOCKET_IFNAME=lo). The environment sets both, unless the launcher did, when the ranks of
// this node outnumber its GPUs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_communicator.h"
#include "cuda_values.h"
#include "multi_process_test.h"
#include "test_support.h"

namespace groupcoord {
namespace testing {

/// unique_name of the shared communicator.
inline const char* kCudaGroupName = "cudatest:0";

/// Base fixture: skips without a GPU, else gives the shared communicator.
class CudaCommTest : public MultiProcessTest {
 protected:
  void SetUp() override;

  /// The shared communicator (use_all2all on).
  CudaCommunicator& comm();
  /// This rank's device.
  Device device() const;
  /// Rank in the communicator's group (world_size() - 1 - rank()).
  int group_rank() { return comm().rank_in_group(); }
  int group_size() { return comm().world_size(); }

  /// Builds another communicator over a new group of every world rank (collective) with
  /// `timeout`; the caller destroys it.
  std::unique_ptr<CudaCommunicator> make_communicator(const std::string& name,
                                                      std::chrono::milliseconds timeout);
};

}  // namespace testing
}  // namespace groupcoord
