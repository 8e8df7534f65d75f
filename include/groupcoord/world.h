// The process-wide world: the rendezvous result and the world process group, set up once per
// process (torch.distributed's default group). GroupCoordinators and parallel_state build every
// other group from it.
#pragma once

#include <chrono>
#include <memory>
#include <string>

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
const RendezvousResult& world_info();
/// The world group. Throws std::invalid_argument before init_world().
std::shared_ptr<ProcessGroup> world_group();
/// The world store. Throws std::invalid_argument before init_world().
std::shared_ptr<Store> world_store();
/// Default timeout of groups created in this world.
std::chrono::milliseconds world_timeout();
/// Destroys the world group and drops the store (idempotent; local, not collective — but rank 0
/// hosts the store, so call it after the last collective every rank takes part in).
void destroy_world();

}  // namespace groupcoord
