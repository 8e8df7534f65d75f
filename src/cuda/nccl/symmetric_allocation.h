// Memory from ncclMemAlloc: cuMem-backed, so that NCCL can map it into every peer's address space
// when a communicator registers it as a symmetric window. Shared ownership: a window registry, the
// scratch and every symmetric_empty tensor hold a reference, and the memory is freed (ncclMemFree)
// when the last one lets go — after the windows over it were deregistered.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cuda/nccl/nccl_api.h"
#include "groupcoord/device.h"

namespace groupcoord {
namespace cuda {

/// One ncclMemAlloc allocation on one device.
class SymmetricAllocation {
 public:
  /// ncclMemAlloc of `bytes` on `device`; DistributedError naming `who` when NCCL fails.
  static std::shared_ptr<SymmetricAllocation> allocate(const NcclApi& api, Device device,
                                                       std::size_t bytes, const std::string& who);
  /// ncclMemFree; logs rather than throws.
  ~SymmetricAllocation();
  SymmetricAllocation(const SymmetricAllocation&) = delete;
  SymmetricAllocation& operator=(const SymmetricAllocation&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  Device device() const { return device_; }
  /// True when [ptr, ptr + bytes) lies inside this allocation.
  bool contains(const void* ptr, std::size_t bytes) const;

 private:
  SymmetricAllocation(const NcclApi& api, Device device, void* data, std::size_t size)
      : api_(&api), device_(device), data_(data), size_(size) {}

  const NcclApi* api_;
  Device device_;
  void* data_;
  std::size_t size_;
};

}  // namespace cuda
}  // namespace groupcoord
