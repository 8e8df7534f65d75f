// The default CPU allocator and the per-device-type allocator registry.
#include "groupcoord/allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "core/address_sanitizer.h"

namespace groupcoord {
namespace {

/// Installed allocators, one slot per DeviceType. A function-local static so that tensors
/// created during static initialisation (of an engine) still find the registry.
struct Registry {
  std::mutex mutex;
  std::shared_ptr<Allocator> cpu = std::make_shared<CpuAllocator>();
  std::shared_ptr<Allocator> cuda;

  std::shared_ptr<Allocator>& slot(DeviceType type) { return type == DeviceType::CPU ? cpu : cuda; }
};

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: tensors may die after main
  return *instance;
}

/// This thread's innermost ScopedAllocator per DeviceType (null: none), indexed by the type.
thread_local const std::shared_ptr<Allocator>* t_scoped[2] = {nullptr, nullptr};

std::size_t slot_index(DeviceType type) { return type == DeviceType::CPU ? 0 : 1; }

constexpr std::size_t kHugePage = std::size_t{2} << 20;

/// A block of less than kCacheMinBytes (every result of a small collective): malloc'ed with
/// room to slide up to the next 64-byte boundary, the slide kept in the byte just below the block.
/// glibc's aligned_alloc takes its slow path for every alignment above 16 (no per-thread cache,
/// a chunk split and a free of the rest): 54-120 ns per allocation and free on the development VM
/// against 12-41 ns this way (docs/benchmarks/cpu_collectives.md, session 14).
/// Under AddressSanitizer the slack on both sides is poisoned, so that a write past the block's
/// size class is reported as it was with aligned_alloc.
void* small_block(std::size_t bytes) {
  constexpr std::size_t kAlign = CpuAllocator::kAlignment;
  auto* raw = static_cast<unsigned char*>(std::malloc(bytes + kAlign));
  if (raw == nullptr) return nullptr;
  // The slide is 1..64 whatever malloc's alignment (16, 32, 48 or 64 with glibc's): never 0, so
  // there is always a byte below the block for it, and it fits a byte.
  const auto address = reinterpret_cast<std::uintptr_t>(raw);
  unsigned char* block = raw + (kAlign - address % kAlign);
  block[-1] = static_cast<unsigned char>(block - raw);
  GC_POISON(raw, static_cast<std::size_t>(block - raw));  // the slide, its byte included
  GC_POISON(block + bytes, static_cast<std::size_t>(raw + bytes + kAlign - (block + bytes)));
  return block;
}

void free_small_block(void* ptr) {
  auto* block = static_cast<unsigned char*>(ptr);
  GC_UNPOISON(block - 1, 1);
  std::free(block - block[-1]);  // malloc unpoisons the chunk when it hands it out again
}

/// A new block. One of a huge page or more is a mapping of its own that starts on a huge-page
/// boundary and asks the kernel for transparent huge pages over the whole huge pages it spans
/// (the usual THP mode, "madvise", gives them only where asked): copies of several MiB into and
/// out of it, and other processes' reads of it (process_vm_readv), then walk a 512th of the page
/// entries; all-gathers of 16-64 MiB between two processes took 25-30 % less time
/// (docs/benchmarks/cpu_collectives.md). Its own mapping, not the C heap: glibc serves such sizes
/// from its heap once its mmap threshold has risen, and the advice would then stay on heap ranges
/// reused later for small blocks. Smaller blocks come from the C heap.
void* fresh_block(std::size_t bytes) {
  if (bytes < CpuAllocator::kCacheMinBytes) return small_block(bytes);
  if (bytes < kHugePage) return std::aligned_alloc(CpuAllocator::kAlignment, bytes);
  // Sizes this large are whole multiples of 128 KiB (block_bytes), so of any page size.
  const std::size_t span = bytes + kHugePage;  // room to slide to the next boundary
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  const std::size_t head = aligned - start;
  if (head > 0) ::munmap(raw, head);
  if (span - head > bytes) ::munmap(reinterpret_cast<void*>(aligned + bytes), span - head - bytes);
  void* block = reinterpret_cast<void*>(aligned);
  // Advice only: where the kernel has no THP the block is still good.
  (void)::madvise(block, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
  return block;
}

/// Gives back a block of fresh_block(bytes).
void free_block(void* ptr, std::size_t bytes) {
  if (bytes < CpuAllocator::kCacheMinBytes) {
    free_small_block(ptr);
  } else if (bytes < kHugePage) {
    std::free(ptr);
  } else {
    ::munmap(ptr, bytes);
  }
}

}  // namespace

/// Freed large blocks by size class.
struct CpuAllocator::Cache {
  mutable std::mutex mutex;
  std::unordered_map<std::size_t, std::vector<void*>> blocks;
  std::size_t bytes = 0;
};

CpuAllocator::CpuAllocator(std::size_t max_cached_bytes)
    : max_cached_bytes_(max_cached_bytes), cache_(std::make_unique<Cache>()) {}

CpuAllocator::~CpuAllocator() { release_cached(); }

std::size_t CpuAllocator::block_bytes(std::size_t nbytes) {
  if (nbytes == 0) return kAlignment;
  if (nbytes < kCacheMinBytes) return (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  // A sixteenth of the power of two at or above the request: at most ~6 % over it.
  std::size_t power = kCacheMinBytes;
  while (power < nbytes) {
    if (power > SIZE_MAX / 2) throw std::bad_alloc();
    power *= 2;
  }
  const std::size_t step = power / 16;
  return (nbytes + step - 1) / step * step;
}

void* CpuAllocator::allocate(std::size_t nbytes, Device /*device*/) {
  // aligned_alloc wants a size that is a multiple of the alignment; rounding 0 up to one block
  // gives every allocation a distinct, valid address.
  if (nbytes > SIZE_MAX - kAlignment) throw std::bad_alloc();
  const std::size_t bytes = block_bytes(nbytes);
  if (bytes >= kCacheMinBytes) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->blocks.find(bytes);
    if (it != cache_->blocks.end() && !it->second.empty()) {
      void* ptr = it->second.back();
      it->second.pop_back();
      cache_->bytes -= bytes;
      return ptr;
    }
  }
  void* ptr = fresh_block(bytes);
  if (ptr == nullptr) {
    // Memory held by the cache may be what is missing.
    if (release_cached() == 0) throw std::bad_alloc();
    ptr = fresh_block(bytes);
    if (ptr == nullptr) throw std::bad_alloc();
  }
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, std::size_t nbytes, Device /*device*/) {
  if (ptr == nullptr) return;
  const std::size_t bytes = block_bytes(nbytes);
  if (bytes >= kCacheMinBytes) {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->bytes + bytes <= max_cached_bytes_) {
      cache_->blocks[bytes].push_back(ptr);
      cache_->bytes += bytes;
      return;
    }
  }
  free_block(ptr, bytes);
}

