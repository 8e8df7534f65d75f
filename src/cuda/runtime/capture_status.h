// Whether a stream is being captured into a CUDA graph: the question every place that must not
// wait, record or register during a capture asks.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/driver_calls.h"

namespace groupcoord {
namespace cuda {

/// What a CaptureStatusScope learnt, for the questions its thread asks while it lives.
struct KnownCaptureStatus {
  cudaStream_t stream = nullptr;
  bool capturing = false;
  const KnownCaptureStatus* outer = nullptr;  ///< the enclosing scope's answer, if any
};

/// The answer of this thread's innermost CaptureStatusScope (nullptr: none).
inline thread_local const KnownCaptureStatus* t_known_capture_status = nullptr;

/// True while `stream` is capturing. DistributedError naming `where...` when CUDA cannot tell.
/// Inside a CaptureStatusScope for `stream` the scope's answer, without asking CUDA again.
template <typename... Where>
bool stream_is_capturing(cudaStream_t stream, const Where&... where) {
  for (const KnownCaptureStatus* known = t_known_capture_status; known != nullptr;
       known = known->outer) {
    if (known->stream == stream) return known->capturing;
  }
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GC_CUDA_CHECK(query_capture(stream, &status), where...);
  return status != cudaStreamCaptureStatusNone;
}

/// One operation's capture status of its stream, asked of CUDA once (62 ns a query on the H200
/// host) and given to every later stream_is_capturing() of this thread for that stream while the
/// scope lives: the allocator making the result and the tracking after NCCL's launch ask the
/// same question. A capture cannot begin or end on the stream during the operation except by a
/// race the caller makes (another thread beginning a capture on the stream the call enqueues on).
class CaptureStatusScope {
 public:
  template <typename... Where>
  explicit CaptureStatusScope(cudaStream_t stream, const Where&... where)
      : known_{stream, stream_is_capturing(stream, where...), t_known_capture_status} {
    t_known_capture_status = &known_;
  }
  ~CaptureStatusScope() { t_known_capture_status = known_.outer; }
  CaptureStatusScope(const CaptureStatusScope&) = delete;
  CaptureStatusScope& operator=(const CaptureStatusScope&) = delete;

  bool capturing() const { return known_.capturing; }

 private:
  KnownCaptureStatus known_;
};

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
