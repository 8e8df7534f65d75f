// DeviceCommunicator's default answers for features only some backends have (NCCL symmetric
// memory is CUDA-only): a clear "not here" that names the backend, never a silent no-op.
#include "groupcoord/check.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

SymmetricMemoryStats DeviceCommunicator::symmetric_memory_stats() const {
  SymmetricMemoryStats stats;
  stats.disabled_reason = "the " + backend_name() + " communicator has no symmetric memory";
  return stats;
}

Tensor DeviceCommunicator::symmetric_empty(const Shape& shape, DType dtype) {
  (void)shape;
  (void)dtype;
  GC_THROW(std::invalid_argument, "symmetric_empty: the ", backend_name(),
           " communicator has no symmetric memory (only the cuda communicator has)");
}

void DeviceCommunicator::reserve_symmetric_scratch(std::int64_t bytes) {
  GC_THROW(std::invalid_argument, "reserve_symmetric_scratch(", bytes, "): the ", backend_name(),
           " communicator has no symmetric memory (only the cuda communicator has)");
}

}  // namespace groupcoord
