#include "groupcoord/world.h"
#include "groupcoord/default_timeout.h"

#include <mutex>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {

namespace {

struct WorldState {
  std::mutex mutex;
  bool initialized = false;
  RendezvousResult info;
  std::shared_ptr<ProcessGroup> group;
  std::chrono::milliseconds timeout = default_timeout();
};

WorldState& state() {
  static WorldState world;
  return world;
}

void check_initialized(const WorldState& world, const char* what) {
  GC_CHECK(world.initialized, what,
           ": the distributed world is not initialized; call init_distributed_environment first");
}

}  // namespace

void init_world(const WorldOptions& options, const EnvLookup& env) {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  GC_CHECK(!world.initialized, "init_world: the distributed world is already initialized (rank ",
           world.info.rank, " of ", world.info.world_size, "); destroy it first");
  RendezvousOptions rdzv;
  rdzv.init_method = options.init_method;
  rdzv.world_size = options.world_size;
  rdzv.rank = options.rank;
  rdzv.local_rank = options.local_rank;
  rdzv.timeout = options.timeout;
  RendezvousResult info = rendezvous(rdzv, env);

  ProcessGroupOptions group_options;
  group_options.name = "world";
  group_options.timeout = options.timeout;
  group_options.single_node = info.single_node;
  world.group = ProcessGroup::create_world(info.store, info.rank, info.world_size, group_options);
  world.info = std::move(info);
  world.timeout = options.timeout;
  world.initialized = true;
}

bool world_is_initialized() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  return world.initialized;
}

const RendezvousResult& world_info() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  check_initialized(world, "world_info");
  return world.info;
}

std::shared_ptr<ProcessGroup> world_group() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  check_initialized(world, "world_group");
  return world.group;
}

std::shared_ptr<Store> world_store() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  check_initialized(world, "world_store");
  return world.info.store;
}

std::chrono::milliseconds world_timeout() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  return world.timeout;
}

void destroy_world() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  if (!world.initialized) return;
  try {
    world.group->destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, "destroy_world: destroying the world group failed: ", e.what());
  }
  world.group.reset();
  world.info = RendezvousResult{};
  world.initialized = false;
}

}  // namespace groupcoord
