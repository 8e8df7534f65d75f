// The current CUDA stream, per thread and device (as torch.cuda.current_stream). Every operation
// of the CUDA layer (collectives, copies, allocations) enqueues on the current stream of the
// tensor's device, so an engine orders groupcoord's work with its own by choosing that stream:
//
//   {
//     groupcoord::CudaStreamGuard guard(Device::cuda(0), engine_stream);  // or a torch handle
//     Tensor out = coordinator.all_reduce(x);   // enqueued on engine_stream
//   }                                            // the previous current stream is back
//
// Without a guard the current stream is the thread's default stream: a non-blocking stream
// created on first use, one per thread and device, never the legacy default stream (which would
// serialise against everything). Default streams live until the process ends.
//
// Streams are plain handles: a stream passed to a guard must stay valid while work is enqueued on
// it and while tensors allocated on it are alive (they are freed, stream-ordered, on it).
#pragma once

#include <cstdint>

#include "groupcoord/device.h"

struct CUstream_st;  // cudaStream_t is `CUstream_st*`; declared so that no CUDA header is needed.

namespace groupcoord {

/// A CUDA stream handle: the same type as cudaStream_t.
using CudaStream = CUstream_st*;

/// `stream` as the integer torch/cupy use for stream handles (torch.cuda.Stream.cuda_stream).
inline std::uintptr_t cuda_stream_handle(CudaStream stream) {
  return reinterpret_cast<std::uintptr_t>(stream);
}

/// The calling thread's current stream for `device` (a CUDA device this process sees): the
/// stream of its innermost CudaStreamGuard for that device, else default_cuda_stream(device).
/// Throws std::invalid_argument for a bad device, DistributedError when CUDA fails.
CudaStream current_cuda_stream(Device device);

/// The calling thread's default stream for `device`, a non-blocking stream created on first use.
CudaStream default_cuda_stream(Device device);

/// Waits on the host until everything enqueued so far on current_cuda_stream(device) has run.
/// Throws DistributedError when CUDA reports an error.
void synchronize_current_cuda_stream(Device device);

/// Makes a stream current for `device` on the calling thread for the guard's lifetime. Guards
/// nest; each must be destroyed on the thread that made it, innermost first.
class CudaStreamGuard {
 public:
  /// Makes `stream` current for `device`.
  CudaStreamGuard(Device device, CudaStream stream);
  /// As above with a raw handle (torch.cuda.Stream.cuda_stream, cupy.cuda.Stream.ptr). 0 is the
  /// legacy default stream, 1 cudaStreamLegacy, 2 cudaStreamPerThread, as in CUDA.
  CudaStreamGuard(Device device, std::uintptr_t stream_handle);
  /// Restores the stream that was current before.
  ~CudaStreamGuard();
  CudaStreamGuard(const CudaStreamGuard&) = delete;
  CudaStreamGuard& operator=(const CudaStreamGuard&) = delete;

  /// The device whose current stream this guard sets.
  Device device() const { return device_; }
  /// The stream made current.
  CudaStream stream() const { return stream_; }

 private:
  Device device_;
  CudaStream stream_;
  /// The thread's override for device_ before this guard (valid when had_previous_).
  CudaStream previous_ = nullptr;
  bool had_previous_ = false;
};

}  // namespace groupcoord
