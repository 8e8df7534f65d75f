// CpuCommunicator's point-to-point transfers (any thread; not collective). Every tensor travels
// on kTensorTag; the ProcessGroup matches transfers of one (peer, tag) in posting order.
#include "communicator/cpu_communicator.h"
#include "communicator/output_tensor.h"
#include "communicator/sizes.h"
#include "groupcoord/check.h"

namespace groupcoord {

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

}  // namespace groupcoord
