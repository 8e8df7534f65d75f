// DeviceCommunicator's default answers for features only some backends have: caller-provided
// outputs through the out-of-place call and a copy (the built-in communicators write straight
// into `out`), and for NCCL symmetric memory (CUDA-only) a clear "not here" that names the
// backend, never a silent no-op.
#include "communicator/dim_layout.h"
#include "communicator/op_checks.h"
#include "communicator/output_tensor.h"
#include "groupcoord/check.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

namespace {

// Defaults have no group name of their own: errors name the backend.
comm::OpLabel default_label(const std::string& backend, const char* op) {
  return comm::OpLabel{backend, op};
}

}  // namespace

Tensor DeviceCommunicator::all_gatherv(const Tensor& input, int dim,
                                       const std::optional<std::vector<std::int64_t>>& sizes) {
  return all_gatherv(std::vector<Tensor>{input}, dim, sizes).front();
}

Tensor DeviceCommunicator::all_reduce(const Tensor& input, const Tensor& out) {
  const std::string backend = backend_name();
  comm::check_output(default_label(backend, "all_reduce"), out, input.shape(), input.dtype(),
                     input.device());
  return comm::write_into(out, all_reduce(input));
}

Tensor DeviceCommunicator::all_gather(const Tensor& input, int dim, const Tensor& out) {
  const std::string backend = backend_name();
  const comm::OpLabel where = default_label(backend, "all_gather");
  const int d = comm::wrap_dim(where, dim, input.dim());
  comm::check_output(where, out, comm::gathered_shape(input.shape(), d, world_size()),
                     input.dtype(), input.device());
  return comm::write_into(out, all_gather(input, d));
}

Tensor DeviceCommunicator::reduce_scatter(const Tensor& input, int dim, const Tensor& out) {
  const std::string backend = backend_name();
  const comm::OpLabel where = default_label(backend, "reduce_scatter");
  const int d = comm::wrap_dim(where, dim, input.dim());
  comm::check_output(where, out, comm::scattered_shape(input.shape(), d, world_size()),
                     input.dtype(), input.device());
  return comm::write_into(out, reduce_scatter(input, d));
}

Tensor DeviceCommunicator::recv(const Tensor& out, std::optional<int> src) {
  const std::string backend = backend_name();
  const comm::OpLabel where = default_label(backend, "recv");
  GC_CHECK(out.defined(), where, ": out is an undefined tensor");
  comm::check_output(where, out, out.shape(), out.dtype(), out.device());  // contiguous
  return comm::write_into(out, recv(out.shape(), out.dtype(), src));
}

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
