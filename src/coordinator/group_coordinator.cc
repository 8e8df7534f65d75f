// GroupCoordinator: construction, rank bookkeeping, destroy and the registry lookup. The
// operations live in coordinator_collectives.cc, coordinator_objects.cc and
// tensor_dict_protocol.cc (see group_coordinator_impl.h).
#include "groupcoord/group_coordinator.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "coordinator/coordinator_setup.h"
#include "coordinator/group_coordinator_impl.h"
#include "coordinator/group_registry.h"
#include "coordinator/mq_object_broadcaster.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/world.h"

namespace groupcoord {

using coordinator_detail::check_group_rank;
using coordinator_detail::check_not_self;

// ---- Impl helpers ----------------------------------------------------------------------------

void GroupCoordinator::Impl::check_alive(const char* op) const {
  if (destroyed) GC_THROW(DistributedError, label(op), ": the group has been destroyed");
}

DeviceCommunicator& GroupCoordinator::Impl::require_communicator(const char* op) const {
  GC_CHECK(communicator != nullptr, label(op), ": No device communicator found (world_size ",
           world_size, ", use_device_communicator ", use_device_communicator ? "true" : "false",
           ")");
  return *communicator;
}

DeviceCommunicator& GroupCoordinator::Impl::communicator_for(const char* op,
                                                             const Tensor& tensor) const {
  DeviceCommunicator& device = require_communicator(op);
  if (host_communicator && tensor.defined() && tensor.device().is_cpu()) return *host_communicator;
  return device;
}

int GroupCoordinator::Impl::resolve_peer(const char* op, const char* what,
                                         std::optional<int> peer) const {
  const bool is_dst = std::string(what) == "dst";
  const int value = peer ? *peer : (rank_in_group + (is_dst ? 1 : world_size - 1)) % world_size;
  check_group_rank(label(op), what, value, world_size);
  check_not_self(label(op), what, value, rank_in_group);
  return value;
}

// ---- construction ----------------------------------------------------------------------------

namespace {

// The communicator's registry name for a backend.
const char* communicator_name(const std::string& backend) {
  return backend == "nccl" ? "cuda" : "cpu";
}

}  // namespace

GroupCoordinator::GroupCoordinator(std::vector<std::vector<int>> group_ranks, int local_rank,
                                   std::string backend, bool use_device_communicator,
                                   bool use_message_queue_broadcaster,
                                   std::optional<std::string> group_name, bool use_all2all,
                                   std::optional<std::chrono::milliseconds> timeout)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  // Counted first, as vLLM does, so every rank's counter advances even when a check below fails.
  const std::string name = group_name && !group_name->empty() ? *group_name : "anonymous";
  s.unique_name = coordinator_detail::make_unique_name(name);
  const comm::OpLabel label = s.label("GroupCoordinator");

  // Checks that depend only on arguments every rank passes identically come first, so a bad call
  // fails on every rank before the collective part starts.
  GC_CHECK(world_is_initialized(), label, ": the distributed world is not initialized; call ",
           "init_distributed_environment (or init_world) first");
  std::shared_ptr<ProcessGroup> world = world_group();
  GC_CHECK(local_rank >= 0, label, ": local_rank ", local_rank, " must be >= 0");
  GC_CHECK(!timeout || timeout->count() > 0, label, ": timeout ", timeout->count(),
           " ms must be positive");
  s.backend = coordinator_detail::resolve_backend(backend, comm::to_string(label));
  coordinator_detail::check_group_ranks(group_ranks, world->size(), comm::to_string(label));

  s.rank = world->rank();
  s.local_rank = local_rank;
  s.group_ranks = std::move(group_ranks);
  s.timeout = timeout.value_or(world_timeout());
  s.use_device_communicator = use_device_communicator;
  s.use_message_queue_broadcaster = use_message_queue_broadcaster;
  s.use_all2all = use_all2all;

  // Collective over all world ranks. NCCL communicators build their own connections from the
  // CPU group, so only the gloo backend gets a Gloo device group.
  auto groups = coordinator_detail::create_groups(*world, s.group_ranks, s.backend == "gloo",
                                                  s.unique_name, s.timeout);
  GC_CHECK(groups.cpu_group != nullptr, label, ": world rank ", s.rank, " is in none of the ",
           "groups ", coordinator_detail::group_ranks_str(s.group_ranks));
  s.cpu_group = std::move(groups.cpu_group);
  s.device_group = std::move(groups.device_group);
  s.ranks = std::move(groups.ranks);
  s.world_size = static_cast<int>(s.ranks.size());
  s.rank_in_group = s.cpu_group->rank();
  s.device = s.backend == "nccl" ? coordinator_detail::cuda_device_for(local_rank) : Device::cpu();
  coordinator_detail::init_device_layer(s.backend);

