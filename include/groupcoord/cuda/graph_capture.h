// Capturing groupcoord's CUDA collectives into a CUDA graph (vLLM's GroupCoordinator
// .graph_capture). A GraphCaptureContext provides a capture stream and makes it the current
// stream for its lifetime; the caller captures on it:
//
//   groupcoord::GraphCaptureContext context(Device::cuda(0));
//   cudaStream_t s = context.stream();
//   cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
//   Tensor out = comm.all_reduce(x);             // captured (it runs on the current stream)
//   cudaStreamEndCapture(s, &graph);
//   ...                                          // instantiate, replay with cudaGraphLaunch
//
// On entry the capture stream waits for the work already enqueued on the previously current
// stream (an event record and cudaStreamWaitEvent), so the captured work sees its results. On
// exit the previously current stream is restored and, unless the capture stream is still
// capturing, made to wait for the capture stream, so that results of work run (not captured)
// inside the context are safe to use afterwards.
#pragma once

#include <cstdint>
#include <optional>

#include "groupcoord/cuda/stream.h"
#include "groupcoord/device.h"

namespace groupcoord {

/// RAII scope with its own capture stream. Not copyable or movable; create and destroy it on the
/// same thread (it holds a CudaStreamGuard).
class GraphCaptureContext {
 public:
  /// Uses the calling thread's capture stream for `device`: a non-blocking stream created on
  /// first use and reused by later contexts of the thread (never destroyed, so tensors allocated
  /// during a capture can be freed on it afterwards).
  explicit GraphCaptureContext(Device device);
  /// Uses the caller's `stream` (vLLM's graph_capture(graph_capture_context)).
  GraphCaptureContext(Device device, CudaStream stream);
  /// As above with a raw handle (torch.cuda.Stream.cuda_stream).
  GraphCaptureContext(Device device, std::uintptr_t stream_handle);
  /// Restores the previous current stream (see the file comment). Never throws.
  ~GraphCaptureContext();
  GraphCaptureContext(const GraphCaptureContext&) = delete;
  GraphCaptureContext& operator=(const GraphCaptureContext&) = delete;

  /// The capture stream (current while the context lives).
  CudaStream stream() const { return stream_; }
  /// stream() as an integer handle (for torch.cuda.ExternalStream).
  std::uintptr_t stream_handle() const { return cuda_stream_handle(stream_); }
  /// The device the context captures on.
  Device device() const { return device_; }

 private:
  /// Makes stream_ wait for `previous_` and current.
  void enter();

  Device device_;
  CudaStream stream_ = nullptr;
  /// The stream that was current before the context.
  CudaStream previous_ = nullptr;
  std::optional<CudaStreamGuard> guard_;
};

}  // namespace groupcoord
