// Host (CPU) tensors moved directly over a Gloo ProcessGroup: the broadcast of the gloo backend's
// device group, and the host tensors of the tensor-dict protocol, which vLLM sends over the CPU
// group whatever the backend.
#pragma once

#include <cstdint>
#include <memory>

#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"
#include "groupcoord/work.h"

namespace groupcoord {
namespace coordinator_detail {

/// Collective over `group`: copies `src`'s `tensor` into `tensor` on every other rank, in place.
/// A non-contiguous tensor goes through a contiguous staging copy.
void broadcast_host_tensor(ProcessGroup& group, const Tensor& tensor, int src);

/// Starts sending a host tensor (a contiguous copy when it is not contiguous) on `tag`; the Work
/// keeps the memory alive until the send completes.
std::shared_ptr<Work> isend_host_tensor(ProcessGroup& group, const Tensor& tensor, int dst,
                                        std::uint32_t tag);

/// Starts receiving into a contiguous host tensor on `tag`; the Work keeps it alive.
std::shared_ptr<Work> irecv_host_tensor(ProcessGroup& group, const Tensor& tensor, int src,
                                        std::uint32_t tag);

}  // namespace coordinator_detail
}  // namespace groupcoord
