// Makes a CUDA device current for a scope and restores the previous one (the CUDA runtime's
// current device is per thread; the caller's choice must survive our calls).
#pragma once

#include "groupcoord/device.h"

namespace groupcoord {
namespace cuda {

/// Sets `device` as the calling thread's current CUDA device until destruction. Throws
/// std::invalid_argument for a non-CUDA device or an index outside [0, device count), and
/// DistributedError when CUDA fails; the destructor never throws.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// As DeviceGuard, for teardown and abort paths, where a sticky CUDA error must not stop the work:
/// never throws and switches even when the current device cannot be read (then nothing is
/// restored).
class BestEffortDeviceGuard {
 public:
  explicit BestEffortDeviceGuard(Device device);
  ~BestEffortDeviceGuard();
  BestEffortDeviceGuard(const BestEffortDeviceGuard&) = delete;
  BestEffortDeviceGuard& operator=(const BestEffortDeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

/// Throws std::invalid_argument naming `what` unless `device` is a CUDA device this process can
/// see; DistributedError when no CUDA device is usable at all (no driver, no GPU).
void check_cuda_device(Device device, const char* what);

}  // namespace cuda
}  // namespace groupcoord
