// Host-side helpers of the CUDA tests: element values of every DType, and moving tensors between
// host and device with the plain CUDA runtime, so that checks do not depend on the copy code
// under test.
//
// Uploads go through the device's current stream and are waited for: a plain cudaMemcpy from
// pageable memory may return before its DMA has landed, and it runs on the legacy default stream,
// which our non-blocking streams do not wait for; the work a test queues next could then read
// the old bytes (it did: the symmetric path's staging copy starts at once).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "element_values.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace testing {

/// Copies `bytes` from the host to `device_ptr` on `device`, complete on return and ordered before
/// anything queued afterwards on any stream.
void upload(void* device_ptr, const void* host, std::size_t bytes, Device device);
/// Sets `bytes` at `device_ptr` to `byte`, complete on return (as upload).
void fill_bytes(void* device_ptr, int byte, std::size_t bytes, Device device);

/// A compact CUDA tensor on `device` whose row-major element i holds value(i).
Tensor device_tensor(const Shape& shape, DType dtype, Device device,
                     const std::function<double(std::int64_t)>& value);
/// Shorthand for Float32.
Tensor device_floats(const Shape& shape, Device device,
                     const std::function<double(std::int64_t)>& value);

/// The elements of a contiguous CUDA tensor, row-major, decoded. Waits for the device's current
/// stream first (results of collectives are ready in stream order).
std::vector<double> host_values(const Tensor& tensor);

/// Number of CUDA devices (0 without a driver); tests skip when it is 0.
int visible_gpus();
/// Lets `local_ranks` processes of one node share fewer GPUs: NCCL accepts that only when each
/// process claims its own host (NCCL_HOSTID, here derived from `rank`) and uses sockets on the
/// loopback interface. Sets both when the node's ranks outnumber its GPUs, unless the launcher
/// did, and keeps NVLink multicast off. Must run before the process's first NCCL call.
void prepare_nccl_environment(int rank, int local_ranks);
/// The message GTEST_SKIP prints when no GPU is visible.
inline const char* kNoGpuMessage =
    "no CUDA device visible (cudaGetDeviceCount failed or returned 0): skipping the GPU test";

}  // namespace testing
}  // namespace groupcoord
