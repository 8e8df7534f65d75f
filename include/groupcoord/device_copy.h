// Element copies that involve device memory. The core copies host tensors itself; a device layer
// (the CUDA layer, or an engine) registers a copy function for its device type, and
// Tensor::contiguous/clone/copy_from use it whenever either side of a copy lives on that type.
#pragma once

#include "groupcoord/device.h"
#include "groupcoord/tensor.h"

namespace groupcoord {

/// Copies `src` into `dst` element by element. Called with defined tensors of equal shape and
/// dtype, any strides, at least one of them on the function's device type (the other may be on
/// the CPU). Throws on failure (std::invalid_argument for a copy it does not support).
using DeviceCopyFn = void (*)(const Tensor& src, Tensor& dst);

/// Installs `fn` for copies involving `type` (thread-safe); nullptr uninstalls. The CPU has no
/// slot: host-to-host copies are always done by the core (std::invalid_argument for CPU).
void set_device_copy(DeviceType type, DeviceCopyFn fn);

/// The function installed for `type`, or nullptr.
DeviceCopyFn get_device_copy(DeviceType type);

}  // namespace groupcoord
