#include "coordinator/host_transfers.h"

#include <utility>

#include "coordinator/retained_work.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

std::shared_ptr<const void> keep(const Tensor& tensor) {
  return std::make_shared<const Tensor>(tensor);
}

}  // namespace

void broadcast_host_tensor(ProcessGroup& group, const Tensor& tensor, int src) {
  if (tensor.numel() == 0) return;  // every rank knows the shape: nothing to move anywhere
  const std::size_t count = static_cast<std::size_t>(tensor.numel());
  if (tensor.is_contiguous()) {
    group.broadcast(tensor.data_ptr(), count, tensor.dtype(), src);
    return;
  }
  Tensor staging = tensor.contiguous();  // on src, a copy of the data to send
  group.broadcast(staging.data_ptr(), count, tensor.dtype(), src);
  if (group.rank() != src) {
    Tensor target = tensor;  // shares the caller's memory
    target.copy_from(staging);
  }
}

std::shared_ptr<Work> isend_host_tensor(ProcessGroup& group, const Tensor& tensor, int dst,
                                        std::uint32_t tag) {
  Tensor data = tensor.contiguous();
  return retain(group.isend(data.data_ptr(), data.nbytes(), dst, tag), KeepAlive{keep(data)});
}

std::shared_ptr<Work> irecv_host_tensor(ProcessGroup& group, const Tensor& tensor, int src,
                                        std::uint32_t tag) {
  GC_ASSERT(tensor.is_contiguous(), "irecv_host_tensor: ", tensor.str(), " is not contiguous");
  return retain(group.irecv(tensor.data_ptr(), tensor.nbytes(), src, tag), KeepAlive{keep(tensor)});
}

}  // namespace coordinator_detail
}  // namespace groupcoord
