#include "parallel_state/default_backend.h"

#include "groupcoord/check.h"
#include "groupcoord/group_coordinator.h"

namespace groupcoord {
namespace parallel_state_detail {

bool cuda_devices_present() { return default_backend() == "nccl"; }

std::string resolve_backend(const std::string& backend, const char* op) {
  if (backend.empty()) return cuda_devices_present() ? "nccl" : "gloo";
  GC_CHECK(backend == "gloo" || backend == "nccl", op, ": unknown backend '", backend,
           "' (expected \"gloo\", \"nccl\" or \"\" for the default)");
  return backend;
}

}  // namespace parallel_state_detail
}  // namespace groupcoord
