// The backend init_distributed_environment and initialize_model_parallel take: the coordinator's
// backend table decides (register_backend adds an engine's), so every layer resolves names alike.
#pragma once

#include <string>

namespace groupcoord {
namespace parallel_state_detail {

/// `backend` when the backend table has it and this build and machine can use it; "" becomes
/// default_backend(). std::invalid_argument naming `op` otherwise.
std::string resolve_backend(const std::string& backend, const char* op);

}  // namespace parallel_state_detail
}  // namespace groupcoord
