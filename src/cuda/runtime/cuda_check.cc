#include "cuda/runtime/cuda_check.h"

namespace groupcoord {
namespace cuda {

std::string cuda_error_text(cudaError_t error) {
  return std::string(cudaGetErrorName(error)) + " (" + cudaGetErrorString(error) + ")";
}

}  // namespace cuda
}  // namespace groupcoord
