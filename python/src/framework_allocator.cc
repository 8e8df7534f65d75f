#include "framework_allocator.h"

#include <mutex>
#include <unordered_map>
#include <utility>

#include "deferred_release.h"
#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

struct FrameworkAllocator::State {
  mutable std::mutex mutex;
  std::unordered_map<void*, PyObject*> live;  ///< address -> owning framework object (a reference)
};

const std::shared_ptr<Allocator>& FrameworkAllocator::of(Framework framework) {
  // Leaked: blocks may be given back after static destruction has begun.
  static auto* torch =
      new std::shared_ptr<Allocator>(std::make_shared<FrameworkAllocator>(Framework::Torch));
  static auto* cupy =
      new std::shared_ptr<Allocator>(std::make_shared<FrameworkAllocator>(Framework::Cupy));
  return framework == Framework::Torch ? *torch : *cupy;
}

FrameworkAllocator::FrameworkAllocator(Framework framework)
    : framework_(framework), state_(std::make_unique<State>()) {}

FrameworkAllocator::~FrameworkAllocator() = default;

void* FrameworkAllocator::allocate(std::size_t nbytes, Device device) {
  GC_CHECK(device.is_cuda(), "FrameworkAllocator: ", device.str(), " is not a CUDA device");
  py::gil_scoped_acquire gil;
  drop_released();  // blocks given back without the GIL, if any
  void* data = nullptr;
  // At least one byte: every live block has its own address (the map's key).
  py::object block = framework_block(framework_, device, nbytes == 0 ? 1 : nbytes, &data);
  GC_ASSERT(data != nullptr, "FrameworkAllocator: the framework returned a null block");
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->live.emplace(data, block.release().ptr());
  return data;
}

void FrameworkAllocator::deallocate(void* ptr, std::size_t nbytes, Device device) {
  PyObject* object = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->live.find(ptr);
    GC_ASSERT(it != state_->live.end(), "FrameworkAllocator: ", ptr, " (", nbytes, " bytes on ",
              device.str(), ") was not allocated by this allocator");
    object = it->second;
    state_->live.erase(it);
  }
  release_reference(object);  // outside the lock; never waits for the GIL (deferred_release.h)
}

std::size_t FrameworkAllocator::live_blocks() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->live.size();
}

FrameworkResults::FrameworkResults(const ArrayLibrary* library, Device device) {
  if (library == nullptr || !device.is_cuda()) return;
  if (const std::optional<Framework> framework = framework_named(*library)) {
    scope_.emplace(DeviceType::CUDA, FrameworkAllocator::of(*framework));
  }
}

}  // namespace python
}  // namespace groupcoord
