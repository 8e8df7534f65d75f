// Process-wide entry points of the CUDA layer (groupcoord/cuda/runtime.h).
#include "groupcoord/cuda/runtime.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "cuda/runtime/strided_copy.h"
#include "groupcoord/cuda/allocator.h"
#include "groupcoord/device_copy.h"

namespace groupcoord {

int cuda_device_count() noexcept {
  // The answer cannot change during the life of the process (CUDA_VISIBLE_DEVICES is read once
  // by the runtime), so it is asked once; without a driver the call fails and we answer 0.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

void init_cuda_layer() {
  // As with the allocator, a copy function an engine registered first is kept.
  static std::mutex mutex;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (get_device_copy(DeviceType::CUDA) == nullptr) {
      set_device_copy(DeviceType::CUDA, cuda::copy_cuda_tensor);
    }
  }
  install_cuda_allocator_if_absent();
}

}  // namespace groupcoord
