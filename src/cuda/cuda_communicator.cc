// CudaCommunicator (cuda_communicator.h): construction and checks, then the operations in the
// order of the header: uniform collectives, v-variants, symmetric-memory routes, point-to-point,
// MoE dispatch/combine. Every operation checks all its arguments before anything is enqueued, then
// issues its NCCL call (or one group) on the device's current stream through NcclComm.
#include "cuda/cuda_communicator.h"

#include <cuda_runtime_api.h>
#include <exception>
#include <numeric>

#include "communicator/dim_layout.h"
#include "communicator/dispatch_inputs.h"
#include "communicator/op_checks.h"
#include "communicator/output_tensor.h"
#include "communicator/sizes.h"
#include "cuda/event_work.h"
#include "cuda/nccl/nccl_dtype.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/driver_calls.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/runtime.h"
#include "groupcoord/cuda/stream.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

std::string pick_name(const DeviceCommunicatorContext& context) {
  if (!context.unique_name.empty()) return context.unique_name;
  return context.cpu_group ? context.cpu_group->name() : std::string("cuda");
}

}  // namespace

std::unique_ptr<DeviceCommunicator> make_cuda_communicator(
    const DeviceCommunicatorContext& context) {
  return std::make_unique<CudaCommunicator>(context);
}

CudaCommunicator::CudaCommunicator(const DeviceCommunicatorContext& context)
    : CudaCommunicator(context, nullptr) {}

CudaCommunicator::CudaCommunicator(const DeviceCommunicatorContext& context,
                                   std::shared_ptr<cuda::NcclComm> nccl,
                                   std::unique_ptr<cuda::SymmetricMemory> symmetric)
    : name_(pick_name(context)),
      device_(context.device),
      cpu_group_(context.cpu_group),
      use_all2all_(context.use_all2all) {
  GC_CHECK(cpu_group_ != nullptr, name_,
           " cuda communicator: the context has no cpu_group (NCCL is set up over it)");
  GC_CHECK(device_.is_cuda(), name_, " cuda communicator: device ", device_.str(),
           " is not a CUDA device");
  rank_ = cpu_group_->rank();
  world_size_ = cpu_group_->size();
  init_cuda_layer();  // outputs need the CUDA allocator, dim moves the copy kernel
  nccl_ = nccl ? std::move(nccl) : cuda::NcclComm::create(cpu_group_, device_, name_);
  symmetric_ =
      symmetric ? std::move(symmetric)
                : std::make_unique<cuda::SymmetricMemory>(*nccl_, cuda::nccl_api());  // collective
  if (use_all2all_) {
    all2all_ = std::make_unique<comm::NaiveAll2All>(*this, device_, cpu_group_, name_);
  }
}

CudaCommunicator::~CudaCommunicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, " cuda communicator: destroy failed: ", e.what());
  }
}

cuda::NcclComm& CudaCommunicator::nccl(const char* op) const {
  if (destroyed_.load()) {
    if (replaced_by_shrink_) {
      GC_THROW(DistributedError, name_, " ", op,
               ": this cuda communicator was replaced when the group shrank; use the group's "
               "current communicator");
    }
    GC_THROW(DistributedError, name_, " ", op, ": the cuda communicator was destroyed");
  }
  return *nccl_;
}

void CudaCommunicator::check_tensor(const comm::OpLabel& where, const Tensor& tensor,
                                    const char* what) const {
  comm::check_tensor_on(where, tensor, what, device_);
}

void CudaCommunicator::synchronize() {
  cuda::NcclComm& nc = nccl("synchronize");
  nc.synchronize(current_cuda_stream(device_), "synchronize");
}

void CudaCommunicator::destroy() {
  if (destroyed_.exchange(true)) return;
  if (nccl_) nccl_->destroy();
}

