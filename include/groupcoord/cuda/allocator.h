// The default allocator for CUDA tensors: stream-ordered cudaMallocAsync / cudaFreeAsync on the
// device's memory pool. Installed by init_cuda_layer() (runtime.h) unless an engine installed its
// own allocator for DeviceType::CUDA first.
#pragma once

#include <cstddef>
#include <memory>

#include "groupcoord/allocator.h"

namespace groupcoord {

/// Stream-ordered CUDA allocator with a per-stream cache. A block is allocated on the current
/// stream of its device (stream.h) and, when its tensor dies, goes back to a cache for that stream
/// and size: the next allocation of that size on that stream reuses it without a CUDA call. This
/// is safe without any synchronisation because the reuse is ordered on the same stream after the
/// work that used the block (cudaMallocAsync's own rule, and torch's caching allocator's). It
/// matters on the hot path: cudaMallocAsync + cudaFreeAsync cost 1-4 µs of host time per call,
/// a cache hit about a hundred nanoseconds.
///
/// A tensor used on another stream must be kept alive by the caller until that stream's work is
/// done (as with torch's record_stream), and a stream must not be destroyed while work that used
/// its blocks is still pending.
///
/// Cached memory is returned to the device's pool (synchronously, so that a stream destroyed
/// since cannot matter) by release_cached(), when the cache would exceed max_cached_bytes(), and
/// before an allocation that found the device out of memory is retried once.
///
/// Inside a CUDA graph capture, allocations on the capturing stream never come from the cache:
/// they become graph allocation nodes (cudaMallocAsync on that stream), and their frees go to
/// cudaFreeAsync (graph nodes while the capture lasts). A block allocated before the capture and
/// freed while its stream captures goes back into that stream's cache without a CUDA call (past
/// the bound it stays cached rather than become a free node of the graph), and is handed out again
/// after the capture, as torch's allocator does: an eager tensor that a graph reads must outlive
/// the graph. A block allocated during capture and freed after it lives on for the graph's
/// replays; relaunching such a graph needs cudaGraphInstantiateFlagAutoFreeOnLaunch.
///
/// Thread-safe. Out of memory throws std::bad_alloc whose what() names the device and size;
/// other CUDA failures throw DistributedError.
class CudaAsyncAllocator final : public Allocator {
 public:
  /// Default bound of the bytes held in the cache (all devices and streams together).
  static constexpr std::size_t kDefaultMaxCachedBytes = std::size_t{1} << 30;

  explicit CudaAsyncAllocator(std::size_t max_cached_bytes = kDefaultMaxCachedBytes);
  /// Releases the cache.
  ~CudaAsyncAllocator() override;
  /// A block of `nbytes` on `device` (nullptr for 0 bytes).
  void* allocate(std::size_t nbytes, Device device) override;
  /// Gives a block from allocate() back: to the cache of the stream it was allocated on, or
  /// (past the bound while that stream does not capture, or a block allocated during a capture)
  /// to the pool, stream-ordered on that stream. Asks CUDA nothing below the bound.
  void deallocate(void* ptr, std::size_t nbytes, Device device) override;

  /// Returns every cached block to its device's pool (as torch.cuda.empty_cache). Returns the
  /// number of bytes released.
  std::size_t release_cached();
  /// Bytes held in the cache now.
  std::size_t cached_bytes() const;
  std::size_t max_cached_bytes() const { return max_cached_bytes_; }

 private:
  struct State;
  std::size_t max_cached_bytes_;
  std::unique_ptr<State> state_;
};

/// Installs a CudaAsyncAllocator for DeviceType::CUDA unless one (of any kind) is installed.
/// Returns true when it installed one. Thread-safe.
bool install_cuda_allocator_if_absent();

}  // namespace groupcoord
