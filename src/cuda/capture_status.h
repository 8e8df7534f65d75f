// Whether a stream is being captured into a CUDA graph: the question every place that must not
// wait, record or register during a capture asks.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/cuda_check.h"
#include "cuda/driver_calls.h"

namespace groupcoord {
namespace cuda {

/// True while `stream` is capturing. DistributedError naming `where...` when CUDA cannot tell.
template <typename... Where>
bool stream_is_capturing(cudaStream_t stream, const Where&... where) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GC_CUDA_CHECK(query_capture(stream, &status), where...);
  return status != cudaStreamCaptureStatusNone;
}

/// Makes this thread's capture mode relaxed for the guard's lifetime, so that its event queries
/// do not invalidate a graph another thread captures in global mode.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~RelaxedCaptureMode() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace cuda
}  // namespace groupcoord
