// CpuCommunicator (cpu_communicator.h): construction and lifetime, then the collectives,
// point-to-point transfers and MoE dispatch/combine, all over the group's ProcessGroup.
#include "communicator/cpu_communicator.h"

#include <algorithm>
#include <utility>

#include "communicator/dim_layout.h"
#include "communicator/dispatch_inputs.h"
#include "communicator/op_checks.h"
#include "communicator/output_tensor.h"
#include "communicator/sizes.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

// destroy() waits this long at most for in-flight transfers (as ProcessGroup::destroy does).
constexpr std::chrono::milliseconds kDrainLimit{10000};

// The group to run on: the device group when the backend is Gloo, else the CPU group.
std::shared_ptr<ProcessGroup> pick_group(const DeviceCommunicatorContext& context) {
  return context.device_group ? context.device_group : context.cpu_group;
}

std::string pick_name(const DeviceCommunicatorContext& context) {
  if (!context.unique_name.empty()) return context.unique_name;
  std::shared_ptr<ProcessGroup> group = pick_group(context);
  return group ? group->name() : std::string("cpu");
}

}  // namespace

std::unique_ptr<DeviceCommunicator> make_cpu_communicator(
    const DeviceCommunicatorContext& context) {
  return std::make_unique<CpuCommunicator>(context);
}

CpuCommunicator::CpuCommunicator(const DeviceCommunicatorContext& context)
    : name_(pick_name(context)), group_(pick_group(context)), use_all2all_(context.use_all2all) {
  GC_CHECK(group_ != nullptr, name_,
           " cpu communicator: the context has neither a device_group nor a cpu_group");
  GC_CHECK(context.device.is_cpu(), name_, " cpu communicator: device ", context.device.str(),
           " is not the CPU");
  // Token counts travel over cpu_group and tensors over device_group, indexed by rank: the two
  // must list the same processes in the same order.
  GC_CHECK(!context.cpu_group || context.cpu_group->world_ranks() == group_->world_ranks(), name_,
           " cpu communicator: cpu_group '", context.cpu_group ? context.cpu_group->name() : "",
           "' and device_group '", group_->name(),
           "' do not have the same ranks in the same order");
  rank_ = group_->rank();
  world_size_ = group_->size();
  if (use_all2all_) {
    // Token counts are metadata: they go over the CPU group, as in vLLM.
    std::shared_ptr<ProcessGroup> counts = context.cpu_group ? context.cpu_group : group_;
    all2all_ = std::make_unique<comm::NaiveAll2All>(*this, Device::cpu(), std::move(counts), name_);
  }
}

CpuCommunicator::~CpuCommunicator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, " cpu communicator: destroy failed: ", e.what());
  }
}

ProcessGroup& CpuCommunicator::group(const char* op) const {
  if (destroyed_.load()) {
    GC_THROW(DistributedError, name_, " ", op, ": the cpu communicator was destroyed");
  }
  return *group_;
}

void CpuCommunicator::destroy() {
  if (destroyed_.exchange(true)) return;
  in_flight_.drain(std::min(group_->timeout(), kDrainLimit), name_);
}

// -------------------------------------------------------------------------------------------------
// CpuCommunicator's collectives. Each validates every argument before the first byte is sent
// (see the collective rule in cpu_communicator.h), then runs one ProcessGroup collective.

namespace {

// Every rank's length along dim `d` of `input` (`dim` as the caller gave it): equal shares, so
// the size must divide by the world size.
std::vector<std::int64_t> equal_shares(const comm::OpLabel& where, const Tensor& input, int d,
                                       int dim, int world_size) {
  comm::check_divisible(where, input, d, dim, world_size);
  return std::vector<std::int64_t>(static_cast<std::size_t>(world_size),
                                   input.size(d) / world_size);
}

/// Whether [a, a + a_bytes) and [b, b + b_bytes) share a byte.
bool overlap(const void* a, std::size_t a_bytes, const void* b, std::size_t b_bytes) {
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  return a_bytes > 0 && b_bytes > 0 && x < y + b_bytes && y < x + a_bytes;
}

// Name of inputs[i] in error messages.
std::string input_name(std::size_t i, std::size_t count) {
  return count == 1 ? std::string("input") : "inputs[" + std::to_string(i) + "]";
}

}  // namespace

Tensor CpuCommunicator::all_reduce(const Tensor& input) {
  const comm::OpLabel where = label("all_reduce");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  const Tensor in = input.contiguous();
  Tensor out = Tensor::empty(in.shape(), in.dtype());
  g.all_reduce(in.data_ptr(), out.data_ptr(), static_cast<std::size_t>(in.numel()), in.dtype(),
               ReduceOp::Sum);
  return out;
}

