// Where Tensor::empty gets its memory. An engine installs its own allocator per device type
// (its caching allocator, cudaMallocAsync, pinned host memory, ...); groupcoord only asks for
// and returns blocks through this interface. The CPU has a default; CUDA has none until an
// engine or the CUDA layer installs one.
#pragma once

#include <cstddef>
#include <memory>

#include "groupcoord/device.h"

namespace groupcoord {

/// Interface of a memory allocator for one device type. Implementations must be thread-safe:
/// tensors are created and destroyed on any thread.
class Allocator {
 public:
  virtual ~Allocator() = default;

  /// Returns a block of at least `nbytes` bytes on `device`. `nbytes` may be 0; the result is
  /// then whatever the allocator likes (it is handed back to deallocate unchanged). Throws
  /// (e.g. std::bad_alloc) on failure; never returns nullptr for a non-zero size.
  virtual void* allocate(std::size_t nbytes, Device device) = 0;

  /// Returns a block obtained from allocate(nbytes, device) with the same `nbytes` and `device`.
  /// Called from tensor destructors, so it should not throw (if it does, the error is logged).
  virtual void deallocate(void* ptr, std::size_t nbytes, Device device) = 0;
};

/// The default host allocator: 64-byte aligned blocks (a cache line, and enough for any SIMD
/// load). A 0-byte request yields a valid, distinct, non-null 64-byte block.
///
/// Blocks of kCacheMinBytes and more are cached when freed and handed out again for a request of
/// the same size class (sizes rounded up to a sixteenth of their power of two, so at most ~6 %
/// over the request). Without the cache every such block would be a fresh mmap from the C
/// library (its threshold is 128 KiB) whose pages fault in on first touch: at 256 KiB that cost
/// ~80 µs per call on the development VM, more than the all_reduce that produced the result.
/// The cache holds at most max_cached_bytes (the oldest use does not matter: a block that does
/// not fit is freed); release_cached() empties it.
///
/// Blocks of 2 MiB and more are mappings of their own (mmap; unmapped when freed and not cached)
/// that start on a 2 MiB boundary and ask for transparent huge pages
/// (MADV_HUGEPAGE) over the huge pages they span: large copies and peers' process_vm_readv of them
/// then take 20-30 % less time where the kernel's THP mode is "madvise" (the common default).
/// Thread-safe.
class CpuAllocator final : public Allocator {
 public:
  /// Byte alignment of every block.
  static constexpr std::size_t kAlignment = 64;
  /// Smallest block that is cached when freed (smaller ones come from malloc's own free lists).
  static constexpr std::size_t kCacheMinBytes = std::size_t{128} << 10;
  /// Default bound of the cached bytes.
  static constexpr std::size_t kDefaultMaxCachedBytes = std::size_t{256} << 20;

  explicit CpuAllocator(std::size_t max_cached_bytes = kDefaultMaxCachedBytes);
  /// Frees the cached blocks.
  ~CpuAllocator() override;
  CpuAllocator(const CpuAllocator&) = delete;
  CpuAllocator& operator=(const CpuAllocator&) = delete;

  /// Allocates with 64-byte alignment (from the cache when it holds a block of the size class);
  /// throws std::bad_alloc on failure.
  void* allocate(std::size_t nbytes, Device device) override;
  /// Gives a block from allocate() back: to the cache when it is large enough and fits under the
  /// bound, else to the C library.
  void deallocate(void* ptr, std::size_t nbytes, Device device) override;

  /// Frees every cached block; returns the bytes released.
  std::size_t release_cached();
  /// Bytes held in the cache now.
  std::size_t cached_bytes() const;
  std::size_t max_cached_bytes() const { return max_cached_bytes_; }

  /// The capacity of the block that serves a request of `nbytes` (its size class).
  static std::size_t block_bytes(std::size_t nbytes);

 private:
  struct Cache;
  std::size_t max_cached_bytes_;
  std::unique_ptr<Cache> cache_;
};

/// Installs `allocator` for every later Tensor::empty on `type` (thread-safe). Tensors already
/// allocated keep returning their memory to the allocator that made them. Passing nullptr
/// uninstalls: CUDA then has no allocator, the CPU falls back to the default CpuAllocator.
void set_allocator(DeviceType type, std::shared_ptr<Allocator> allocator);

/// The allocator Tensor::empty on this thread uses for `type`: the innermost ScopedAllocator's
/// on this thread, else the installed one (thread-safe), else nullptr. The CPU always has one
/// (the default CpuAllocator unless an engine installed another).
std::shared_ptr<Allocator> get_allocator(DeviceType type);

/// While it lives, Tensor::empty on the constructing thread takes its `type` blocks from
/// `allocator` instead of the installed one; other threads are unaffected. A language binding
/// uses it to put one call's results in its caller's allocator (for torch: torch's caching
/// allocator, hence torch's graph pool during a CUDA graph capture) without installing that
/// allocator for everyone. Scopes nest; each restores the one it replaced. Destroy it on the
/// thread that made it, in reverse order of construction (it is a stack guard, not movable).
class ScopedAllocator {
 public:
  /// Throws std::invalid_argument when `allocator` is null.
  ScopedAllocator(DeviceType type, std::shared_ptr<Allocator> allocator);
  ~ScopedAllocator();
  ScopedAllocator(const ScopedAllocator&) = delete;
  ScopedAllocator& operator=(const ScopedAllocator&) = delete;

 private:
  DeviceType type_;
  std::shared_ptr<Allocator> allocator_;
  const std::shared_ptr<Allocator>* previous_;
};

}  // namespace groupcoord
