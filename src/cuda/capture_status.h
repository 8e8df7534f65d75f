// Whether a stream is being captured into a CUDA graph: the question every place that must not
// wait, record or register during a capture asks.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/cuda_check.h"

namespace groupcoord {
namespace cuda {

/// True while `stream` is capturing. DistributedError naming `where...` when CUDA cannot tell.
template <typename... Where>
bool stream_is_capturing(cudaStream_t stream, const Where&... where) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GC_CUDA_CHECK(cudaStreamIsCapturing(stream, &status), where...);
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace cuda
}  // namespace groupcoord
