// register_builtin_device_communicators (declared in group_coordinator.h): the coordinator
// layer is the lowest one that sees every built-in implementation, so the explicit registration
// lives here (docs/architecture.md: no static self-registering objects).
#include <mutex>

#include "communicator/cpu_communicator.h"
#include "coordinator/coordinator_setup.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/group_coordinator.h"

#ifdef GROUPCOORD_WITH_CUDA
#include "cuda/cuda_communicator.h"
#include "groupcoord/cuda/runtime.h"
#endif

namespace groupcoord {

void register_builtin_device_communicators() {
  // Serialises concurrent first calls; a factory an engine registered earlier under the same
  // name is kept (registration "if not registered yet").
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!has_device_communicator("cpu")) register_device_communicator("cpu", make_cpu_communicator);
#ifdef GROUPCOORD_WITH_CUDA
  if (!has_device_communicator("cuda")) {
    register_device_communicator("cuda", make_cuda_communicator);
  }
#endif
  // nccl is in the table in every build, so that a build without CUDA says why it cannot be used
  // (its communicator "cuda" is not registered) rather than that it does not exist. An engine that
  // registers its own "gloo" or "nccl" concurrently with the first call here races with it (the
  // same holds for the communicators): register before creating groups.
  if (!has_backend("gloo")) register_backend({"gloo", "cpu", DeviceType::CPU, true});
  if (!has_backend("nccl")) register_backend({"nccl", "cuda", DeviceType::CUDA, false});
}

std::string default_backend() {
  return coordinator_detail::cuda_devices_visible() ? "nccl" : "gloo";
}

namespace coordinator_detail {

bool cuda_devices_visible() {
#ifdef GROUPCOORD_WITH_CUDA
  // cuda_device_count() is 0 (never throws) where no driver is installed, e.g. on CI machines.
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

void init_device_layer(DeviceType device_type) {
#ifdef GROUPCOORD_WITH_CUDA
  // Installs the CUDA allocator and copy kernels even where no communicator is made (world size
  // 1), so that CUDA tensors can be created and copied on every CUDA coordinator.
  if (device_type == DeviceType::CUDA) init_cuda_layer();
#else
  (void)device_type;
#endif
}

Device cuda_device_for(int local_rank) {
#ifdef GROUPCOORD_WITH_CUDA
  // Several ranks may share a GPU (more local ranks than devices, as in single-GPU testing).
  const int count = cuda_device_count();
  if (count > 0) return Device::cuda(local_rank % count);
#endif
  return Device::cuda(local_rank);
}

}  // namespace coordinator_detail

}  // namespace groupcoord
