// CudaAsyncAllocator (groupcoord/cuda/allocator.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "cuda/cuda_check.h"
#include "cuda/device_guard.h"
#include "groupcoord/cuda/allocator.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {

namespace {

// std::bad_alloc that says which device ran out and how much was asked for.
class CudaOutOfMemory final : public std::bad_alloc {
 public:
  explicit CudaOutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace

/// The stream each live block was allocated on: it is freed there, after that stream's work.
struct CudaAsyncAllocator::State {
  std::mutex mutex;
  std::unordered_map<void*, cudaStream_t> streams;
  /// Devices whose default pool has been told to keep freed memory.
  std::unordered_set<int> pools_configured;
};

namespace {

// By default the device's pool returns freed memory to the driver at every synchronisation, so a
// steady state of allocations would map and unmap memory all the time; keep it instead (as torch
// and cupy do); cudaMemPoolTrimTo on the default pool gives it back.
void keep_freed_memory(int device) {
  cudaMemPool_t pool = nullptr;
  GC_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device), "CudaAsyncAllocator: cuda:", device);
  std::uint64_t threshold = UINT64_MAX;
  GC_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
                "CudaAsyncAllocator: configuring the memory pool of cuda:", device);
}

}  // namespace

CudaAsyncAllocator::CudaAsyncAllocator() : state_(std::make_unique<State>()) {}

CudaAsyncAllocator::~CudaAsyncAllocator() = default;

void* CudaAsyncAllocator::allocate(std::size_t nbytes, Device device) {
  if (nbytes == 0) return nullptr;
  cuda::DeviceGuard guard(device);
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->pools_configured.insert(device.index).second) keep_freed_memory(device.index);
  }
  cudaStream_t stream = current_cuda_stream(device);
  void* ptr = nullptr;
  const cudaError_t error = cudaMallocAsync(&ptr, nbytes, stream);
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw CudaOutOfMemory("CudaAsyncAllocator: out of memory allocating " + std::to_string(nbytes) +
                          " bytes on " + device.str());
  }
  GC_CUDA_CHECK(error, "CudaAsyncAllocator: allocating ", nbytes, " bytes on ", device.str());
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->streams[ptr] = stream;
  return ptr;
}

void CudaAsyncAllocator::deallocate(void* ptr, std::size_t nbytes, Device device) {
  if (ptr == nullptr) return;
  cudaStream_t stream = nullptr;
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->streams.find(ptr);
    if (it != state_->streams.end()) {
      stream = it->second;
      known = true;
      state_->streams.erase(it);
    }
  }
  GC_ASSERT(known, "CudaAsyncAllocator: ", ptr, " (", nbytes, " bytes on ", device.str(),
            ") was not allocated by this allocator");
  const cudaError_t error = cudaFreeAsync(ptr, stream);
  // At process exit the runtime may already be gone; the memory goes with it.
  if (error == cudaErrorCudartUnloading || error == cudaErrorContextIsDestroyed) {
    (void)cudaGetLastError();
    return;
  }
  GC_CUDA_CHECK(error, "CudaAsyncAllocator: freeing ", nbytes, " bytes on ", device.str());
}

bool install_cuda_allocator_if_absent() {
  // Serialises our own check-then-set; an engine calling set_allocator concurrently is a race it
  // creates itself (whichever comes last wins, as documented in allocator.h).
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (get_allocator(DeviceType::CUDA) != nullptr) return false;
  set_allocator(DeviceType::CUDA, std::make_shared<CudaAsyncAllocator>());
  return true;
}

}  // namespace groupcoord