std::unique_ptr<DeviceCommunicator> CudaCommunicator::shrink(
    const std::vector<int>& excluded, const DeviceCommunicatorContext& context) {
  GC_CHECK(context.cpu_group != nullptr, name_, " shrink: the context has no cpu_group");
  GC_CHECK(context.device == device_, name_, " shrink: the survivors' communicator must stay on ",
           device_.str(), ", not ", context.device.str());
  GC_CHECK(nccl_ != nullptr, name_, " shrink: this cuda communicator was already replaced");
  // Collective over context.cpu_group, even when this communicator was destroyed (then nullptr).
  // Non-empty `excluded`: nccl_ is abandoned on return, whatever the answer.
  std::shared_ptr<cuda::NcclComm> kept = nccl_->shrink(excluded, context.cpu_group);
  if (!kept) return nullptr;
  std::unique_ptr<DeviceCommunicator> next;
  if (kept == nccl_) {
    // Nobody left: the same NCCL communicator (now over the new CPU group) and its symmetric
    // memory, whose windows stay registered on it, pass on; destroy() here must not release them.
    next.reset(new CudaCommunicator(context, kept, std::move(symmetric_)));
    nccl_.reset();
  } else {
    // A new NCCL communicator: the new symmetric memory registers its windows on it (collective).
    next.reset(new CudaCommunicator(context, std::move(kept)));
  }
  replaced_by_shrink_ = true;
  destroyed_.store(true);
  GC_LOG(Debug, name_, " cuda communicator: replaced by one over the survivors (rank ",
         next->rank_in_group(), " of ", next->world_size(), ")");
  return next;
}

// -------------------------------------------------------------------------------------------------
// CudaCommunicator's uniform collectives. Each checks every argument before anything is enqueued,
// then issues one NCCL call (or one group) on the current stream of the device.

namespace {

// An undefined tensor to bind references to (no Tensor copies on the hot path).
const Tensor kNoTensor;

}  // namespace

Tensor CudaCommunicator::all_reduce(const Tensor& input) {
  const comm::OpLabel where = label("all_reduce");
  nccl(where.op);
  check_tensor(where, input, "input");
  return reduce_all(where, input, Tensor());
}

Tensor CudaCommunicator::all_reduce(const Tensor& input, const Tensor& out) {
  const comm::OpLabel where = label("all_reduce");
  nccl(where.op);
  check_tensor(where, input, "input");
  comm::check_output(where, out, input.shape(), input.dtype(), device_);
  return reduce_all(where, input, out);
}

Tensor CudaCommunicator::reduce_all(const comm::OpLabel& where, const Tensor& input,
                                    const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  const cuda::NcclSum sum = cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::CaptureStatusScope capture(stream, name_, " ", where.op);  // asked once per call
  if (auto routed = symmetric_all_reduce(where, input, out)) return *routed;
  Tensor compact;  // only for a strided input: no Tensor copy on the hot path
  const Tensor& in = input.is_contiguous() ? input : (compact = input.contiguous());
  const Tensor result = out.defined() ? out : Tensor::empty(in.shape(), in.dtype(), device_);
  if (in.numel() == 0) return result;
  const std::size_t count = static_cast<std::size_t>(in.numel());
  nc.enqueue(where.op, stream, [&](const cuda::NcclApi& api, ncclComm_t c) {
    return api.AllReduce(in.data_ptr(), result.data_ptr(), count, sum.type, sum.op, c, stream);
  });
  return result;
}

Tensor CudaCommunicator::all_gather(const Tensor& input, int dim) {
  const comm::OpLabel where = label("all_gather");
  nccl(where.op);
  check_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  cuda::DeviceGuard guard(device_);
  return gather_uniform(input, d);
}

Tensor CudaCommunicator::all_gather(const Tensor& input, int dim, const Tensor& out) {
  const comm::OpLabel where = label("all_gather");
  nccl(where.op);
  check_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  comm::check_output(where, out, comm::gathered_shape(input.shape(), d, world_size_), input.dtype(),
                     device_);
  cuda::DeviceGuard guard(device_);
  return gather_uniform(input, d, out);
}

Tensor CudaCommunicator::reduce_scatter(const Tensor& input, int dim) {
  const comm::OpLabel where = label("reduce_scatter");
  const int d = check_scatter(where, input, dim);
  cuda::DeviceGuard guard(device_);
  return scatter_uniform(where, input, d);
}