Tensor CpuCommunicator::all_reduce(const Tensor& input, const Tensor& out) {
  const comm::OpLabel where = label("all_reduce");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  comm::check_output(where, out, input.shape(), input.dtype(), Device::cpu());
  const Tensor in = input.contiguous();
  g.all_reduce(in.data_ptr(), out.data_ptr(), static_cast<std::size_t>(in.numel()), in.dtype(),
               ReduceOp::Sum);
  return out;
}

Tensor CpuCommunicator::all_gather(const Tensor& input, int dim, const Tensor& out) {
  const comm::OpLabel where = label("all_gather");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  comm::check_output(where, out, comm::gathered_shape(input.shape(), d, world_size_), input.dtype(),
                     Device::cpu());
  return gather_uniform(g, input, d, out);
}

Tensor CpuCommunicator::reduce_scatter(const Tensor& input, int dim, const Tensor& out) {
  const comm::OpLabel where = label("reduce_scatter");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  const std::vector<std::int64_t> lengths = equal_shares(where, input, d, dim, world_size_);
  comm::check_output(where, out, comm::scattered_shape(input.shape(), d, world_size_),
                     input.dtype(), Device::cpu());
  return sum_and_slice(g, input, d, lengths, out);
}

Tensor CpuCommunicator::all_gather(const Tensor& input, int dim) {
  const comm::OpLabel where = label("all_gather");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  return gather_uniform(g, input, comm::wrap_dim(where, dim, input.dim()));
}

int CpuCommunicator::check_gatherv_input(
    const comm::OpLabel& where, const Tensor& input, std::size_t index, std::size_t count, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) const {
  // The name is built only for the message: valid inputs cost no string.
  if (!input.defined() || !input.device().is_cpu()) {
    comm::check_cpu_tensor(where, input, input_name(index, count).c_str());
  }
  const int d = comm::wrap_dim(where, dim, input.dim());
  if (sizes) comm::check_own_size(where, *sizes, rank_, input, d, dim);
  return d;
}

Tensor CpuCommunicator::all_gatherv(const Tensor& input, int dim,
                                    const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("all_gatherv");
  ProcessGroup& g = group(where.op);
  if (sizes) comm::check_sizes_shape(where, *sizes, world_size_);
  const int d = check_gatherv_input(where, input, 0, 1, dim, sizes);
  return !sizes || comm::sizes_are_uniform(*sizes) ? gather_uniform(g, input, d)
                                                   : gather_varying(g, input, d, *sizes);
}

std::vector<Tensor> CpuCommunicator::all_gatherv(
    const std::vector<Tensor>& inputs, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("all_gatherv");
  ProcessGroup& g = group(where.op);
  if (sizes) comm::check_sizes_shape(where, *sizes, world_size_);
  std::vector<int> dims;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    dims.push_back(check_gatherv_input(where, inputs[i], i, inputs.size(), dim, sizes));
  }
  // Uniform sizes are the plain all_gather, whatever way they were spelled.
  const bool uniform = !sizes || comm::sizes_are_uniform(*sizes);
  std::vector<Tensor> outputs;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    outputs.push_back(uniform ? gather_uniform(g, inputs[i], dims[i])
                              : gather_varying(g, inputs[i], dims[i], *sizes));
  }
  return outputs;
}

Tensor CpuCommunicator::reduce_scatter(const Tensor& input, int dim) {
  const comm::OpLabel where = label("reduce_scatter");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  return sum_and_slice(g, input, d, equal_shares(where, input, d, dim, world_size_));
}

Tensor CpuCommunicator::reduce_scatterv(const Tensor& input, int dim,
                                        const std::optional<std::vector<std::int64_t>>& sizes) {
  const comm::OpLabel where = label("reduce_scatterv");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  const int d = comm::wrap_dim(where, dim, input.dim());
  if (sizes) {
    comm::check_sizes_shape(where, *sizes, world_size_);
    comm::check_sizes_sum(where, *sizes, input, d, dim);
  }
  if (!sizes) {
    return sum_and_slice(g, input, d, equal_shares(where, input, d, dim, world_size_));
  }
  return sum_and_slice(g, input, d, *sizes);
}

