// The module-level state of parallel_state (vLLM's _WORLD, _TP, ... globals), shared by
// distributed_environment.cc and model_parallel.cc.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "groupcoord/group_coordinator.h"

namespace groupcoord {
namespace parallel_state_detail {

/// Every coordinator parallel_state owns. Guarded by `mutex`: initialisation and destruction hold
/// it for their whole (collective) run, the getters only to read a pointer. The coordinators
/// themselves are not guarded: as in vLLM, their collectives belong to one thread at a time.
struct ParallelState {
  std::mutex mutex;
  std::unique_ptr<GroupCoordinator> world;
  std::optional<int> node_count;
  std::unique_ptr<GroupCoordinator> tp, dcp, pcp, pp, dp, ep;
};

/// The process-wide state.
ParallelState& state();

/// destroy_model_parallel() with `state.mutex` already held.
void destroy_model_parallel_locked(ParallelState& state);

/// `*group` when it exists; std::invalid_argument "<what> is not initialized" otherwise.
GroupCoordinator& checked(const std::unique_ptr<GroupCoordinator>& group, const char* what);

}  // namespace parallel_state_detail
}  // namespace groupcoord
