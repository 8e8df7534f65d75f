// copy_cuda_tensor: the CUDA side of Tensor::copy_from (strided_copy.h).
#include <cuda_runtime_api.h>

#include "cuda/runtime/abort_registry.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "cuda/runtime/strided_copy.h"
#include "groupcoord/cuda/stream.h"

namespace groupcoord {
namespace cuda {

namespace {

// Host <-> device copy of `nbytes` between compact buffers on `device`'s current stream, complete
// on return (the host side may be pageable or pinned, and the caller may reuse it at once).
void copy_compact_and_wait(void* dst, const void* src, std::size_t nbytes, cudaMemcpyKind kind,
                           Device device) {
  cudaStream_t stream = current_cuda_stream(device);
  const std::uint64_t aborts = abort_generation();
  GC_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, nbytes, kind, stream), "Tensor::copy_from: copying ", nbytes,
      kind == cudaMemcpyHostToDevice ? " bytes from the host to " : " bytes to the host from ",
      device.str());
  GC_CUDA_CHECK(cudaStreamSynchronize(stream), "Tensor::copy_from: waiting for the copy on ",
                device.str());
  // The wait may have ended only because the watchdog aborted NCCL kernels queued before it.
  throw_if_aborted_since(aborts, "Tensor::copy_from on " + device.str());
}

void device_to_device(const Tensor& src, Tensor& dst) {
  GC_CHECK(src.device() == dst.device(), "Tensor::copy_from: copying ", src.str(), " into ",
           dst.str(), " is not supported (copies between two CUDA devices)");
  DeviceGuard guard(dst.device());
  enqueue_strided_copy(dst.data_ptr(), dst.strides(), src.data_ptr(), src.strides(), dst.shape(),
                       dst.element_size(), current_cuda_stream(dst.device()));
}

void host_to_device(const Tensor& src, Tensor& dst) {
  const Tensor host = src.contiguous();
  DeviceGuard guard(dst.device());
  if (dst.is_contiguous()) {
    copy_compact_and_wait(dst.data_ptr(), host.data_ptr(), dst.nbytes(), cudaMemcpyHostToDevice,
                          dst.device());
    return;
  }
  // Upload compact, then scatter into the strided destination on the device.
  Tensor staging = Tensor::empty(dst.shape(), dst.dtype(), dst.device());
  copy_compact_and_wait(staging.data_ptr(), host.data_ptr(), dst.nbytes(), cudaMemcpyHostToDevice,
                        dst.device());
  enqueue_strided_copy(dst.data_ptr(), dst.strides(), staging.data_ptr(), staging.strides(),
                       dst.shape(), dst.element_size(), current_cuda_stream(dst.device()));
  synchronize_current_cuda_stream(dst.device());
}

void device_to_host(const Tensor& src, Tensor& dst) {
  DeviceGuard guard(src.device());
  const Tensor compact = src.contiguous();  // a kernel on the device when strided
  if (dst.is_contiguous()) {
    copy_compact_and_wait(dst.data_ptr(), compact.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToHost,
                          src.device());
    return;
  }
  Tensor staging = Tensor::empty(dst.shape(), dst.dtype());
  copy_compact_and_wait(staging.data_ptr(), compact.data_ptr(), dst.nbytes(),
                        cudaMemcpyDeviceToHost, src.device());
  dst.copy_from(staging);  // host to host
}

}  // namespace

void copy_cuda_tensor(const Tensor& src, Tensor& dst) {
  if (dst.numel() == 0) return;
  if (src.device().is_cuda() && dst.device().is_cuda()) {
    device_to_device(src, dst);
  } else if (dst.device().is_cuda()) {
    host_to_device(src, dst);
  } else {
    device_to_host(src, dst);
  }
}

}  // namespace cuda
}  // namespace groupcoord
