// Ordering two CUDA streams without waiting on the host: an event recorded on the producer's
// stream and waited for by the consumer's (cudaEventRecord + cudaStreamWaitEvent), as torch's
// and cupy's own __dlpack__ do. Used wherever an array crosses streams: a result handed to a
// consumer on another stream (groupcoord.Tensor.__dlpack__), an input of the caller's current
// stream used by a call on an explicit `stream=`.
#pragma once

#include <cstdint>

#include "groupcoord/device.h"

namespace groupcoord {
namespace python {

/// The legacy default stream as DLPack and CUDA's cudaStreamLegacy name it.
constexpr std::uintptr_t kLegacyDefaultStream = 1;

/// `handle` with CUDA's two spellings of the legacy default stream made one: 0 (the NULL stream,
/// what torch.cuda.current_stream().cuda_stream reports for its default stream) becomes 1.
inline std::uintptr_t canonical_stream(std::uintptr_t handle) {
  return handle == 0 ? kLegacyDefaultStream : handle;
}

/// Makes work enqueued later on `consumer` wait for the work enqueued so far on `producer`
/// (streams of `device`; raw handles, 0/1 the legacy default stream, 2 the per-thread default
/// stream). Nothing when they are the same stream; never blocks the host. Thread-safe. Throws
/// DistributedError when CUDA fails, std::invalid_argument in builds without CUDA.
void order_streams(Device device, std::uintptr_t producer, std::uintptr_t consumer);

}  // namespace python
}  // namespace groupcoord
