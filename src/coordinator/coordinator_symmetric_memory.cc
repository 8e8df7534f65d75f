// GroupCoordinator's NCCL symmetric-memory entry points: forwarded to the device communicator
// (only the cuda one has symmetric memory). At world size 1 there is no communicator and every
// collective is a bypass, so a plain tensor serves.
#include "coordinator/group_coordinator_impl.h"
#include "groupcoord/check.h"
#include "groupcoord/group_coordinator.h"

namespace groupcoord {

Tensor GroupCoordinator::symmetric_empty(const Shape& shape, DType dtype) {
  Impl& s = *impl_;
  s.check_alive("symmetric_empty");
  if (s.world_size == 1) return Tensor::empty(shape, dtype, s.device);
  GC_CHECK(s.backend == "nccl", s.label("symmetric_empty"),
           ": needs the nccl backend (this coordinator uses '", s.backend, "')");
  return s.require_communicator("symmetric_empty").symmetric_empty(shape, dtype);
}

SymmetricMemoryStats GroupCoordinator::symmetric_memory_stats() const {
  const Impl& s = *impl_;
  s.check_alive("symmetric_memory_stats");
  if (s.communicator == nullptr) {
    SymmetricMemoryStats stats;
    stats.disabled_reason = s.world_size == 1 ? "world size 1: collectives are bypassed"
                                              : "the group has no device communicator";
    return stats;
  }
  return s.communicator->symmetric_memory_stats();
}

void GroupCoordinator::reserve_symmetric_scratch(std::int64_t bytes) {
  Impl& s = *impl_;
  s.check_alive("reserve_symmetric_scratch");
  if (s.world_size == 1) return;
  GC_CHECK(s.backend == "nccl", s.label("reserve_symmetric_scratch"),
           ": needs the nccl backend (this coordinator uses '", s.backend, "')");
  s.require_communicator("reserve_symmetric_scratch").reserve_symmetric_scratch(bytes);
}

}  // namespace groupcoord
