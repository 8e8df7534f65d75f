// The default CPU allocator and the per-device-type allocator registry.
#include "groupcoord/allocator.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <stdexcept>

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

}  // namespace

void* CpuAllocator::allocate(std::size_t nbytes, Device /*device*/) {
  // aligned_alloc wants a size that is a multiple of the alignment; rounding 0 up to one block
  // gives every allocation a distinct, valid address.
  if (nbytes > SIZE_MAX - kAlignment) throw std::bad_alloc();
  const std::size_t rounded =
      nbytes == 0 ? kAlignment : (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) throw std::bad_alloc();
  return ptr;
}

void CpuAllocator::deallocate(void* ptr, std::size_t /*nbytes*/, Device /*device*/) {
  std::free(ptr);
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
