#include "framework_allocator.h"

#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace

struct FrameworkAllocator::State {
  mutable std::mutex mutex;
  std::unordered_map<void*, PyObject*> live;  ///< address -> owning framework object (a reference)
  std::vector<PyObject*> released;            ///< given back without the GIL, not yet dropped
  bool drop_scheduled = false;                ///< a Py_AddPendingCall for `released` is queued

  /// Drops every released object. Needs the GIL.
  void drop_released() {
    std::vector<PyObject*> objects;
    {
      std::lock_guard<std::mutex> lock(mutex);
      objects.swap(released);
      drop_scheduled = false;
    }
    for (PyObject* object : objects) Py_DECREF(object);
  }

  /// Py_AddPendingCall's callback: runs in the main thread with the GIL.
  static int drop_pending(void* state) {
    static_cast<State*>(state)->drop_released();
    return 0;
  }
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
  state_->drop_released();
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
  bool schedule = false;
  const bool interpreter_alive = Py_IsInitialized() && !interpreter_finalizing();
  const bool has_gil = interpreter_alive && PyGILState_Check() != 0;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    auto it = state_->live.find(ptr);
    GC_ASSERT(it != state_->live.end(), "FrameworkAllocator: ", ptr, " (", nbytes, " bytes on ",
              device.str(), ") was not allocated by this allocator");
    object = it->second;
    state_->live.erase(it);
    if (!interpreter_alive) return;  // leaked, see the header
    if (!has_gil) {
      state_->released.push_back(object);
      schedule = !state_->drop_scheduled;
      state_->drop_scheduled = true;
    }
  }
  if (has_gil) {
    Py_DECREF(object);
    return;
  }
  // Fails only when the interpreter's queue is full: the next allocate drops them then.
  if (schedule && Py_AddPendingCall(&State::drop_pending, state_.get()) != 0) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->drop_scheduled = false;
  }
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
