// CudaAsyncAllocator (groupcoord/cuda/allocator.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/driver_calls.h"
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

namespace {

// Requests are rounded up to this many bytes, so that near sizes share cache entries.
constexpr std::size_t kGranularity = 512;

std::size_t round_up(std::size_t nbytes) {
  return (nbytes + kGranularity - 1) / kGranularity * kGranularity;
}

// Whether `stream` is capturing; a stream CUDA cannot answer for counts as capturing, so that
// no cudaFreeAsync is enqueued on it. Never throws (deallocate must not).
bool capturing_or_unknown(cudaStream_t stream) noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cuda::query_capture(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

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

/// The live blocks (where each was allocated) and the cache of freed ones, by stream and size.
struct CudaAsyncAllocator::State {
  struct Key {
    cudaStream_t stream;
    int device;
    std::size_t bytes;
    bool operator==(const Key& other) const {
      return stream == other.stream && device == other.device && bytes == other.bytes;
    }
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const {
      const std::size_t h = std::hash<const void*>()(k.stream);
      return h ^ (k.bytes * 0x9e3779b97f4a7c15ULL) ^ static_cast<std::size_t>(k.device);
    }
  };
  struct Block {
    Key key;
    bool captured;  ///< allocated during a graph capture: never cached
  };

  using Live = std::unordered_map<void*, Block>;

  mutable std::mutex mutex;
  Live live;
  /// Nodes of `live` kept from freed blocks, so that the hot path allocates no map node.
  std::vector<Live::node_type> spare_nodes;
  std::unordered_map<Key, std::vector<void*>, KeyHash> cache;
  std::size_t cached_bytes = 0;
  /// Devices whose default pool has been told to keep freed memory.
  std::unordered_set<int> pools_configured;

  /// Records a live block, in a spare node when there is one. Requires mutex.
  void add_live(void* ptr, const Block& block) {
    if (spare_nodes.empty()) {
      live.emplace(ptr, block);
      return;
    }
    Live::node_type node = std::move(spare_nodes.back());
    spare_nodes.pop_back();
    node.key() = ptr;
    node.mapped() = block;
    live.insert(std::move(node));
  }

  /// Removes a live block and returns it; false when `ptr` is not live. Requires mutex.
  bool take_live(void* ptr, Block* block) {
    auto it = live.find(ptr);
    if (it == live.end()) return false;
    Live::node_type node = live.extract(it);
    *block = node.mapped();
    if (spare_nodes.size() < kSpareNodes) spare_nodes.push_back(std::move(node));
    return true;
  }

  static constexpr std::size_t kSpareNodes = 256;
};

CudaAsyncAllocator::CudaAsyncAllocator(std::size_t max_cached_bytes)
    : max_cached_bytes_(max_cached_bytes), state_(std::make_unique<State>()) {}

CudaAsyncAllocator::~CudaAsyncAllocator() { release_cached(); }

void* CudaAsyncAllocator::allocate(std::size_t nbytes, Device device) {
  if (nbytes == 0) return nullptr;
  cudaStream_t stream = current_cuda_stream(device);
  const bool capturing = cuda::stream_is_capturing(stream, "CudaAsyncAllocator: allocating ",
                                                   nbytes, " bytes on ", device.str());
  const State::Key key{stream, device.index, round_up(nbytes)};
  if (!capturing) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->cache.find(key);
    if (it != state_->cache.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      state_->cached_bytes -= key.bytes;
      state_->add_live(ptr, State::Block{key, false});
      return ptr;
    }
    if (state_->pools_configured.insert(device.index).second) keep_freed_memory(device.index);
  }
  cuda::DeviceGuard guard(device);
  void* ptr = nullptr;
  cudaError_t error = cudaMallocAsync(&ptr, key.bytes, stream);
  if (error == cudaErrorMemoryAllocation && !capturing) {
    (void)cudaGetLastError();
    if (release_cached() > 0) error = cudaMallocAsync(&ptr, key.bytes, stream);
  }
  if (error == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw CudaOutOfMemory("CudaAsyncAllocator: out of memory allocating " + std::to_string(nbytes) +
                          " bytes on " + device.str());
  }
  GC_CUDA_CHECK(error, "CudaAsyncAllocator: allocating ", nbytes, " bytes on ", device.str());
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->add_live(ptr, State::Block{key, capturing});
  return ptr;
}

void CudaAsyncAllocator::deallocate(void* ptr, std::size_t nbytes, Device device) {
  if (ptr == nullptr) return;
  State::Block block{};
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    known = state_->take_live(ptr, &block);
    // An eager block goes back into its stream's cache without a CUDA call, even while that
    // stream is being captured: reuse is ordered on the stream, and allocations during a capture
    // never read the cache (so the block is next handed out after the capture, as torch's
    // allocator does). Only past the bound does the capture matter, since cudaFreeAsync would
    // become a node of the graph being captured: the block then stays cached beyond the bound
    // (release_cached() gives it back).
    if (known && !block.captured &&
        (state_->cached_bytes + block.key.bytes <= max_cached_bytes_ ||
         capturing_or_unknown(block.key.stream))) {
      state_->cache[block.key].push_back(ptr);
      state_->cached_bytes += block.key.bytes;
      return;
    }
  }
  GC_ASSERT(known, "CudaAsyncAllocator: ", ptr, " (", nbytes, " bytes on ", device.str(),
            ") was not allocated by this allocator");
  const cudaError_t error = cudaFreeAsync(ptr, block.key.stream);
  // At process exit the runtime may already be gone; the memory goes with it.
  if (error == cudaErrorCudartUnloading || error == cudaErrorContextIsDestroyed) {
    (void)cudaGetLastError();
    return;
  }
  // A block a capture allocated is the graph's: CUDA refuses its free outside the capture until
  // the graph has been launched, and always when the capture failed (the graph was discarded).
  // Said, not hidden: a graph launched after its result was dropped keeps that memory.
  GC_CUDA_CHECK(error, "CudaAsyncAllocator: freeing ", nbytes, " bytes on ", device.str(),
                block.captured ? " (allocated during a CUDA graph capture: a capture that failed "
                                 "or a graph not launched yet owns it)"
                               : "");
}

std::size_t CudaAsyncAllocator::release_cached() {
  std::unordered_map<State::Key, std::vector<void*>, State::KeyHash> cache;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    cache.swap(state_->cache);
    state_->cached_bytes = 0;
  }
  std::size_t released = 0;
  for (const auto& [key, blocks] : cache) {
    // cudaFree, not cudaFreeAsync on the block's stream: that stream may have been destroyed
    // since; cudaFree waits for the device, which a rare release can afford.
    int previous = -1;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != key.device &&
                          cudaSetDevice(key.device) == cudaSuccess;
    for (void* ptr : blocks) {
      const cudaError_t error = cudaFree(ptr);
      if (error != cudaSuccess) {
        (void)cudaGetLastError();  // at exit the runtime may be gone: the memory goes with it
      } else {
        released += key.bytes;
      }
    }
    if (switched) cudaSetDevice(previous);
  }
  return released;
}

std::size_t CudaAsyncAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->cached_bytes;
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
