// The check macro for CUDA runtime calls (docs/architecture.md; NCCL's is GC_NCCL_CHECK in
// cuda/nccl/nccl_api.h). It throws DistributedError with file:line, the failed call, the error's
// name and text, and the caller's message parts:
//
//   GC_CUDA_CHECK(cudaMallocAsync(&p, n, s), name_, " all_gather: allocating ", n, " bytes");
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "groupcoord/check.h"

namespace groupcoord {
namespace cuda {

/// "cudaErrorMemoryAllocation (out of memory)".
std::string cuda_error_text(cudaError_t error);

}  // namespace cuda
}  // namespace groupcoord

/// Throws DistributedError when the CUDA runtime call `expr` does not return cudaSuccess.
#define GC_CUDA_CHECK(expr, ...)                                                           \
  do {                                                                                     \
    const cudaError_t gc_cuda_status_ = (expr);                                            \
    if (gc_cuda_status_ != cudaSuccess) {                                                  \
      (void)cudaGetLastError(); /* clear it, so later launch checks do not see it again */ \
      ::groupcoord::detail::throw_error<::groupcoord::DistributedError>(                   \
          __FILE__, __LINE__, nullptr, __VA_ARGS__, ": ", #expr,                           \
          " failed: ", ::groupcoord::cuda::cuda_error_text(gc_cuda_status_));              \
    }                                                                                      \
  } while (0)
