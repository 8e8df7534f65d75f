// Per-thread current streams (stream.h). Each thread keeps, per device index, its default stream
// (created lazily) and the stream its innermost CudaStreamGuard installed.
#include "groupcoord/cuda/stream.h"

#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"

namespace groupcoord {

namespace {

// Thread-local tables indexed by device index.
struct ThreadStreams {
  std::vector<CudaStream> defaults;                // nullptr: not created yet
  std::vector<std::optional<CudaStream>> current;  // nullopt: no guard for that device
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams streams;
  return streams;
}

template <typename T>
T& slot(std::vector<T>& table, int index) {
  if (static_cast<int>(table.size()) <= index) table.resize(index + 1);
  return table[index];
}

}  // namespace

CudaStream default_cuda_stream(Device device) {
  cuda::check_cuda_device(device, "default_cuda_stream");
  CudaStream& stream = slot(thread_streams().defaults, device.index);
  if (stream == nullptr) {
    cuda::DeviceGuard guard(device);
    cudaStream_t created = nullptr;
    // Non-blocking: no implicit synchronisation with the legacy default stream.
    GC_CUDA_CHECK(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                  "creating the default stream of ", device.str());
    stream = created;
  }
  return stream;
}

CudaStream current_cuda_stream(Device device) {
  cuda::check_cuda_device(device, "current_cuda_stream");
  const std::optional<CudaStream>& current = slot(thread_streams().current, device.index);
  return current ? *current : default_cuda_stream(device);
}

void synchronize_current_cuda_stream(Device device) {
  CudaStream stream = current_cuda_stream(device);
  GC_CUDA_CHECK(cudaStreamSynchronize(stream), "synchronizing the current stream of ",
                device.str());
}

CudaStreamGuard::CudaStreamGuard(Device device, CudaStream stream)
    : device_(device), stream_(stream) {
  cuda::check_cuda_device(device, "CudaStreamGuard");
  std::optional<CudaStream>& current = slot(thread_streams().current, device.index);
  had_previous_ = current.has_value();
  if (had_previous_) previous_ = *current;
  current = stream;
}

CudaStreamGuard::CudaStreamGuard(Device device, std::uintptr_t stream_handle)
    : CudaStreamGuard(device, reinterpret_cast<CudaStream>(stream_handle)) {}

CudaStreamGuard::~CudaStreamGuard() {
  std::optional<CudaStream>& current = slot(thread_streams().current, device_.index);
  if (had_previous_) {
    current = previous_;
  } else {
    current.reset();
  }
}

}  // namespace groupcoord
