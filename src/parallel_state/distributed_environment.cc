// init_distributed_environment / destroy_distributed_environment: the world (world.h) plus vLLM's
// "world" GroupCoordinator over every rank, and the node count.
#include <chrono>
#include <exception>
#include <string>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"
#include "parallel_state/default_backend.h"
#include "parallel_state/state.h"

namespace groupcoord {

namespace parallel_state_detail {

ParallelState& state() {
  static ParallelState instance;
  return instance;
}

GroupCoordinator& checked(const std::unique_ptr<GroupCoordinator>& group, const char* what) {
  GC_CHECK(group != nullptr, what, " is not initialized");
  return *group;
}

}  // namespace parallel_state_detail

namespace {

using parallel_state_detail::ParallelState;

// A second call is a no-op when it describes the existing world; explicit values that disagree
// are a mistake the caller should hear about (vLLM asserts on the world size).
void check_matches_existing_world(const ParallelState& state, int world_size, int rank,
                                  const std::string& backend) {
  const RendezvousResult info = world_info();
  GC_CHECK(world_size < 0 || world_size == info.world_size,
           "init_distributed_environment: the world is already initialized with world_size ",
           info.world_size, ", not ", world_size);
  GC_CHECK(rank < 0 || rank == info.rank,
           "init_distributed_environment: the world is already initialized with this process as "
           "rank ",
           info.rank, ", not ", rank);
  GC_CHECK(backend.empty() || state.world == nullptr || backend == state.world->backend(),
           "init_distributed_environment: the world group already uses backend '",
           state.world->backend(), "', not '", backend, "'");
}

// vLLM's init_world_group: one group over every rank, named "world", without a device
// communicator (the world only carries control traffic).
std::unique_ptr<GroupCoordinator> make_world_coordinator(int local_rank,
                                                         const std::string& backend) {
  std::vector<int> ranks(world_info().world_size);
  for (int r = 0; r < static_cast<int>(ranks.size()); ++r) ranks[r] = r;
  const int local = local_rank >= 0 ? local_rank : world_info().local_rank;
  return std::make_unique<GroupCoordinator>(std::vector<std::vector<int>>{ranks}, local, backend,
                                            /*use_device_communicator=*/false,
                                            /*use_message_queue_broadcaster=*/false, "world");
}

}  // namespace

void init_distributed_environment(int world_size, int rank,
                                  const std::string& distributed_init_method, int local_rank,
                                  const std::string& backend, std::chrono::milliseconds timeout) {
  const char* op = "init_distributed_environment";
  const std::string resolved = parallel_state_detail::resolve_backend(backend, op);
  GC_CHECK(timeout.count() > 0, op, ": timeout must be positive, got ", timeout.count(), " ms");
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);

  if (state.world != nullptr && !world_is_initialized()) {
    // Somebody called destroy_world() behind our back: the old coordinators are dead.
    parallel_state_detail::destroy_model_parallel_locked(state);
    state.world.reset();
    state.node_count.reset();
  }
  const bool created_world = !world_is_initialized();
  if (created_world) {
    WorldOptions options;
    options.init_method = distributed_init_method;
    options.world_size = world_size;
    options.rank = rank;
    options.local_rank = local_rank;
    options.timeout = timeout;
    init_world(options);
  } else {
    check_matches_existing_world(state, world_size, rank, backend.empty() ? "" : resolved);
    if (state.world != nullptr) return;  // vLLM: a second call with the same world is a no-op
  }

  try {
    auto world = make_world_coordinator(local_rank, resolved);
    state.node_count = get_node_count(*world->cpu_group());
    state.world = std::move(world);
  } catch (...) {
    // Leave no half-built world behind: a retry starts from scratch.
    if (created_world) destroy_world();
    throw;
  }
  GC_LOG(Debug, op, ": rank ", state.world->rank(), " of ", state.world->world_size(), ", backend ",
         resolved, ", ", *state.node_count, " node(s)");
}

GroupCoordinator& get_world_group() {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  return parallel_state_detail::checked(state.world, "world group");
}

int get_node_count() {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  GC_CHECK(state.node_count.has_value(),
           "get_node_count: the distributed environment is not initialized");
  return *state.node_count;
}

void destroy_distributed_environment() {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  // Model-parallel groups live inside the world: tear them down first rather than leave them
  // pointing at a dead transport.
  parallel_state_detail::destroy_model_parallel_locked(state);
  if (state.world != nullptr) {
    try {
      state.world->destroy();
    } catch (const std::exception& e) {
      GC_LOG(Warn,
             "destroy_distributed_environment: destroying the world group failed: ", e.what());
    }
  }
  state.world.reset();
  state.node_count.reset();
  destroy_world();
}

}  // namespace groupcoord