Tensor CudaCommunicator::reduce_scatter(const Tensor& input, int dim, const Tensor& out) {
  const comm::OpLabel where = label("reduce_scatter");
  const int d = check_scatter(where, input, dim);
  comm::check_output(where, out, comm::scattered_shape(input.shape(), d, world_size_),
                     input.dtype(), device_);
  cuda::DeviceGuard guard(device_);
  return scatter_uniform(where, input, d, out);
}

int CudaCommunicator::check_scatter(const comm::OpLabel& where, const Tensor& input, int dim) {
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  comm::check_divisible(where, input, d, dim, world_size_);
  return d;
}

std::optional<Tensor> CudaCommunicator::gather(const Tensor& input, int dst, int dim) {
  const comm::OpLabel where = label("gather");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, input, "input");
  comm::check_peer_rank(where, dst, "dst", rank_, world_size_, /*allow_self=*/true);
  const int d = comm::wrap_dim(where, dim, input.dim());
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const Tensor front = comm::move_dim_to_front(input, d);
  const cuda::NcclType type = cuda::nccl_move_type(front.dtype(), nc.nccl_version());
  const std::size_t count = static_cast<std::size_t>(front.numel()) * type.scale;
  const std::size_t chunk = front.nbytes();
  Tensor out;
  std::vector<cuda::NcclCall> calls;
  if (rank_ == dst) {
    Shape shape = front.shape();
    shape[0] *= world_size_;
    out = Tensor::empty(shape, front.dtype(), device_);
    char* base = static_cast<char*>(out.data_ptr());
    if (chunk > 0) {
      GC_CUDA_CHECK(cudaMemcpyAsync(base + rank_ * chunk, front.data_ptr(), chunk,
                                    cudaMemcpyDeviceToDevice, stream),
                    where, ": copying this rank's part");
    }
    for (int r = 0; r < world_size_; ++r) {
      if (r == dst) continue;
      void* slot = base + r * chunk;
      calls.push_back([=](const cuda::NcclApi& api, ncclComm_t c) {
        return api.Recv(slot, count, type.type, r, c, stream);
      });
    }
  } else {
    const void* data = front.data_ptr();
    calls.push_back([=](const cuda::NcclApi& api, ncclComm_t c) {
      return api.Send(data, count, type.type, dst, c, stream);
    });
  }
  if (count > 0 && !calls.empty()) nc.enqueue_group(where.op, stream, calls);
  if (rank_ != dst) return std::nullopt;
  return comm::move_dim_from_front(out, d);
}

Tensor CudaCommunicator::broadcast(const Tensor& tensor, int src) {
  const comm::OpLabel where = label("broadcast");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, src, "src", rank_, world_size_, /*allow_self=*/true);
  if (tensor.numel() == 0) return tensor;
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::NcclType type = cuda::nccl_move_type(tensor.dtype(), nc.nccl_version());
  const std::size_t count = static_cast<std::size_t>(tensor.numel()) * type.scale;
  // In place on a strided tensor: broadcast a compact copy, then write it back.
  const Tensor staging = tensor.contiguous();
  void* data = staging.data_ptr();
  nc.enqueue(where.op, stream, [&](const cuda::NcclApi& api, ncclComm_t c) {
    return api.Broadcast(data, data, count, type.type, src, c, stream);
  });
  if (!tensor.is_contiguous() && rank_ != src) {
    Tensor target = tensor;
    target.copy_from(staging);
  }
  return tensor;
}

Tensor CudaCommunicator::gather_uniform(const Tensor& input, int dim, const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::CaptureStatusScope capture(stream, name_, " all_gather");  // asked once per call
  Tensor moved;  // only when dim 0 is not already the front of a compact tensor
  const Tensor& front =
      dim == 0 && input.is_contiguous() ? input : (moved = comm::move_dim_to_front(input, dim));
  // Along dim 0 the gathered layout is the result's: NCCL writes straight into `out`.
  const Tensor& direct = dim == 0 ? out : kNoTensor;
  Tensor gathered;
  if (auto routed = symmetric_all_gather(front, direct)) {
    gathered = *routed;
  } else {
    gathered = direct.defined() ? direct
                                : Tensor::empty(comm::gathered_shape(front.shape(), 0, world_size_),
                                                front.dtype(), device_);
    if (front.numel() > 0) {
      const cuda::NcclType type = cuda::nccl_move_type(front.dtype(), nc.nccl_version());
      const std::size_t count = static_cast<std::size_t>(front.numel()) * type.scale;
      nc.enqueue("all_gather", stream, [&](const cuda::NcclApi& api, ncclComm_t c) {
        return api.AllGather(front.data_ptr(), gathered.data_ptr(), count, type.type, c, stream);
      });
    }
  }
  return finish_front(gathered, dim, out);
}

