#include "cuda/nccl/symmetric_allocation.h"

#include <cuda_runtime_api.h>

#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

std::shared_ptr<SymmetricAllocation> SymmetricAllocation::allocate(const NcclApi& api,
                                                                   Device device, std::size_t bytes,
                                                                   const std::string& who) {
  GC_CHECK(api.MemAlloc != nullptr, who, ": the loaded NCCL has no ncclMemAlloc");
  DeviceGuard guard(device);
  void* data = nullptr;
  GC_NCCL_CHECK(api.MemAlloc(&data, bytes), who, ": ncclMemAlloc of ", bytes, " bytes on ",
                device.str());
  return std::shared_ptr<SymmetricAllocation>(new SymmetricAllocation(api, device, data, bytes));
}

SymmetricAllocation::~SymmetricAllocation() {
  if (data_ == nullptr) return;
  BestEffortDeviceGuard guard(device_);
  const ncclResult_t result = api_->MemFree(data_);
  if (result != ncclSuccess) {
    GC_LOG(Warn, "ncclMemFree of ", size_, " bytes on ", device_.str(),
           " failed: ", nccl_result_text(result));
  }
}

bool SymmetricAllocation::contains(const void* ptr, std::size_t bytes) const {
  const auto* begin = static_cast<const char*>(data_);
  const auto* p = static_cast<const char*>(ptr);
  return p >= begin && bytes <= size_ && p - begin <= static_cast<std::ptrdiff_t>(size_ - bytes);
}

}  // namespace cuda
}  // namespace groupcoord