std::optional<Tensor> CpuCommunicator::gather(const Tensor& input, int dst, int dim) {
  const comm::OpLabel where = label("gather");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, input, "input");
  comm::check_peer_rank(where, dst, "dst", rank_, world_size_, /*allow_self=*/true);
  const int d = comm::wrap_dim(where, dim, input.dim());
  const Tensor front = comm::move_dim_to_front(input, d);
  Tensor out;
  if (rank_ == dst) {
    Shape shape = front.shape();
    shape[0] *= world_size_;
    out = Tensor::empty(shape, front.dtype());
  }
  g.gather(front.data_ptr(), rank_ == dst ? out.data_ptr() : nullptr,
           static_cast<std::size_t>(front.numel()), front.dtype(), dst);
  if (rank_ != dst) return std::nullopt;
  return comm::move_dim_from_front(out, d);
}

Tensor CpuCommunicator::broadcast(const Tensor& tensor, int src) {
  const comm::OpLabel where = label("broadcast");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, src, "src", rank_, world_size_, /*allow_self=*/true);
  const std::size_t count = static_cast<std::size_t>(tensor.numel());
  if (tensor.is_contiguous()) {
    g.broadcast(tensor.data_ptr(), count, tensor.dtype(), src);
    return tensor;
  }
  // In place on a strided tensor: broadcast a compact copy, then write it back.
  Tensor staging = tensor.contiguous();
  g.broadcast(staging.data_ptr(), count, tensor.dtype(), src);
  if (rank_ != src) {
    Tensor target = tensor;
    target.copy_from(staging);
  }
  return tensor;
}

Tensor CpuCommunicator::gather_uniform(ProcessGroup& g, const Tensor& input, int dim,
                                       const Tensor& out) {
  const Tensor front = comm::move_dim_to_front(input, dim);
  // Along dim 0 the gathered layout is the result's: gather straight into `out`.
  const bool direct = out.defined() && dim == 0;
  Tensor gathered =
      direct ? out
             : Tensor::empty(comm::gathered_shape(front.shape(), 0, world_size_), front.dtype());
  g.all_gather(front.data_ptr(), gathered.data_ptr(), static_cast<std::size_t>(front.numel()),
               front.dtype());
  if (direct) return out;
  const Tensor result = comm::move_dim_from_front(gathered, dim);
  return out.defined() ? comm::write_into(out, result) : result;
}

Tensor CpuCommunicator::gather_varying(ProcessGroup& g, const Tensor& input, int dim,
                                       const std::vector<std::int64_t>& sizes) {
  const Tensor front = comm::move_dim_to_front(input, dim);
  const std::int64_t per_row = comm::elements_per_index(front.shape(), 0);
  std::vector<std::size_t> counts;
  std::int64_t rows = 0;
  for (std::int64_t size : sizes) {
    counts.push_back(static_cast<std::size_t>(size * per_row));
    rows += size;
  }
  Shape shape = front.shape();
  shape[0] = rows;
  Tensor out = Tensor::empty(shape, front.dtype());
  g.all_gatherv(front.data_ptr(), out.data_ptr(), counts, front.dtype());
  return comm::move_dim_from_front(out, dim);
}

Tensor CpuCommunicator::sum_and_slice(ProcessGroup& g, const Tensor& input, int dim,
                                      const std::vector<std::int64_t>& lengths, const Tensor& out) {
  const Tensor in = input.contiguous();
  const std::int64_t offset = comm::offset_of_rank(lengths, rank_);
  if (dim != 0) {
    // The sum is element-wise, so it runs on the input's own layout; only the slice needs the
    // dim, and narrow() takes it directly (no movedim, hence no wrong-axis bug for dims >= 2).
    Tensor full = Tensor::empty(in.shape(), in.dtype());
    g.all_reduce(in.data_ptr(), full.data_ptr(), static_cast<std::size_t>(in.numel()), in.dtype(),
                 ReduceOp::Sum);
    const Tensor slice = full.narrow(dim, offset, lengths[rank_]);
    return out.defined() ? comm::write_into(out, slice) : slice.clone();
  }
  // Along dim 0 every rank's slice is a contiguous run of the compact input.
  std::int64_t row = 1;
  for (int i = 1; i < in.dim(); ++i) row *= in.size(i);
  std::vector<std::size_t> counts(lengths.size());
  for (std::size_t r = 0; r < lengths.size(); ++r) {
    counts[r] = static_cast<std::size_t>(lengths[r] * row);
  }
  Shape shape = in.shape();
  shape[0] = lengths[rank_];
  const std::size_t out_bytes = counts[rank_] * in.element_size();
  // The result goes straight into `out` unless that is strided or overlaps the input.
  const bool direct = out.defined() && out.is_contiguous() &&
                      !overlap(out.data_ptr(), out_bytes, in.data_ptr(), in.nbytes());
  const Tensor result = direct ? out : Tensor::empty(shape, in.dtype());
  g.reduce_scatter(in.data_ptr(), result.data_ptr(), counts, in.dtype(), ReduceOp::Sum);
  return out.defined() ? comm::write_into(out, result) : result;
}

