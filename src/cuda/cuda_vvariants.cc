// CudaCommunicator's v-variants: per-rank sizes along a dim. Uniform sizes take the plain
// ncclAllGather / ncclReduceScatter path (so they behave exactly like all_gather /
// reduce_scatter); other sizes run one ncclBroadcast (gather) or ncclReduce (scatter) per rank
// inside one ncclGroupStart/End, skipping ranks whose size is 0. The sizes are arguments every
// rank passes alike, so every rank issues the same calls.
#include "communicator/dim_layout.h"
#include "communicator/sizes.h"
#include "cuda/cuda_communicator.h"
#include "cuda/nccl/nccl_dtype.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {

namespace {

// Name of inputs[i] in error messages.
std::string input_name(std::size_t i, std::size_t count) {
  return count == 1 ? std::string("input") : "inputs[" + std::to_string(i) + "]";
}

}  // namespace

int CudaCommunicator::check_gatherv_input(
    const comm::OpLabel& where, const Tensor& input, std::size_t index, std::size_t count, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) const {
  // The name is built only for the message: valid inputs cost no string.
  if (!input.defined() || input.device() != device_) {
    check_tensor(where, input, input_name(index, count).c_str());
  }
  const int d = comm::wrap_dim(where, dim, input.dim());
  if (sizes) comm::check_own_size(where, *sizes, rank_, input.size(d));
  return d;
}

Tensor CudaCommunicator::all_gatherv(const Tensor& input, int dim,
                                     const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("all_gatherv");
  nccl(where.op);
  if (sizes) comm::check_sizes_shape(where, *sizes, world_size_);
  const int d = check_gatherv_input(where, input, 0, 1, dim, sizes);
  cuda::DeviceGuard guard(device_);
  return !sizes || comm::sizes_are_uniform(*sizes) ? gather_uniform(input, d)
                                                   : gather_varying(input, d, *sizes);
}

std::vector<Tensor> CudaCommunicator::all_gatherv(
    const std::vector<Tensor>& inputs, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("all_gatherv");
  nccl(where.op);
  if (sizes) comm::check_sizes_shape(where, *sizes, world_size_);
  // Every input is checked before anything is enqueued; the dims are wrapped again below.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    check_gatherv_input(where, inputs[i], i, inputs.size(), dim, sizes);
  }
  const bool uniform = !sizes || comm::sizes_are_uniform(*sizes);
  cuda::DeviceGuard guard(device_);
  std::vector<Tensor> outputs;
  outputs.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    const int d = comm::wrap_dim(where, dim, input.dim());
    outputs.push_back(uniform ? gather_uniform(input, d) : gather_varying(input, d, *sizes));
  }
  return outputs;
}

Tensor CudaCommunicator::reduce_scatterv(const Tensor& input, int dim,
                                         const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("reduce_scatterv");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  if (sizes) {
    comm::check_sizes_shape(where, *sizes, world_size_);
    comm::check_sizes_sum(where, *sizes, input.size(d));
  }
  const bool uniform = !sizes || comm::sizes_are_uniform(*sizes);
  GC_CHECK(!uniform || input.size(d) % world_size_ == 0, where, ": size ", input.size(d),
           " of dim ", dim, " is not divisible by the world size ", world_size_);
  cuda::DeviceGuard guard(device_);
  return uniform ? scatter_uniform(where, input, d) : scatter_varying(where, input, d, *sizes);
}

Tensor CudaCommunicator::gather_varying(const Tensor& input, int dim,
                                        const std::vector<std::int64_t>& sizes) {
  cuda::NcclComm& nc = *nccl_;
  cudaStream_t stream = current_cuda_stream(device_);
  const Tensor front = comm::move_dim_to_front(input, dim);
  const std::int64_t per_row = comm::elements_per_index(front.shape(), 0);
  Shape shape = front.shape();
  shape[0] = 0;
  for (std::int64_t size : sizes) shape[0] += size;
  Tensor out = Tensor::empty(shape, front.dtype(), device_);
  const cuda::NcclType type = cuda::nccl_move_type(front.dtype(), nc.nccl_version());
  char* base = static_cast<char*>(out.data_ptr());
  const std::size_t row_bytes = static_cast<std::size_t>(per_row) * front.element_size();
  std::vector<cuda::NcclCall> calls;
  std::int64_t offset = 0;
  for (int r = 0; r < world_size_; ++r) {
    const std::size_t count = static_cast<std::size_t>(sizes[r] * per_row) * type.scale;
    void* slot = base + offset * row_bytes;
    offset += sizes[r];
    if (count == 0) continue;
    // Only the root's send buffer is read; the others receive in place into their slot.
    const void* from = r == rank_ ? front.data_ptr() : slot;
    calls.push_back([=](const cuda::NcclApi& api, ncclComm_t c) {
      return api.Broadcast(from, slot, count, type.type, r, c, stream);
    });
  }
  if (!calls.empty()) nc.enqueue_group("all_gatherv", stream, calls);
  return comm::move_dim_from_front(out, dim);
}

Tensor CudaCommunicator::scatter_varying(const comm::OpLabel& where, const Tensor& input, int dim,
                                         const std::vector<std::int64_t>& sizes) {
  cuda::NcclComm& nc = *nccl_;
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::NcclSum sum = cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  const Tensor front = comm::move_dim_to_front(input, dim);
  const std::int64_t per_row = comm::elements_per_index(front.shape(), 0);
  Shape shape = front.shape();
  shape[0] = sizes[rank_];
  Tensor out = Tensor::empty(shape, front.dtype(), device_);
  const char* base = static_cast<const char*>(front.data_ptr());
  const std::size_t row_bytes = static_cast<std::size_t>(per_row) * front.element_size();
  std::vector<cuda::NcclCall> calls;
  std::int64_t offset = 0;
  for (int r = 0; r < world_size_; ++r) {
    const std::size_t count = static_cast<std::size_t>(sizes[r] * per_row);
    const void* from = base + offset * row_bytes;
    offset += sizes[r];
    if (count == 0) continue;
    // The receive buffer is only written on the root; elsewhere any valid pointer will do.
    void* into = r == rank_ ? out.data_ptr() : const_cast<void*>(from);
    calls.push_back([=](const cuda::NcclApi& api, ncclComm_t c) {
      return api.Reduce(from, into, count, sum.type, sum.op, r, c, stream);
    });
  }
  if (!calls.empty()) nc.enqueue_group(where.op, stream, calls);
  return comm::move_dim_from_front(out, dim);
}

}  // namespace groupcoord