std::size_t CpuAllocator::release_cached() {
  std::unordered_map<std::size_t, std::vector<void*>> blocks;
  std::size_t released = 0;
  {
    std::lock_guard<std::mutex> lock(cache_->mutex);
    blocks.swap(cache_->blocks);
    released = cache_->bytes;
    cache_->bytes = 0;
  }
  for (auto& [bytes, ptrs] : blocks) {
    for (void* ptr : ptrs) free_block(ptr, bytes);
  }
  return released;
}

std::size_t CpuAllocator::cached_bytes() const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  return cache_->bytes;
}

void set_allocator(DeviceType type, std::shared_ptr<Allocator> allocator) {
  if (type == DeviceType::CPU && allocator == nullptr) {
    allocator = std::make_shared<CpuAllocator>();
  }
  Registry& reg = registry();
  std::shared_ptr<Allocator> old;
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    old = std::move(reg.slot(type));
    reg.slot(type) = std::move(allocator);
  }
  // `old` is released here, outside the lock, in case its destructor does real work.
}

std::shared_ptr<Allocator> get_allocator(DeviceType type) {
  if (const std::shared_ptr<Allocator>* scoped = t_scoped[slot_index(type)]) return *scoped;
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  return reg.slot(type);
}

ScopedAllocator::ScopedAllocator(DeviceType type, std::shared_ptr<Allocator> allocator)
    : type_(type), allocator_(std::move(allocator)), previous_(t_scoped[slot_index(type)]) {
  if (allocator_ == nullptr) {
    throw std::invalid_argument(type == DeviceType::CPU
                                    ? "ScopedAllocator: the allocator for cpu is null"
                                    : "ScopedAllocator: the allocator for cuda is null");
  }
  t_scoped[slot_index(type_)] = &allocator_;
}

ScopedAllocator::~ScopedAllocator() { t_scoped[slot_index(type_)] = previous_; }

}  // namespace groupcoord
