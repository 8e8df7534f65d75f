// Element-wise copies between two layouts of device memory (the CUDA counterpart of core's
// host copy_strided), and the copy function the CUDA layer registers for Tensor copies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace cuda {

/// Most dimensions a copy may have after merging (dims that are back-to-back on both sides merge,
/// size-1 dims drop out); more throws std::invalid_argument.
inline constexpr int kMaxCopyDims = 16;

/// Enqueues on `stream` a copy of a `shape`-shaped array from `src` (strides in elements) to
/// `dst`, both in memory of the stream's device. `element_size` is 1, 2, 4 or 8 bytes. A layout
/// that merges to one compact run becomes one cudaMemcpyAsync. Throws DistributedError when the
/// launch fails.
void enqueue_strided_copy(void* dst, const Shape& dst_strides, const void* src,
                          const Shape& src_strides, const Shape& shape, std::size_t element_size,
                          cudaStream_t stream);

/// DeviceCopyFn for DeviceType::CUDA (registered by init_cuda_layer): device to device on one
/// device (a kernel on the current stream, asynchronous), and host to device or device to host
/// (complete when it returns: the host side may be reused at once). Copies between two
/// different CUDA devices throw std::invalid_argument.
void copy_cuda_tensor(const Tensor& src, Tensor& dst);

}  // namespace cuda
}  // namespace groupcoord
