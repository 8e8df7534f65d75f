#include "parallel_state/default_backend.h"

#include "coordinator/coordinator_setup.h"

namespace groupcoord {
namespace parallel_state_detail {

std::string resolve_backend(const std::string& backend, const char* op) {
  return coordinator_detail::resolve_backend(backend, op).name;
}

}  // namespace parallel_state_detail
}  // namespace groupcoord
