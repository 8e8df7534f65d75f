// The registry of device copy functions (device_copy.h).
#include "groupcoord/device_copy.h"

#include <atomic>

#include "groupcoord/check.h"

namespace groupcoord {
namespace {

// One slot per non-CPU device type. Atomic: copies on any thread read it without a lock, and a
// function pointer needs no lifetime management.
std::atomic<DeviceCopyFn> cuda_copy{nullptr};

}  // namespace

void set_device_copy(DeviceType type, DeviceCopyFn fn) {
  GC_CHECK(type != DeviceType::CPU,
           "set_device_copy: host copies are built in; register a function for a device type");
  cuda_copy.store(fn);
}

DeviceCopyFn get_device_copy(DeviceType type) {
  return type == DeviceType::CUDA ? cuda_copy.load() : nullptr;
}

}  // namespace groupcoord
