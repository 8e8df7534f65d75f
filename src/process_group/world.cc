#include "groupcoord/world.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/default_timeout.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "process_group/rank_liveness.h"
#include "process_group/shrink_agreement.h"

namespace groupcoord {

namespace {

struct WorldState {
  std::mutex mutex;
  bool initialized = false;
  RendezvousResult info;
  std::shared_ptr<ProcessGroup> group;
  std::chrono::milliseconds timeout = default_timeout();
  /// This world's liveness records (renewed with each shrink, whose ranks are renumbered).
  std::shared_ptr<RankLiveness> liveness;
  /// Why a shrink left the world unusable (it failed after the old world group was retired).
  std::string failed_shrink;
  std::vector<WorldShrink> shrinks;
  int shrink_attempts = 0;  ///< shrink_world() calls on the current world group (agreement keys)
};

WorldState& state() {
  static WorldState world;
  return world;
}

void check_initialized(const WorldState& world, const char* what) {
  GC_CHECK(world.initialized, what,
           ": the distributed world is not initialized; call init_distributed_environment first");
}

/// The failure policy: plain until init_world() reads GROUPCOORD_RANK_FAILURE or
/// set_rank_failure_policy() is called.
std::atomic<int>& failure_policy() {
  static std::atomic<int> policy{static_cast<int>(RankFailurePolicy::kPlain)};
  return policy;
}

/// GROUPCOORD_RANK_FAILURE, checked (std::invalid_argument naming it for another value).
std::optional<RankFailurePolicy> policy_from_environment() {
  const char* text = std::getenv("GROUPCOORD_RANK_FAILURE");
  if (text == nullptr || *text == '\0') return std::nullopt;
  if (std::strcmp(text, "plain") == 0) return RankFailurePolicy::kPlain;
  GC_CHECK(std::strcmp(text, "identify") == 0, "GROUPCOORD_RANK_FAILURE='", text,
           "': use plain (errors as they come) or identify (RankFailureError naming the dead "
           "ranks)");
  return RankFailurePolicy::kIdentify;
}

/// Checks a shrink's excluded set against the world; returns it sorted.
std::vector<int> checked_exclusion(const WorldState& world, std::vector<int> excluded) {
  const RendezvousResult& info = world.info;
  GC_CHECK(!excluded.empty(), "shrink_world: no rank to exclude");
  std::sort(excluded.begin(), excluded.end());
  for (std::size_t i = 0; i < excluded.size(); ++i) {
    const int r = excluded[i];
    GC_CHECK(r >= 0 && r < info.world_size, "shrink_world: world rank ", r, " out of range [0, ",
             info.world_size, ")");
    GC_CHECK(i == 0 || excluded[i - 1] != r, "shrink_world: world rank ", r, " listed twice");
    GC_CHECK(r != info.rank, "shrink_world: this rank (", r,
             ") is in the excluded set; only survivors shrink (a rank that leaves calls "
             "destroy_world / destroy_distributed_environment)");
    GC_CHECK(r != info.store_host_rank, "shrink_world: world rank ", r, " hosts the world store (",
             info.description,
             "); every survivor needs the store, so its death cannot be survived: restart the job");
  }
  return excluded;
}

/// The dead world ranks, or none when they cannot be found out (no world): the original error
/// then stands. The lookup runs outside the world's lock (it may reach the store).
std::vector<int> dead_ranks_or_none() {
  std::shared_ptr<RankLiveness> liveness;
  {
    WorldState& world = state();
    std::lock_guard<std::mutex> lock(world.mutex);
    if (!world.initialized) return {};
    liveness = world.liveness;
  }
  try {
    return liveness->dead_ranks();
  } catch (const std::exception&) {
    return {};
  }
}

/// dead_ranks_or_none after a connection error: a killed process closes its sockets before it
/// is gone from /proc (a GPU process tears its context down first), so the lookup is repeated
/// for a short while. A timeout needs no such grace: the deadline has long passed.
std::vector<int> dead_ranks_after(bool timed_out) {
  constexpr auto kGrace = std::chrono::seconds(2);
  const auto until = std::chrono::steady_clock::now() + kGrace;
  for (;;) {
    std::vector<int> dead = dead_ranks_or_none();
    if (!dead.empty() || timed_out || std::chrono::steady_clock::now() >= until) return dead;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// What the survivors of `dead` can do, for RankFailureError's message.
std::string what_survivors_can_do(const std::vector<int>& dead) {
  WorldState& world = state();
  int host = -1;
  {
    std::lock_guard<std::mutex> lock(world.mutex);
    if (!world.failed_shrink.empty()) return "a shrink failed already: restart the job";
    host = world.info.store_host_rank;
  }
  if (std::find(dead.begin(), dead.end(), host) != dead.end()) {
    return "world rank " + std::to_string(host) +
           " hosted the world store, whose loss cannot be survived: restart the job";
  }
  return "shrink_model_parallel(" + detail::ranks_str(dead) +
         ") on every survivor lets the job go on";
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
  // Checked first, so that a bad value fails the start rather than some later error path.
  const std::optional<RankFailurePolicy> policy = policy_from_environment();
  RendezvousResult info = rendezvous(rdzv, env);

  ProcessGroupOptions group_options;
  group_options.name = "world";
  group_options.timeout = options.timeout;
  group_options.single_node = info.single_node;
  world.group = ProcessGroup::create_world(info.store, info.rank, info.world_size, group_options);
  world.liveness = RankLiveness::gather(*world.group);
  world.info = std::move(info);
  world.timeout = options.timeout;
  world.initialized = true;
  if (policy) failure_policy().store(static_cast<int>(*policy));
}

bool world_is_initialized() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  return world.initialized;
}

RendezvousResult world_info() {
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

std::vector<int> find_dead_ranks() {
  std::shared_ptr<RankLiveness> liveness;
  {
    WorldState& world = state();
    std::lock_guard<std::mutex> lock(world.mutex);
    check_initialized(world, "find_dead_ranks");
    liveness = world.liveness;
  }
  return liveness->dead_ranks();
}

WorldShrink shrink_world(const std::vector<int>& excluded_world_ranks) {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  check_initialized(world, "shrink_world");
  GC_CHECK(world.failed_shrink.empty(),
           "shrink_world: the world is unusable after a failed "
           "shrink (",
           world.failed_shrink, "); restart the job");
  RendezvousResult& info = world.info;
  const std::vector<int> excluded = checked_exclusion(world, excluded_world_ranks);
  const int attempt = ++world.shrink_attempts;
  try {
    // world.mutex is held: world.liveness stays the one of this world throughout.
    agree_on_excluded(*world.group->store(), attempt, info.rank, info.world_size, excluded,
                      world.timeout, [&] { return world.liveness->dead_ranks(); });
  } catch (const RankFailureError& e) {
    // A retry without the store's host cannot work (checked_exclusion refuses it): say so now.
    const std::vector<int>& dead = e.dead_ranks();
    if (std::find(dead.begin(), dead.end(), info.store_host_rank) != dead.end()) {
      GC_THROW(DistributedError, e.what(), "; but world rank ", info.store_host_rank,
               " hosted the world store, whose loss cannot be survived: restart the job");
    }
    throw;
  }

  WorldShrink shrink;
  shrink.epoch = static_cast<int>(world.shrinks.size()) + 1;
  shrink.excluded = excluded;
  shrink.new_rank_of.assign(info.world_size, -1);
  std::vector<int> new_world_ranks;
  int local_excluded = 0;
  for (int r = 0; r < info.world_size; ++r) {
    if (std::binary_search(excluded.begin(), excluded.end(), r)) {
      local_excluded += world.liveness->on_this_node(r) ? 1 : 0;
      continue;
    }
    shrink.new_rank_of[r] = static_cast<int>(new_world_ranks.size());
    new_world_ranks.push_back(shrink.new_rank_of[r]);
  }
  // The new group's prefix is named by the agreed attempt, the same on every survivor however
  // far each got in an earlier, failed attempt.
  const int old_rank = info.rank;
  const int new_rank = shrink.new_rank_of[old_rank];
  const int new_size = static_cast<int>(new_world_ranks.size());
  std::shared_ptr<ProcessGroup> group =
      world.group->shrink(excluded, new_world_ranks, "attempt" + std::to_string(attempt));
  // From here the old world group is retired: a failure leaves the world unusable.
  std::shared_ptr<RankLiveness> liveness;
  try {
    liveness = RankLiveness::gather(*group);
  } catch (const std::exception& e) {
    world.group = group;
    world.failed_shrink = e.what();
    throw;
  }
  world.group = group;
  info.rank = new_rank;
  info.world_size = new_size;
  if (info.store_host_rank >= 0) info.store_host_rank = shrink.new_rank_of[info.store_host_rank];
  if (info.local_world_size > 0) info.local_world_size -= local_excluded;
  // local_rank stays: it names this process's device, which does not change.
  world.shrink_attempts = 0;
  world.liveness = std::move(liveness);
  world.shrinks.push_back(shrink);
  set_log_rank(info.rank);
  GC_LOG(Info, "shrink_world: excluded world ranks ", detail::ranks_str(excluded), "; rank ",
         old_rank, " is now rank ", info.rank, " of ", info.world_size);
  return shrink;
}

std::vector<WorldShrink> world_shrinks() {
  WorldState& world = state();
  std::lock_guard<std::mutex> lock(world.mutex);
  return world.shrinks;
}

std::exception_ptr apply_rank_failure_policy(std::exception_ptr error) {
  if (!error || failure_policy().load() != static_cast<int>(RankFailurePolicy::kIdentify)) {
    return error;
  }
  try {
    std::rethrow_exception(error);
  } catch (const RankFailureError&) {
    return error;  // already identified (by an inner operation)
  } catch (const SourceFailedError&) {
    return error;  // the source told why: nobody died
  } catch (const DistributedError& e) {
    const bool timed_out = dynamic_cast<const TimeoutError*>(&e) != nullptr;
    const std::vector<int> dead = dead_ranks_after(timed_out);
    if (dead.empty()) return error;
    return std::make_exception_ptr(
        RankFailureError(std::string(e.what()) + " [world ranks " + detail::ranks_str(dead) +
                             " are dead: " + what_survivors_can_do(dead) + "]",
                         dead));
  } catch (...) {
  }
  return error;
}

void set_rank_failure_policy(RankFailurePolicy policy) {
  failure_policy().store(static_cast<int>(policy));
}

RankFailurePolicy rank_failure_policy() {
  return static_cast<RankFailurePolicy>(failure_policy().load());
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
  world.liveness.reset();
  world.failed_shrink.clear();
  world.shrinks.clear();
  world.shrink_attempts = 0;
  world.info = RendezvousResult{};
  world.initialized = false;
}

}  // namespace groupcoord