Tensor CudaCommunicator::scatter_uniform(const comm::OpLabel& where, const Tensor& input, int dim,
                                         const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::CaptureStatusScope capture(stream, name_, " ", where.op);  // asked once per call
  const cuda::NcclSum sum = cuda::nccl_sum_type(where, input.dtype(), nc.nccl_version());
  Tensor moved;
  const Tensor& front =
      dim == 0 && input.is_contiguous() ? input : (moved = comm::move_dim_to_front(input, dim));
  const Tensor& direct = dim == 0 ? out : kNoTensor;
  Tensor scattered;
  if (auto routed = symmetric_reduce_scatter(where, front, direct)) {
    scattered = *routed;
  } else {
    scattered = direct.defined()
                    ? direct
                    : Tensor::empty(comm::scattered_shape(front.shape(), 0, world_size_),
                                    front.dtype(), device_);
    if (scattered.numel() > 0) {
      const std::size_t count = static_cast<std::size_t>(scattered.numel());
      nc.enqueue(where.op, stream, [&](const cuda::NcclApi& api, ncclComm_t c) {
        return api.ReduceScatter(front.data_ptr(), scattered.data_ptr(), count, sum.type, sum.op, c,
                                 stream);
      });
    }
  }
  return finish_front(scattered, dim, out);
}

Tensor CudaCommunicator::finish_front(const Tensor& front, int dim, const Tensor& out) {
  if (out.defined() && front.data_ptr() == out.data_ptr()) return out;  // written in place
  if (dim == 0 && !out.defined()) return front;                         // already the layout
  const Tensor result = comm::move_dim_from_front(front, dim);
  return out.defined() ? comm::write_into(out, result) : result;
}

// -------------------------------------------------------------------------------------------------
// CudaCommunicator's v-variants: per-rank sizes along a dim. Uniform sizes take the plain
// ncclAllGather / ncclReduceScatter path (so they behave exactly like all_gather /
// reduce_scatter); other sizes run one ncclBroadcast (gather) or ncclReduce (scatter) per rank
// inside one ncclGroupStart/End, skipping ranks whose size is 0. The sizes are arguments every
// rank passes alike, so every rank issues the same calls.

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
  if (sizes) comm::check_own_size(where, *sizes, rank_, input, d, dim);
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
    comm::check_sizes_sum(where, *sizes, input, d, dim);
  }
  const bool uniform = !sizes || comm::sizes_are_uniform(*sizes);
  if (uniform) comm::check_divisible(where, input, d, dim, world_size_);
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

// -------------------------------------------------------------------------------------------------
// CudaCommunicator's symmetric-memory paths (docs/cuda.md, cuda/symmetric/symmetric_memory.h). Each
// one leases the scratch window, copies the input into its region (skipped when the input already
// lies in a window: a symmetric_empty tensor), runs NCCL from window to window so that NCCL may
// pick its symmetric kernels, and copies the result into a new tensor, all on the current stream.
// Every decision below depends only on values equal on every rank (world size, dtype, sizes, the
// agreed settings), never on local state, because NCCL chooses symmetric kernels per rank.

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
  cuda::SymmetricMemory& symmetric = *symmetric_;
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
  return tensor.is_contiguous() && symmetric_->in_pool(tensor.data_ptr(), tensor.nbytes());
}

