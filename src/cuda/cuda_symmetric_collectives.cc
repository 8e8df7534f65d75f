// CudaCommunicator's symmetric-memory paths (docs/cuda.md, cuda/symmetric/symmetric_memory.h). Each
// one leases the scratch window, copies the input into its region (skipped when the input already
// lies in a window: a symmetric_empty tensor), runs NCCL from window to window so that NCCL may
// pick its symmetric kernels, and copies the result into a new tensor, all on the current stream.
// Every decision below depends only on values equal on every rank (world size, dtype, sizes, the
// agreed settings), never on local state, because NCCL chooses symmetric kernels per rank.
#include <cuda_runtime_api.h>

#include "cuda/cuda_communicator.h"
#include "cuda/nccl/nccl_dtype.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {

namespace {

// Where the call reads its input: the tensor itself (zero-copy) or its copy in the scratch.
const void* stage_input(const Tensor& input, char* slot, bool zero_copy, Device device) {
  if (zero_copy) return input.data_ptr();
  Tensor staged = Tensor::from_blob(slot, input.shape(), input.dtype(), device);
  staged.copy_from(input);
  return slot;
}

// `out` (or, when undefined, a new tensor of `shape`) holding the bytes NCCL wrote at `result`.
Tensor copy_out(const char* result, Tensor out, const Shape& shape, DType dtype, Device device,
                cudaStream_t stream, const char* op) {
  if (!out.defined()) out = Tensor::empty(shape, dtype, device);
  GC_CUDA_CHECK(
      cudaMemcpyAsync(out.data_ptr(), result, out.nbytes(), cudaMemcpyDeviceToDevice, stream), op,
      ": copying the result out of the symmetric scratch");
  return out;
}

}  // namespace

std::optional<Tensor> CudaCommunicator::run_symmetric(const char* op, const Tensor& input,
                                                      const SymmetricPlan& plan,
                                                      const SymmetricCall& call) {
  cuda::NcclComm& nc = *nccl_;
  cuda::SymmetricMemory& symmetric = nc.symmetric();
  cudaStream_t stream = current_cuda_stream(device_);
  cuda::SymmetricMemory::Lease lease =
      symmetric.lease_scratch(plan.layout.bytes_needed, stream, op);
  if (!lease) return std::nullopt;
  const void* send =
      stage_input(input, lease.data() + plan.layout.input_offset, plan.zero_copy, device_);
  char* recv = lease.data() + plan.layout.output_offset;
  nc.enqueue(
      op, stream,
      [&](const cuda::NcclApi& api, ncclComm_t c) { return call(api, c, send, recv, stream); },
      plan.zero_copy ? input : Tensor());
  Tensor out = copy_out(recv, plan.out, plan.output_shape, input.dtype(), device_, stream, op);
  lease.finish(stream);
  symmetric.count_symmetric_call(plan.zero_copy);
  return out;
}

bool CudaCommunicator::in_symmetric_pool(const Tensor& tensor) const {
  return tensor.is_contiguous() && nccl_->symmetric().in_pool(tensor.data_ptr(), tensor.nbytes());
}

std::optional<Tensor> CudaCommunicator::symmetric_all_gather(const Tensor& front,
                                                             const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  if (!nc.symmetric().enabled() || front.numel() == 0) return std::nullopt;
  SymmetricPlan plan;
  plan.out = out;
  plan.zero_copy = in_symmetric_pool(front);
  plan.layout = cuda::all_gather_layout(front.nbytes(), world_size_, rank_, plan.zero_copy);
  plan.output_shape = front.shape();
  plan.output_shape[0] *= world_size_;
  const cuda::NcclType type = cuda::nccl_move_type(front.dtype(), nc.nccl_version());
  const std::size_t count = static_cast<std::size_t>(front.numel()) * type.scale;
  return run_symmetric(
      "all_gather", front, plan,
      [&](const cuda::NcclApi& api, ncclComm_t c, const void* send, void* recv,
          cudaStream_t stream) { return api.AllGather(send, recv, count, type.type, c, stream); });
}

std::optional<Tensor> CudaCommunicator::symmetric_reduce_scatter(const comm::OpLabel& where,
                                                                 const Tensor& front,
                                                                 const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  if (!nc.symmetric().enabled() || front.numel() == 0 ||
      !cuda::symmetric_reduction_dtype(front.dtype())) {
    return std::nullopt;
  }
  const cuda::NcclSum sum = cuda::nccl_sum_type(where, front.dtype(), nc.nccl_version());
  SymmetricPlan plan;
  plan.out = out;
  plan.zero_copy = in_symmetric_pool(front);
  plan.layout = cuda::reduce_scatter_layout(front.nbytes() / static_cast<std::size_t>(world_size_),
                                            world_size_, plan.zero_copy);
  plan.output_shape = front.shape();
  plan.output_shape[0] /= world_size_;
  const std::size_t count = static_cast<std::size_t>(front.numel() / world_size_);
  return run_symmetric(where.op, front, plan,
                       [&](const cuda::NcclApi& api, ncclComm_t c, const void* send, void* recv,
                           cudaStream_t stream) {
                         return api.ReduceScatter(send, recv, count, sum.type, sum.op, c, stream);
                       });
}

std::optional<Tensor> CudaCommunicator::symmetric_all_reduce(const comm::OpLabel& where,
                                                             const Tensor& input,
                                                             const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  cuda::SymmetricMemory& symmetric = nc.symmetric();
  if (!symmetric.enabled() || input.numel() == 0 ||
      !cuda::symmetric_reduction_dtype(input.dtype()) ||
      !cuda::all_reduce_takes_symmetric_path(symmetric.all_reduce_routing(), world_size_,
                                             static_cast<std::int64_t>(input.nbytes()))) {
    return std::nullopt;
  }
  const cuda::NcclSum sum = cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  SymmetricPlan plan;
  plan.out = out;
  plan.zero_copy = in_symmetric_pool(input);
  plan.layout = cuda::all_reduce_layout(input.nbytes(), plan.zero_copy);
  plan.output_shape = input.shape();
  const std::size_t count = static_cast<std::size_t>(input.numel());
  return run_symmetric(where.op, input, plan,
                       [&](const cuda::NcclApi& api, ncclComm_t c, const void* send, void* recv,
                           cudaStream_t stream) {
                         return api.AllReduce(send, recv, count, sum.type, sum.op, c, stream);
                       });
}

SymmetricMemoryStats CudaCommunicator::symmetric_memory_stats() const {
  return nccl("symmetric_memory_stats").symmetric().stats();
}

Tensor CudaCommunicator::symmetric_empty(const Shape& shape, DType dtype) {
  cuda::NcclComm& nc = nccl("symmetric_empty");
  cuda::DeviceGuard guard(device_);
  const bool capturing =
      cuda::stream_is_capturing(current_cuda_stream(device_), name_, " symmetric_empty");
  return nc.symmetric().empty(shape, dtype, capturing);
}

void CudaCommunicator::reserve_symmetric_scratch(std::int64_t bytes) {
  const comm::OpLabel where = label("reserve_symmetric_scratch");
  cuda::NcclComm& nc = nccl(where.op);
  GC_CHECK(bytes >= 0, where, ": negative size ", bytes);
  cuda::DeviceGuard guard(device_);
  nc.symmetric().reserve_scratch(static_cast<std::size_t>(bytes));
}

}  // namespace groupcoord
