// GraphCaptureContext (graph_capture.h).
#include "groupcoord/cuda/graph_capture.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

// The calling thread's capture stream for `device`, created on first use and kept (tensors
// allocated during a capture are freed on it later, so it must outlive them).
CudaStream thread_capture_stream(Device device) {
  thread_local std::vector<CudaStream> streams;
  if (static_cast<int>(streams.size()) <= device.index) streams.resize(device.index + 1);
  CudaStream& stream = streams[device.index];
  if (stream == nullptr) {
    cuda::DeviceGuard guard(device);
    cudaStream_t created = nullptr;
    GC_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                  "graph_capture: creating the capture stream of ", device.str());
    stream = created;
  }
  return stream;
}

// Makes `waiter` wait for the work enqueued on `target` so far.
void stream_wait(CudaStream waiter, CudaStream target, Device device, const char* what) {
  cuda::DeviceGuard guard(device);
  cudaEvent_t event = nullptr;
  GC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  const cudaError_t recorded = cudaEventRecord(event, target);
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(waiter, event, 0) : recorded;
  cudaEventDestroy(event);  // safe: the wait keeps what it needs
  GC_CUDA_CHECK(waited, what);
}

}  // namespace

GraphCaptureContext::GraphCaptureContext(Device device)
    : device_(device), stream_(thread_capture_stream(device)) {
  enter();
}

GraphCaptureContext::GraphCaptureContext(Device device, CudaStream stream)
    : device_(device), stream_(stream) {
  cuda::check_cuda_device(device, "graph_capture");
  enter();
}

GraphCaptureContext::GraphCaptureContext(Device device, std::uintptr_t stream_handle)
    : GraphCaptureContext(device, reinterpret_cast<CudaStream>(stream_handle)) {}

void GraphCaptureContext::enter() {
  previous_ = current_cuda_stream(device_);
  // Everything enqueued before the context (initialisation, inputs) must be visible to the
  // captured work, which runs on another stream.
  if (previous_ != stream_) {
    stream_wait(stream_, previous_, device_, "graph_capture: ordering the capture stream");
  }
  guard_.emplace(device_, stream_);
}

GraphCaptureContext::~GraphCaptureContext() {
  guard_.reset();
  if (previous_ == stream_) return;
  try {
    // Waiting on a capturing stream would pull the previous stream into the capture.
    if (!cuda::stream_is_capturing(stream_, "graph_capture: exit")) {
      stream_wait(previous_, stream_, device_, "graph_capture: ordering the previous stream");
    }
  } catch (const std::exception& e) {
    GC_LOG(Error, "graph_capture: leaving the capture context on ", device_.str(),
           " failed: ", e.what());
  }
}

}  // namespace groupcoord
