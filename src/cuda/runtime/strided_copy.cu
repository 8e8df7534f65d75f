// The strided copy kernel. Each thread walks a grid-stride range of linear indices in the
// destination's row-major order and maps each to a source and a destination offset.
#include <algorithm>
#include <cstdint>

#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/strided_copy.h"

namespace groupcoord {
namespace cuda {

namespace {

// Sizes and strides of a merged layout, passed by value as a kernel argument.
struct CopyLayout {
  int ndim = 0;
  std::int64_t sizes[kMaxCopyDims];
  std::int64_t dst_strides[kMaxCopyDims];
  std::int64_t src_strides[kMaxCopyDims];
};

template <typename T>
__global__ void strided_copy_kernel(T* dst, const T* src, std::int64_t numel, CopyLayout layout) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numel;
       i += step) {
    std::int64_t rest = i;
    std::int64_t src_offset = 0;
    std::int64_t dst_offset = 0;
    for (int d = layout.ndim - 1; d >= 0; --d) {
      const std::int64_t index = rest % layout.sizes[d];
      rest /= layout.sizes[d];
      src_offset += index * layout.src_strides[d];
      dst_offset += index * layout.dst_strides[d];
    }
    dst[dst_offset] = src[src_offset];
  }
}

// Drops size-1 dims and merges dims that are back-to-back on both sides, outermost first.
CopyLayout merge_dims(const Shape& shape, const Shape& dst_strides, const Shape& src_strides) {
  CopyLayout layout;
  int n = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (n > 0 && layout.dst_strides[n - 1] == dst_strides[d] * shape[d] &&
        layout.src_strides[n - 1] == src_strides[d] * shape[d]) {
      layout.sizes[n - 1] *= shape[d];
      layout.dst_strides[n - 1] = dst_strides[d];
      layout.src_strides[n - 1] = src_strides[d];
      continue;
    }
    GC_CHECK(n < kMaxCopyDims, "CUDA strided copy: the layout of shape with ", shape.size(),
             " dims has more than ", kMaxCopyDims, " dims after merging");
    layout.sizes[n] = shape[d];
    layout.dst_strides[n] = dst_strides[d];
    layout.src_strides[n] = src_strides[d];
    ++n;
  }
  layout.ndim = n;
  return layout;
}

template <typename T>
void launch(void* dst, const void* src, std::int64_t numel, const CopyLayout& layout,
            cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr std::int64_t kMaxBlocks = 65536;
  const std::int64_t blocks = std::min<std::int64_t>((numel + kThreads - 1) / kThreads, kMaxBlocks);
  strided_copy_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      static_cast<T*>(dst), static_cast<const T*>(src), numel, layout);
}

}  // namespace

void enqueue_strided_copy(void* dst, const Shape& dst_strides, const void* src,
                          const Shape& src_strides, const Shape& shape, std::size_t element_size,
                          cudaStream_t stream) {
  std::int64_t numel = 1;
  for (std::int64_t size : shape) numel *= size;
  if (numel == 0) return;
  const CopyLayout layout = merge_dims(shape, dst_strides, src_strides);
  if (layout.ndim == 0 ||
      (layout.ndim == 1 && layout.dst_strides[0] == 1 && layout.src_strides[0] == 1)) {
    GC_CUDA_CHECK(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(numel) * element_size,
                                  cudaMemcpyDeviceToDevice, stream),
                  "CUDA strided copy");
    return;
  }
  switch (element_size) {
    case 1:
      launch<std::uint8_t>(dst, src, numel, layout, stream);
      break;
    case 2:
      launch<std::uint16_t>(dst, src, numel, layout, stream);
      break;
    case 4:
      launch<std::uint32_t>(dst, src, numel, layout, stream);
      break;
    case 8:
      launch<std::uint64_t>(dst, src, numel, layout, stream);
      break;
    default:
      GC_CHECK(false, "CUDA strided copy: unsupported element size ", element_size);
  }
  GC_CUDA_CHECK(cudaGetLastError(), "CUDA strided copy: launching the kernel");
}

}  // namespace cuda
}  // namespace groupcoord
