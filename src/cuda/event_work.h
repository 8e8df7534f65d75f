// The Work of the CUDA communicator's isend/irecv: a CUDA event recorded after the NCCL call on
// the stream it was issued on.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "cuda/nccl/nccl_comm.h"
#include "groupcoord/tensor.h"
#include "groupcoord/work.h"

namespace groupcoord {
namespace cuda {

/// Work backed by a CUDA event. is_completed() is cudaEventQuery (or true once the communicator
/// broke); wait() polls it on the host, bounded, and throws the communicator's error. Holds the
/// transferred tensor until it is destroyed.
class EventWork final : public Work {
 public:
  /// Takes ownership of `event` (already recorded after the transfer).
  EventWork(std::shared_ptr<NcclComm> comm, std::string op, cudaEvent_t event, Tensor buffer);
  ~EventWork() override;
  EventWork(const EventWork&) = delete;
  EventWork& operator=(const EventWork&) = delete;

  bool is_completed() override;
  /// Waits up to the group's timeout (then the communicator is aborted, as its watchdog would).
  void wait() override;
  /// Waits up to `timeout`; the transfer keeps running when the wait runs out.
  void wait(std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<NcclComm> comm_;
  std::string op_;
  cudaEvent_t event_;
  Tensor buffer_;
};

}  // namespace cuda
}  // namespace groupcoord
