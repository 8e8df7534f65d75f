#include "cuda/event_work.h"

namespace groupcoord {
namespace cuda {

EventWork::EventWork(std::shared_ptr<NcclComm> comm, std::string op, cudaEvent_t event,
                     Tensor buffer)
    : comm_(std::move(comm)), op_(std::move(op)), event_(event), buffer_(std::move(buffer)) {}

EventWork::~EventWork() {
  cudaEventDestroy(event_);  // fine while pending: CUDA releases it once it completes
}

bool EventWork::is_completed() {
  const cudaError_t state = cudaEventQuery(event_);
  if (state == cudaErrorNotReady) return comm_->is_broken();
  if (state != cudaSuccess) (void)cudaGetLastError();
  return true;  // done, or failed (wait() reports how)
}

void EventWork::wait() { comm_->wait_event(event_, op_.c_str(), comm_->timeout(), true); }

void EventWork::wait(std::chrono::milliseconds timeout) {
  comm_->wait_event(event_, op_.c_str(), timeout, false);
}

}  // namespace cuda
}  // namespace groupcoord
