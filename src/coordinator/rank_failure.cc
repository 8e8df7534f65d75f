#include "coordinator/rank_failure.h"

#include <algorithm>
#include <exception>
#include <string>
#include <vector>

#include "core/shape.h"
#include "groupcoord/errors.h"
#include "groupcoord/world.h"

namespace groupcoord {
namespace coordinator_detail {

namespace {

/// The dead world ranks, or none when they cannot be found out (no world, the store gone): the
/// original error then stands.
std::vector<int> dead_ranks_or_none() {
  try {
    return world_is_initialized() ? find_dead_ranks() : std::vector<int>{};
  } catch (const std::exception&) {
    return {};
  }
}

/// What survivors can do about `dead`.
std::string what_next(const std::vector<int>& dead) {
  const int host = world_info().store_host_rank;
  if (std::find(dead.begin(), dead.end(), host) != dead.end()) {
    return "world rank " + std::to_string(host) +
           " hosted the world store, whose loss cannot be survived: restart the job";
  }
  return "shrink_model_parallel(" + detail::ranks_str(dead) +
         ") on every survivor lets the job go on";
}

}  // namespace

void rethrow_under_failure_policy() {
  const std::exception_ptr error = std::current_exception();
  if (rank_failure_policy() == RankFailurePolicy::kPlain) std::rethrow_exception(error);
  try {
    std::rethrow_exception(error);
  } catch (const RankFailureError&) {
    throw;  // already identified (an inner coordinator call)
  } catch (const DistributedError& e) {
    const std::vector<int> dead = dead_ranks_or_none();
    if (dead.empty()) throw;
    throw RankFailureError(std::string(e.what()) + " [world ranks " + detail::ranks_str(dead) +
                               " are dead: " + what_next(dead) + "]",
                           dead);
  }
}

}  // namespace coordinator_detail
}  // namespace groupcoord