// -------------------------------------------------------------------------------------------------
// CpuCommunicator's point-to-point transfers (any thread; not collective). Every tensor travels
// on kTensorTag; the ProcessGroup matches transfers of one (peer, tag) in posting order.

void CpuCommunicator::send(const Tensor& tensor, std::optional<int> dst) {
  const comm::OpLabel where = label("send");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, tensor, "tensor");
  const int peer = dst.value_or((rank_ + 1) % world_size_);
  comm::check_peer_rank(where, peer, "dst", rank_, world_size_, /*allow_self=*/false);
  const Tensor payload = tensor.contiguous();
  g.send(payload.data_ptr(), payload.nbytes(), peer, kTensorTag);
}

Tensor CpuCommunicator::recv(const Shape& shape, DType dtype, std::optional<int> src) {
  const comm::OpLabel where = label("recv");
  ProcessGroup& g = group(where.op);
  const int peer = src.value_or((rank_ + world_size_ - 1) % world_size_);
  comm::check_peer_rank(where, peer, "src", rank_, world_size_, /*allow_self=*/false);
  for (std::int64_t size : shape) {
    GC_CHECK(size >= 0, where, ": shape ", comm::sizes_str(shape), " has a negative size");
  }
  Tensor out = Tensor::empty(shape, dtype);
  g.recv(out.data_ptr(), out.nbytes(), peer, kTensorTag);
  return out;
}

Tensor CpuCommunicator::recv(const Tensor& out, std::optional<int> src) {
  const comm::OpLabel where = label("recv");
  ProcessGroup& g = group(where.op);
  comm::check_output(where, out, out.shape(), out.dtype(), Device::cpu());
  const int peer = src.value_or((rank_ + world_size_ - 1) % world_size_);
  comm::check_peer_rank(where, peer, "src", rank_, world_size_, /*allow_self=*/false);
  g.recv(out.data_ptr(), out.nbytes(), peer, kTensorTag);
  return out;
}

std::shared_ptr<Work> CpuCommunicator::isend(const Tensor& tensor, int dst) {
  const comm::OpLabel where = label("isend");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, dst, "dst", rank_, world_size_, /*allow_self=*/false);
  // A strided tensor goes out from a compact copy that only the Work and in_flight_ hold.
  const Tensor payload = tensor.contiguous();
  std::shared_ptr<Work> work = g.isend(payload.data_ptr(), payload.nbytes(), dst, kTensorTag);
  in_flight_.add(work, payload);
  return std::make_shared<comm::TensorWork>(std::move(work), payload);
}

std::shared_ptr<Work> CpuCommunicator::irecv(const Tensor& tensor, int src) {
  const comm::OpLabel where = label("irecv");
  ProcessGroup& g = group(where.op);
  comm::check_cpu_tensor(where, tensor, "tensor");
  comm::check_peer_rank(where, src, "src", rank_, world_size_, /*allow_self=*/false);
  // The bytes land directly in the tensor, so it must be one compact run (torch requires it too).
  GC_CHECK(tensor.is_contiguous(), where, ": tensor must be contiguous, got strides ",
           comm::sizes_str(tensor.strides()), " for ", tensor.str());
  std::shared_ptr<Work> work = g.irecv(tensor.data_ptr(), tensor.nbytes(), src, kTensorTag);
  in_flight_.add(work, tensor);
  return std::make_shared<comm::TensorWork>(std::move(work), tensor);
}

// -------------------------------------------------------------------------------------------------
// CpuCommunicator's MoE dispatch/combine: the inputs unchanged without use_all2all (vLLM without
// an all2all manager), else the naive manager of naive_all2all.h. is_sequence_parallel is
// accepted and changes nothing here (see naive_all2all.h for why).

DispatchRouterLogitsResult CpuCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  group("dispatch_router_logits");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, router_logits, extra_tensors};
  return comm::dispatch_router_logits_via(all2all_->as_gather(), hidden_states, router_logits,
                                          extra_tensors);
}

DispatchResult CpuCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                         const Tensor& topk_ids, bool is_sequence_parallel,
                                         const std::vector<Tensor>& extra_tensors) {
  group("dispatch");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return comm::dispatch_via(all2all_->as_gather(), hidden_states, topk_weights, topk_ids,
                            extra_tensors);
}

Tensor CpuCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  group("combine");  // throws after destroy()
  if (!use_all2all_) return hidden_states;
  return all2all_->combine(hidden_states);
}

}  // namespace groupcoord
