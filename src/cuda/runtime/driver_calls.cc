#include "cuda/runtime/driver_calls.h"

#include <cuda.h>

namespace groupcoord {
namespace cuda {

namespace {

// The driver functions, looked up once through the runtime (so libcuda is not linked directly).
// cudaStream_t / CUstream and cudaEvent_t / CUevent are the same handles, the special stream
// handles (0, cudaStreamLegacy, cudaStreamPerThread) mean the same to both, and so do the capture
// states' values.
struct DriverEntryPoints {
  CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus*) = nullptr;
  CUresult (*record)(CUevent, CUstream) = nullptr;
  CUresult (*get_id)(CUstream, unsigned long long*) = nullptr;

  DriverEntryPoints() {
    is_capturing = lookup<decltype(is_capturing)>("cuStreamIsCapturing");
    record = lookup<decltype(record)>("cuEventRecord");
    get_id = lookup<decltype(get_id)>("cuStreamGetId");
  }

  template <typename Fn>
  static Fn lookup(const char* name) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    // 12000: the ABI of these functions has not changed since CUDA 12.0.
    if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<Fn>(fn);
  }
};

const DriverEntryPoints& driver() {
  static const DriverEntryPoints entry_points;
  return entry_points;
}

static_assert(static_cast<int>(CU_STREAM_CAPTURE_STATUS_NONE) ==
                      static_cast<int>(cudaStreamCaptureStatusNone) &&
                  static_cast<int>(CU_STREAM_CAPTURE_STATUS_ACTIVE) ==
                      static_cast<int>(cudaStreamCaptureStatusActive) &&
                  static_cast<int>(CU_STREAM_CAPTURE_STATUS_INVALIDATED) ==
                      static_cast<int>(cudaStreamCaptureStatusInvalidated),
              "driver and runtime capture states differ");

}  // namespace

cudaError_t query_capture(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  const DriverEntryPoints& d = driver();
  CUstreamCaptureStatus state = CU_STREAM_CAPTURE_STATUS_NONE;
  if (d.is_capturing != nullptr && d.is_capturing(stream, &state) == CUDA_SUCCESS) {
    *status = static_cast<cudaStreamCaptureStatus>(state);
    return cudaSuccess;
  }
  return cudaStreamIsCapturing(stream, status);
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  const DriverEntryPoints& d = driver();
  if (d.record != nullptr && d.record(event, stream) == CUDA_SUCCESS) return cudaSuccess;
  return cudaEventRecord(event, stream);
}

bool stream_id(cudaStream_t stream, unsigned long long* id) {
  if (stream == cudaStreamPerThread) return false;
  const DriverEntryPoints& d = driver();
  return d.get_id != nullptr && d.get_id(stream, id) == CUDA_SUCCESS;
}

}  // namespace cuda
}  // namespace groupcoord