std::optional<Tensor> CudaCommunicator::symmetric_all_gather(const Tensor& front,
                                                             const Tensor& out) {
  cuda::NcclComm& nc = *nccl_;
  if (!symmetric_->enabled() || front.numel() == 0) return std::nullopt;
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
  if (!symmetric_->enabled() || front.numel() == 0 ||
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
  cuda::SymmetricMemory& symmetric = *symmetric_;
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
  nccl("symmetric_memory_stats");  // throws once destroyed
  return symmetric_->stats();
}

Tensor CudaCommunicator::symmetric_empty(const Shape& shape, DType dtype) {
  nccl("symmetric_empty");  // throws once destroyed
  cuda::DeviceGuard guard(device_);
  const bool capturing =
      cuda::stream_is_capturing(current_cuda_stream(device_), name_, " symmetric_empty");
  return symmetric_->empty(shape, dtype, capturing);
}

void CudaCommunicator::reserve_symmetric_scratch(std::int64_t bytes) {
  const comm::OpLabel where = label("reserve_symmetric_scratch");
  nccl(where.op);  // throws once destroyed
  GC_CHECK(bytes >= 0, where, ": negative size ", bytes);
  cuda::DeviceGuard guard(device_);
  symmetric_->reserve_scratch(static_cast<std::size_t>(bytes));
}

// -------------------------------------------------------------------------------------------------
// CudaCommunicator's point-to-point transfers (not collective). They are enqueued on the current
// stream and return at once, as vLLM's pynccl send/recv; NCCL matches the transfers between two
// ranks in the order they were issued.

namespace {

// std::invalid_argument when `stream` is being captured: a Work's event could not be waited on.
void check_not_capturing(const comm::OpLabel& where, cudaStream_t stream) {
  GC_CHECK(!cuda::stream_is_capturing(stream, where), where,
           ": cannot be captured in a CUDA graph (its Work would wait for an event that only a "
           "replay records); use send/recv inside a capture");
}

// Records a new event on `stream` and wraps it in a Work for `op`.
std::shared_ptr<Work> make_work(const comm::OpLabel& where, std::shared_ptr<cuda::NcclComm> comm,
                                cudaStream_t stream, Tensor buffer) {
  cudaEvent_t event = nullptr;
  GC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), where);
  const cudaError_t recorded = cuda::record_event(event, stream);
  if (recorded != cudaSuccess) cudaEventDestroy(event);
  GC_CUDA_CHECK(recorded, where, ": recording the completion event");
  return std::make_shared<cuda::EventWork>(std::move(comm), where.op, event, std::move(buffer));
}

}  // namespace

void CudaCommunicator::send(const Tensor& tensor, std::optional<int> dst) {
  const comm::OpLabel where = label("send");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, tensor, "tensor");
  const int peer = dst.value_or((rank_ + 1) % world_size_);
  comm::check_peer_rank(where, peer, "dst", rank_, world_size_, /*allow_self=*/false);
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  const Tensor payload = tensor.contiguous();
  if (payload.numel() == 0) return;
  const cuda::NcclType type = cuda::nccl_move_type(payload.dtype(), nc.nccl_version());
  const std::size_t count = static_cast<std::size_t>(payload.numel()) * type.scale;
  nc.enqueue(
      where.op, stream,
      [&](const cuda::NcclApi& api, ncclComm_t c) {
        return api.Send(payload.data_ptr(), count, type.type, peer, c, stream);
      },
      payload);
}

Tensor CudaCommunicator::recv(const Shape& shape, DType dtype, std::optional<int> src) {
  const comm::OpLabel where = label("recv");
  cuda::NcclComm& nc = nccl(where.op);
  const int peer = src.value_or((rank_ + world_size_ - 1) % world_size_);
  comm::check_peer_rank(where, peer, "src", rank_, world_size_, /*allow_self=*/false);
  for (std::int64_t size : shape) {
    GC_CHECK(size >= 0, where, ": shape ", comm::sizes_str(shape), " has a negative size");
  }
  cuda::DeviceGuard guard(device_);
  const Tensor out = Tensor::empty(shape, dtype, device_);
  return receive_into(where, nc, out, peer);
}

Tensor CudaCommunicator::recv(const Tensor& out, std::optional<int> src) {
  const comm::OpLabel where = label("recv");
  cuda::NcclComm& nc = nccl(where.op);
  comm::check_output(where, out, out.shape(), out.dtype(), device_);
  const int peer = src.value_or((rank_ + world_size_ - 1) % world_size_);
  comm::check_peer_rank(where, peer, "src", rank_, world_size_, /*allow_self=*/false);
  cuda::DeviceGuard guard(device_);
  return receive_into(where, nc, out, peer);
}

