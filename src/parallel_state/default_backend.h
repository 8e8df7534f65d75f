// The backend init_distributed_environment picks when the caller leaves it empty.
#pragma once

#include <string>

namespace groupcoord {
namespace parallel_state_detail {

/// True when this process can see CUDA devices. This layer holds no CUDA code, so for now a build
/// without CUDA support and a build with it both answer false ("no devices"); device detection
/// arrives with the CUDA layer.
bool cuda_devices_present();

/// `backend` itself when it is "gloo" or "nccl"; "" becomes "nccl" when CUDA devices are present,
/// else "gloo". std::invalid_argument naming `op` for any other name.
std::string resolve_backend(const std::string& backend, const char* op);

}  // namespace parallel_state_detail
}  // namespace groupcoord
