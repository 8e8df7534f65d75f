// register_builtin_device_communicators (declared in device_communicator.h): the coordinator
// layer is the lowest one that sees every built-in implementation, so the explicit registration
// lives here (DESIGN.md §3: no static self-registering objects).
#include <mutex>

#include "communicator/cpu_communicator.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

void register_builtin_device_communicators() {
  // Serialises concurrent first calls; a factory an engine registered earlier under the same
  // name is kept (registration "if not registered yet").
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!has_device_communicator("cpu")) register_device_communicator("cpu", make_cpu_communicator);
}

}  // namespace groupcoord