Tensor CudaCommunicator::receive_into(const comm::OpLabel& where, cuda::NcclComm& nc,
                                      const Tensor& out, int peer) {
  if (out.numel() == 0) return out;
  cudaStream_t stream = current_cuda_stream(device_);
  const cuda::NcclType type = cuda::nccl_move_type(out.dtype(), nc.nccl_version());
  const std::size_t count = static_cast<std::size_t>(out.numel()) * type.scale;
  nc.enqueue(where.op, stream, [&](const cuda::NcclApi& api, ncclComm_t c) {
    return api.Recv(out.data_ptr(), count, type.type, peer, c, stream);
  });
  return out;
}

std::shared_ptr<Work> CudaCommunicator::isend(const Tensor& tensor, int dst) {
  const comm::OpLabel where = label("isend");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, dst, "dst", rank_, world_size_, /*allow_self=*/false);
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  check_not_capturing(where, stream);
  // A strided tensor goes out from a compact copy that only the Work and the watchdog hold.
  const Tensor payload = tensor.contiguous();
  if (payload.numel() > 0) {
    const cuda::NcclType type = cuda::nccl_move_type(payload.dtype(), nc.nccl_version());
    const std::size_t count = static_cast<std::size_t>(payload.numel()) * type.scale;
    nc.enqueue(
        where.op, stream,
        [&](const cuda::NcclApi& api, ncclComm_t c) {
          return api.Send(payload.data_ptr(), count, type.type, dst, c, stream);
        },
        payload);
  }
  return make_work(where, nccl_, stream, payload);
}

std::shared_ptr<Work> CudaCommunicator::irecv(const Tensor& tensor, int src) {
  const comm::OpLabel where = label("irecv");
  cuda::NcclComm& nc = nccl(where.op);
  check_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, src, "src", rank_, world_size_, /*allow_self=*/false);
  // The bytes land directly in the tensor, so it must be one compact run (torch requires it too).
  GC_CHECK(tensor.is_contiguous(), where, ": tensor must be contiguous, got strides ",
           comm::sizes_str(tensor.strides()), " for ", tensor.str());
  cuda::DeviceGuard guard(device_);
  cudaStream_t stream = current_cuda_stream(device_);
  check_not_capturing(where, stream);
  if (tensor.numel() > 0) {
    const cuda::NcclType type = cuda::nccl_move_type(tensor.dtype(), nc.nccl_version());
    const std::size_t count = static_cast<std::size_t>(tensor.numel()) * type.scale;
    nc.enqueue(
        where.op, stream,
        [&](const cuda::NcclApi& api, ncclComm_t c) {
          return api.Recv(tensor.data_ptr(), count, type.type, src, c, stream);
        },
        tensor);
  }
  return make_work(where, nccl_, stream, tensor);
}

// -------------------------------------------------------------------------------------------------
// CudaCommunicator's MoE dispatch/combine: the inputs unchanged without use_all2all, else the
// naive all-to-all of communicator/naive_all2all.h (the cpu communicator's too) on device
// tensors: token counts travel over the CPU group, the tensors through this communicator's
// all_gatherv / reduce_scatterv. is_sequence_parallel changes nothing here, for the reason given
// in naive_all2all.h.

DispatchRouterLogitsResult CudaCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  nccl("dispatch_router_logits");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, router_logits, extra_tensors};
  return comm::dispatch_router_logits_via(all2all_->as_gather(), hidden_states, router_logits,
                                          extra_tensors);
}

DispatchResult CudaCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                          const Tensor& topk_ids, bool is_sequence_parallel,
                                          const std::vector<Tensor>& extra_tensors) {
  nccl("dispatch");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return comm::dispatch_via(all2all_->as_gather(), hidden_states, topk_weights, topk_ids,
                            extra_tensors);
}

Tensor CudaCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  nccl("combine");  // throws after destroy()
  if (!use_all2all_) return hidden_states;
  return all2all_->combine(hidden_states);
}

}  // namespace groupcoord
