// GroupCoordinator::graph_capture (vLLM's graph_capture context manager) over the CUDA layer's
// GraphCaptureContext.
#include "coordinator/group_coordinator_impl.h"
#include "groupcoord/check.h"
#include "groupcoord/group_coordinator.h"

#ifdef GROUPCOORD_WITH_CUDA
#include "groupcoord/cuda/graph_capture.h"
#endif

namespace groupcoord {

std::shared_ptr<GraphCaptureContext> GroupCoordinator::graph_capture(
    std::optional<std::uintptr_t> stream_handle) {
  Impl& s = *impl_;
  s.check_alive("graph_capture");
  const comm::OpLabel label = s.label("graph_capture");
  GC_CHECK(s.backend == "nccl", label, ": needs the nccl backend (this coordinator uses '",
           s.backend, "')");
#ifdef GROUPCOORD_WITH_CUDA
  if (stream_handle) return std::make_shared<GraphCaptureContext>(s.device, *stream_handle);
  return std::make_shared<GraphCaptureContext>(s.device);
#else
  GC_CHECK(false, label, ": this build has no CUDA support");
  return nullptr;
#endif
}

}  // namespace groupcoord
