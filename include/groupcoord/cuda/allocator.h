// The default allocator for CUDA tensors: stream-ordered cudaMallocAsync / cudaFreeAsync on the
// device's memory pool. Installed by init_cuda_layer() (runtime.h) unless an engine installed its
// own allocator for DeviceType::CUDA first.
#pragma once

#include <cstddef>
#include <memory>

#include "groupcoord/allocator.h"

namespace groupcoord {

/// Stream-ordered CUDA allocator. A block is allocated on the current stream of its device
/// (stream.h) and returned to the pool, stream-ordered, on that same stream: work enqueued on
/// that stream before the tensor dies finishes before the memory is reused. A tensor used on
/// another stream must be kept alive by the caller until that stream's work is done (as with
/// torch's record_stream).
///
/// Inside a CUDA graph capture, allocations become graph allocation nodes (cudaMallocAsync on
/// the capturing stream). A block allocated during capture and freed after it lives on for the
/// graph's replays; relaunching such a graph needs cudaGraphInstantiateFlagAutoFreeOnLaunch.
///
/// Thread-safe. Out of memory throws std::bad_alloc whose what() names the device and size;
/// other CUDA failures throw DistributedError.
class CudaAsyncAllocator final : public Allocator {
 public:
  CudaAsyncAllocator();
  ~CudaAsyncAllocator() override;
  /// A block of `nbytes` on `device` (nullptr for 0 bytes).
  void* allocate(std::size_t nbytes, Device device) override;
  /// Frees a block from allocate() on the stream it was allocated on.
  void deallocate(void* ptr, std::size_t nbytes, Device device) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Installs a CudaAsyncAllocator for DeviceType::CUDA unless one (of any kind) is installed.
/// Returns true when it installed one. Thread-safe.
bool install_cuda_allocator_if_absent();

}  // namespace groupcoord
