// DeviceCommunicator's default answers for what only some backends have, so that an engine's
// communicator implements the collectives and nothing more (as lmdeploy's DeviceCommImpl does):
// caller-provided outputs through the out-of-place call and a copy (the built-in communicators
// write straight into `out`), gather through all_gather, MoE without an all-to-all manager (the
// inputs unchanged), and for point-to-point and NCCL symmetric memory a clear "not here" that
// names the backend, never a silent no-op.
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

std::optional<Tensor> DeviceCommunicator::gather(const Tensor& input, int dst, int dim) {
  const std::string backend = backend_name();
  const comm::OpLabel where = default_label(backend, "gather");
  comm::check_peer_rank(where, dst, "dst", rank_in_group(), world_size(), /*allow_self=*/true);
  Tensor gathered = all_gather(input, dim);  // collective: every rank takes part
  if (rank_in_group() != dst) return std::nullopt;
  return gathered;
}

void DeviceCommunicator::send(const Tensor& tensor, std::optional<int> dst) {
  (void)tensor;
  (void)dst;
  GC_THROW(std::invalid_argument, "send: the ", backend_name(),
           " communicator has no point-to-point transfers");
}

Tensor DeviceCommunicator::recv(const Shape& shape, DType dtype, std::optional<int> src) {
  (void)shape;
  (void)dtype;
  (void)src;
  GC_THROW(std::invalid_argument, "recv: the ", backend_name(),
           " communicator has no point-to-point transfers");
}

std::shared_ptr<Work> DeviceCommunicator::isend(const Tensor& tensor, int dst) {
  (void)tensor;
  GC_THROW(std::invalid_argument, "isend(dst=", dst, "): the ", backend_name(),
           " communicator has no point-to-point transfers");
}

std::shared_ptr<Work> DeviceCommunicator::irecv(const Tensor& tensor, int src) {
  (void)tensor;
  GC_THROW(std::invalid_argument, "irecv(src=", src, "): the ", backend_name(),
           " communicator has no point-to-point transfers");
}

DispatchRouterLogitsResult DeviceCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  (void)is_sequence_parallel;
  return {hidden_states, router_logits, extra_tensors};
}

DispatchResult DeviceCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                            const Tensor& topk_ids, bool is_sequence_parallel,
                                            const std::vector<Tensor>& extra_tensors) {
  (void)is_sequence_parallel;
  return {hidden_states, topk_weights, topk_ids, extra_tensors};
}

Tensor DeviceCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  (void)is_sequence_parallel;
  return hidden_states;
}

std::unique_ptr<DeviceCommunicator> DeviceCommunicator::shrink(
    const std::vector<int>& /*excluded*/, const DeviceCommunicatorContext& /*context*/) {
  return nullptr;  // no way to keep connections: the caller builds a fresh communicator
}

}  // namespace groupcoord
