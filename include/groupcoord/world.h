// The process-wide world: the rendezvous result and the world process group, set up once per
// process (torch.distributed's default group). GroupCoordinators and parallel_state build every
// other group from it.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/process_group.h"
#include "groupcoord/rendezvous.h"
#include "groupcoord/store.h"

namespace groupcoord {

/// Arguments of init_world() (init_distributed_environment's, minus the backend).
struct WorldOptions {
  std::string init_method = "env://";
  int world_size = -1;  ///< -1: from the launcher
  int rank = -1;        ///< -1: from the launcher
  int local_rank = -1;  ///< -1: from the launcher, else the rank on a single node
  /// Deadline of the rendezvous and default timeout of every group created later.
  std::chrono::milliseconds timeout = default_timeout();
};

/// Collective over all world ranks: rendezvous, then the world Gloo group. Throws
/// std::invalid_argument when the world already exists (destroy_world() first).
void init_world(const WorldOptions& options, const EnvLookup& env = process_env());
/// True between init_world() and destroy_world().
bool world_is_initialized();
/// Who this process is (rank, world size, local rank, ...). Throws std::invalid_argument before
/// init_world().
/// A copy: a shrink renumbers the world (shrink_world).
RendezvousResult world_info();
/// The world group. Throws std::invalid_argument before init_world().
std::shared_ptr<ProcessGroup> world_group();
/// The world store. Throws std::invalid_argument before init_world().
std::shared_ptr<Store> world_store();
/// Default timeout of groups created in this world.
std::chrono::milliseconds world_timeout();
// ---- surviving a dead rank (docs/elastic.md) --------------------------------------------------

/// World ranks known dead, ascending: peers on this node whose process is gone (checked through
/// /proc), plus those any other rank found. Local and quick (no collective, no wait); call it
/// after a collective failed. A dead rank on another node is known only once a rank of its node
/// reported it. Throws std::invalid_argument before init_world().
std::vector<int> find_dead_ranks();

/// What one shrink of the world did.
struct WorldShrink {
  int epoch = 0;                 ///< 1 for the world's first shrink, 2 for the next, ...
  std::vector<int> excluded;     ///< world ranks removed, as numbered before this shrink
  std::vector<int> new_rank_of;  ///< old world rank -> new world rank, -1 for the excluded
};

/// Collective over the world ranks not in `excluded_world_ranks`: they agree through the store
/// that these ranks are gone (each survivor must pass the same set, within the world timeout),
/// connect a new world group over themselves and renumber: survivors keep their order, so world
/// rank r becomes r minus the number of excluded ranks below it (world_info() tells the new rank
/// and size). The old world group is retired. GroupCoordinator::shrink and shrink_model_parallel
/// call this first; call it directly only when no coordinator is built. Throws
/// std::invalid_argument for an empty, out-of-range or duplicated set, one holding this rank, or
/// one holding the rank that hosts the world store (the one death that cannot be survived);
/// TimeoutError / DistributedError when the survivors do not agree in time (nothing changed on
/// this rank then; a retry by every survivor may succeed); a failure after the survivors
/// reconnected leaves the world unusable (later shrinks refuse it: restart the job).
WorldShrink shrink_world(const std::vector<int>& excluded_world_ranks);

/// The shrinks of the current world, oldest first (empty until the first).
std::vector<WorldShrink> world_shrinks();

/// What a collective of a GroupCoordinator throws when a peer died.
enum class RankFailurePolicy {
  /// The error as it came (DistributedError or TimeoutError): the default.
  kPlain,
  /// When find_dead_ranks() names any rank after the failure, a RankFailureError (errors.h)
  /// carrying those ranks, with the original message, instead; otherwise the error as it came.
  kIdentify,
};

/// `error` as the policy wants it: under kIdentify, a DistributedError (a TimeoutError included)
/// after which find_dead_ranks() names any rank becomes a RankFailureError carrying them, its
/// message extended with what the survivors can do; anything else, and everything under kPlain,
/// is returned as it is. Every GroupCoordinator operation applies it to its errors; code that
/// calls a DeviceCommunicator or a ProcessGroup directly may apply it itself.
std::exception_ptr apply_rank_failure_policy(std::exception_ptr error);

/// Chooses the policy for this process (every rank should choose the same). Initially plain;
/// init_world() takes GROUPCOORD_RANK_FAILURE ("plain" or "identify") when it is set (another
/// value fails init_world with std::invalid_argument); a later call here wins over it.
void set_rank_failure_policy(RankFailurePolicy policy);
/// The policy in force.
RankFailurePolicy rank_failure_policy();

/// Destroys the world group and drops the store (idempotent; local, not collective — but rank 0
/// hosts the store, so call it after the last collective every rank takes part in).
void destroy_world();

}  // namespace groupcoord