  if (use_device_communicator && s.world_size > 1) {
    DeviceCommunicatorContext context;
    context.cpu_group = s.cpu_group;
    context.device_group = s.device_group;
    context.device = s.device;
    context.unique_name = s.unique_name;
    context.use_all2all = use_all2all;
    s.communicator = create_device_communicator(communicator_name(s.backend), context);
    if (s.backend == "nccl") {
      // Host tensors of an nccl coordinator travel over its CPU group (no device group here).
      DeviceCommunicatorContext host_context = context;
      host_context.device = Device::cpu();
      s.host_communicator = create_device_communicator("cpu", host_context);
    }
  }
  if (use_message_queue_broadcaster && s.world_size > 1) {
    s.mq_broadcaster = coordinator_detail::make_mq_object_broadcaster(s.cpu_group, s.unique_name);
  }
  coordinator_detail::register_group(s.unique_name, this);
}

GroupCoordinator::~GroupCoordinator() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, impl_->unique_name, ": destroy failed: ", e.what());
  }
}

// ---- ranks -----------------------------------------------------------------------------------

int GroupCoordinator::rank() const { return impl_->rank; }
const std::vector<int>& GroupCoordinator::ranks() const { return impl_->ranks; }
int GroupCoordinator::world_size() const { return impl_->world_size; }
int GroupCoordinator::local_rank() const { return impl_->local_rank; }
int GroupCoordinator::rank_in_group() const { return impl_->rank_in_group; }
const std::string& GroupCoordinator::unique_name() const { return impl_->unique_name; }
int GroupCoordinator::first_rank() const { return impl_->ranks.front(); }
int GroupCoordinator::last_rank() const { return impl_->ranks.back(); }
bool GroupCoordinator::is_first_rank() const { return rank() == first_rank(); }
bool GroupCoordinator::is_last_rank() const { return rank() == last_rank(); }

int GroupCoordinator::next_rank() const {
  const Impl& s = *impl_;
  return s.ranks[(s.rank_in_group + 1) % s.world_size];
}

int GroupCoordinator::prev_rank() const {
  const Impl& s = *impl_;
  return s.ranks[(s.rank_in_group + s.world_size - 1) % s.world_size];
}

const std::vector<std::vector<int>>& GroupCoordinator::group_ranks() const {
  return impl_->group_ranks;
}
const std::string& GroupCoordinator::backend() const { return impl_->backend; }
Device GroupCoordinator::device() const { return impl_->device; }
std::shared_ptr<ProcessGroup> GroupCoordinator::cpu_group() const { return impl_->cpu_group; }
std::shared_ptr<ProcessGroup> GroupCoordinator::device_group() const { return impl_->device_group; }
DeviceCommunicator* GroupCoordinator::device_communicator() const {
  return impl_->communicator.get();
}

// ---- teardown --------------------------------------------------------------------------------

void GroupCoordinator::destroy() {
  Impl& s = *impl_;
  if (s.destroyed) return;
  s.destroyed = true;
  coordinator_detail::unregister_group(s.unique_name, this);
  // Every step runs even if an earlier one failed; the first error is rethrown at the end.
  std::exception_ptr first_error;
  auto step = [&](auto&& fn) {
    try {
      fn();
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
    }
  };
  // The communicator first: its teardown may still use the groups (vLLM's order).
  if (s.communicator) step([&] { s.communicator->destroy(); });
  if (s.host_communicator) step([&] { s.host_communicator->destroy(); });
  s.mq_broadcaster.reset();
  // Destroying a group waits (bounded) for its in-flight transfers and aborts the rest, after
  // which no transfer reads the retained isend_tensor_dict buffers any more.
  if (s.device_group) step([&] { s.device_group->destroy(); });
  if (s.cpu_group) step([&] { s.cpu_group->destroy(); });
  s.pending_isends.clear();
  if (first_error) std::rethrow_exception(first_error);
}

GroupCoordinator* GroupCoordinator::find(const std::string& unique_name) {
  return coordinator_detail::find_group(unique_name);
}

std::uint64_t GroupCoordinator::registry_generation() {
  return coordinator_detail::registry_generation();
}

}  // namespace groupcoord
