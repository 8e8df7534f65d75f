// The CUDA layer's process-wide entry points. Available only in builds with CUDA
// (GROUPCOORD_WITH_CUDA); none of the groupcoord/cuda/ headers include CUDA headers, so engines
// that do not use CUDA themselves need no CUDA toolkit to include them.
#pragma once

namespace groupcoord {

/// Number of CUDA devices this process can use; 0 when there is no driver or no device. Never
/// throws, so it can answer "are there GPUs?" on any machine.
int cuda_device_count() noexcept;

/// Version code of the NCCL library loaded at run time (22809 for 2.28.9), for gating features
/// on it. Loads NCCL on first use ($GROUPCOORD_NCCL_LIBRARY, else libnccl.so.2); throws
/// DistributedError when it cannot be loaded.
int nccl_runtime_version();

/// Makes CUDA tensors work: installs a CudaAsyncAllocator for DeviceType::CUDA unless an
/// allocator is installed already (an engine's own allocator installed first is kept), and
/// registers the CUDA copy kernels behind Tensor::contiguous/clone/copy_from. Idempotent and
/// thread-safe. The CUDA communicator's factory calls it; call it yourself to create CUDA tensors
/// before any communicator exists. Needs no GPU (nothing touches a device until a tensor does).
void init_cuda_layer();

}  // namespace groupcoord
