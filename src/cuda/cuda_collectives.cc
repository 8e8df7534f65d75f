// CudaCommunicator's uniform collectives. Each checks every argument before anything is enqueued,
// then issues one NCCL call (or one group) on the current stream of the device.
#include <cuda_runtime_api.h>

#include "communicator/dim_layout.h"
#include "communicator/output_tensor.h"
#include "communicator/sizes.h"
#include "cuda/cuda_communicator.h"
#include "cuda/nccl/nccl_dtype.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {

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
  GC_CHECK(input.size(d) % world_size_ == 0, where, ": size ", input.size(d), " of dim ", dim,
           " is not divisible by the world size ", world_size_);
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

}  // namespace groupcoord
