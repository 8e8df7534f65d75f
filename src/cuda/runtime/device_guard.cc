#include "cuda/runtime/device_guard.h"

#include <cuda_runtime_api.h>

#include "cuda/runtime/cuda_check.h"
#include "groupcoord/cuda/runtime.h"

namespace groupcoord {
namespace cuda {

void check_cuda_device(Device device, const char* what) {
  GC_CHECK(device.is_cuda(), what, ": ", device.str(), " is not a CUDA device");
  const int count = cuda_device_count();
  if (count == 0) {
    int ignored = 0;
    const cudaError_t error = cudaGetDeviceCount(&ignored);
    (void)cudaGetLastError();
    GC_THROW(DistributedError, what, ": no CUDA device is usable in this process (",
             error == cudaSuccess ? std::string("0 devices") : cuda_error_text(error), ")");
  }
  GC_CHECK(device.index >= 0 && device.index < count, what, ": ", device.str(),
           " is out of range; this process sees ", count, " CUDA device(s)");
}

DeviceGuard::DeviceGuard(Device device) {
  check_cuda_device(device, "CUDA device guard");
  GC_CUDA_CHECK(cudaGetDevice(&previous_), "selecting ", device.str());
  if (previous_ != device.index) {
    GC_CUDA_CHECK(cudaSetDevice(device.index), "selecting ", device.str());
    changed_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

BestEffortDeviceGuard::BestEffortDeviceGuard(Device device) {
  const bool known = cudaGetDevice(&previous_) == cudaSuccess;
  cudaSetDevice(device.index);
  changed_ = known && previous_ != device.index;
}

BestEffortDeviceGuard::~BestEffortDeviceGuard() {
  if (changed_) cudaSetDevice(previous_);
}

}  // namespace cuda
}  // namespace groupcoord
