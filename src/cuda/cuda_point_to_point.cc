// CudaCommunicator's point-to-point transfers (not collective). They are enqueued on the current
// stream and return at once, as vLLM's pynccl send/recv; NCCL matches the transfers between two
// ranks in the order they were issued.
#include <cuda_runtime_api.h>

#include "communicator/output_tensor.h"
#include "communicator/sizes.h"
#include "cuda/cuda_communicator.h"
#include "cuda/event_work.h"
#include "cuda/nccl/nccl_dtype.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/driver_calls.h"
#include "groupcoord/check.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {

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

}  // namespace groupcoord
