// The CUDA calls every tracked operation makes (the capture check, the completion event's record
// and its stream's id), through the driver's entry points: the runtime's wrappers add 0.1-0.3 µs
// per call on the H200 host (docs/benchmarks/host_overhead.md, the +event and +drv columns), a
// third of what the watchdog's tracking costs. The runtime call is the fallback whenever the
// driver's entry point is missing or returns an error, so every error a caller sees is the
// runtime's own cudaError_t (driver and runtime number their errors differently).
#pragma once

#include <cuda_runtime_api.h>

namespace groupcoord {
namespace cuda {

/// cudaStreamIsCapturing(stream, status), driver first.
cudaError_t query_capture(cudaStream_t stream, cudaStreamCaptureStatus* status);

/// cudaEventRecord(event, stream), driver first.
cudaError_t record_event(cudaEvent_t event, cudaStream_t stream);

/// The stream's unique id (cuStreamGetId: never reused while the process lives, unlike a handle
/// value), or false when the driver cannot say. The per-thread default stream's handle names a
/// different stream on every thread, so it has no id here.
bool stream_id(cudaStream_t stream, unsigned long long* id);

}  // namespace cuda
}  // namespace groupcoord
