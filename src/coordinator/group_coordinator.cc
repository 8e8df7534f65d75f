// GroupCoordinator (groupcoord/group_coordinator.h): construction, rank bookkeeping, destroy and
// the registry lookup, then the operations in the order of the header: tensor collectives and
// point-to-point, objects, the tensor-dict protocol, message queues, symmetric memory and graph
// capture. The state they share is GroupCoordinator::Impl (group_coordinator_impl.h).
#include "groupcoord/group_coordinator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <utility>
#include <vector>

#include "communicator/op_checks.h"
#include "communicator/output_tensor.h"
#include "coordinator/coordinator_setup.h"
#include "coordinator/group_coordinator_impl.h"
#include "coordinator/group_registry.h"
#include "coordinator/group_shrink.h"
#include "coordinator/host_transfers.h"
#include "coordinator/mq_object_broadcaster.h"
#include "coordinator/object_protocol.h"
#include "coordinator/tensor_metadata.h"
#include "core/host_copy.h"
#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/errors.h"
#include "groupcoord/logging.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/world.h"

#ifdef GROUPCOORD_WITH_CUDA
#include "groupcoord/cuda/graph_capture.h"
#endif

namespace groupcoord {

using comm::check_dim;
using comm::check_peer_rank;
using namespace coordinator_detail;  // NOLINT: this file only implements the coordinator

namespace {

/// Rethrows the exception being handled as the rank-failure policy wants it (world.h); every
/// public operation below ends in `catch (...) { rethrow_under_failure_policy(); }`.
[[noreturn]] void rethrow_under_failure_policy() {
  std::rethrow_exception(apply_rank_failure_policy(std::current_exception()));
}

}  // namespace

// ---- Impl helpers ----------------------------------------------------------------------------

void GroupCoordinator::Impl::check_alive(const char* op) const {
  if (destroyed) GC_THROW(DistributedError, label(op), ": the group has been destroyed");
  if (!failed_shrink.empty()) {
    GC_THROW(DistributedError, label(op), ": the group is unusable after a failed shrink (",
             failed_shrink, "); restart the job");
  }
}

DeviceCommunicatorContext GroupCoordinator::Impl::communicator_context() const {
  DeviceCommunicatorContext context;
  context.cpu_group = cpu_group;
  context.device_group = device_group;
  context.device = device;
  context.unique_name = unique_name;
  context.use_all2all = use_all2all;
  return context;
}

void GroupCoordinator::Impl::make_communicators() {
  if (!use_device_communicator || world_size <= 1) return;
  communicator = create_device_communicator(backend_info.communicator, communicator_context());
  make_host_communicator();
}

void GroupCoordinator::Impl::make_host_communicator() {
  if (device.is_cpu()) return;
  // Host tensors of a CUDA coordinator travel over its CPU group, through the cpu communicator
  // (the device one takes device tensors only).
  DeviceCommunicatorContext host_context = communicator_context();
  host_context.device = Device::cpu();
  host_communicator = create_device_communicator("cpu", host_context);
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
  check_peer_rank(label(op), value, what, rank_in_group, world_size, /*allow_self=*/false);
  return value;
}

// ---- construction ----------------------------------------------------------------------------

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
  s.backend_info = coordinator_detail::resolve_backend(backend, comm::to_string(label));
  s.backend = s.backend_info.name;
  coordinator_detail::check_group_ranks(group_ranks, world->size(), comm::to_string(label));

  s.rank = world->rank();
  s.local_rank = local_rank;
  s.group_ranks = std::move(group_ranks);
  s.timeout = timeout.value_or(world_timeout());
  s.use_device_communicator = use_device_communicator;
  s.use_message_queue_broadcaster = use_message_queue_broadcaster;
  s.use_all2all = use_all2all;

  // Collective over all world ranks. NCCL communicators build their own connections from the
  // CPU group, so only a backend like gloo gets a Gloo device group.
  auto groups = coordinator_detail::create_groups(
      *world, s.group_ranks, s.backend_info.gloo_device_group, s.unique_name, s.timeout);
  GC_CHECK(groups.cpu_group != nullptr, label, ": world rank ", s.rank, " is in none of the ",
           "groups ", coordinator_detail::group_ranks_str(s.group_ranks));
  s.cpu_group = std::move(groups.cpu_group);
  s.device_group = std::move(groups.device_group);
  s.ranks = std::move(groups.ranks);
  s.world_size = static_cast<int>(s.ranks.size());
  s.rank_in_group = s.cpu_group->rank();
  s.device = s.backend_info.device_type == DeviceType::CUDA
                 ? coordinator_detail::cuda_device_for(local_rank)
                 : Device::cpu();
  coordinator_detail::init_device_layer(s.backend_info.device_type);

  s.world_epoch = static_cast<int>(world_shrinks().size());
  s.make_communicators();
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

// ---- shrink (docs/elastic.md) ----------------------------------------------------------------

void GroupCoordinator::shrink(const std::vector<int>& excluded_world_ranks) {
  Impl& s = *impl_;
  s.check_alive("shrink");
  const std::string label = comm::to_string(s.label("shrink"));
  const WorldShrink shrink = world_shrink_to_follow(s.world_epoch, excluded_world_ranks, label);
  std::vector<int> excluded_in_group;
  std::vector<int> new_world_ranks;
  for (int i = 0; i < static_cast<int>(s.ranks.size()); ++i) {
    const int renumbered = shrink.new_rank_of[s.ranks[i]];
    if (renumbered < 0) {
      excluded_in_group.push_back(i);
    } else {
      new_world_ranks.push_back(renumbered);
    }
  }
  try {
    s.shrink_groups(excluded_in_group, new_world_ranks, "world" + std::to_string(shrink.epoch));
  } catch (const std::exception& e) {
    s.failed_shrink = e.what();
    throw;
  }
  s.rank = shrink.new_rank_of[s.rank];
  s.ranks = new_world_ranks;
  s.world_size = static_cast<int>(s.ranks.size());
  s.rank_in_group = s.cpu_group->rank();
  s.group_ranks = renumber_group_ranks(s.group_ranks, shrink);
  s.world_epoch = shrink.epoch;
  GC_LOG(Info, s.unique_name, ": shrunk without world ranks ", detail::ranks_str(shrink.excluded),
         "; now ranks ", detail::ranks_str(s.ranks), " (rank ", s.rank_in_group, " of ",
         s.world_size, ")");
}

void GroupCoordinator::Impl::shrink_groups(const std::vector<int>& excluded,
                                           const std::vector<int>& new_world_ranks,
                                           const std::string& shrink_id) {
  // The old groups are retired by their shrink, which aborts their transfers in flight; only
  // then may the buffers of pending isends go (Gloo sends from them).
  mq_broadcaster.reset();
  cpu_group = cpu_group->shrink(excluded, new_world_ranks, shrink_id);
  if (device_group) device_group = device_group->shrink(excluded, new_world_ranks, shrink_id);
  pending_isends.clear();
  world_size = static_cast<int>(new_world_ranks.size());
  auto retire = [this](std::unique_ptr<DeviceCommunicator> old) {
    if (!old) return;
    try {
      old->destroy();
    } catch (const std::exception& e) {
      GC_LOG(Warn, unique_name, ": shrink: retiring the old communicator: ", e.what());
    }
    retired_communicators.push_back(std::move(old));
  };
  retire(std::move(host_communicator));
  if (!communicator) return remake_queue();
  // The communicator first tries to keep its connections (NCCL's ncclCommShrink); every
  // survivor gets the same answer, so all take the same branch below. Asked also when one rank
  // is left (which needs no communicator): a backend lets go of a dead peer there without waiting
  // for it.
  std::unique_ptr<DeviceCommunicator> shrunk =
      communicator->shrink(excluded, communicator_context());
  if (shrunk) {
    retired_communicators.push_back(std::move(communicator));
  } else {
    retire(std::move(communicator));
  }
  if (world_size <= 1) {
    retire(std::move(shrunk));
  } else if (shrunk) {
    communicator = std::move(shrunk);
    make_host_communicator();
  } else {
    make_communicators();
  }
  remake_queue();
}

void GroupCoordinator::Impl::remake_queue() {
  if (use_message_queue_broadcaster && world_size > 1) {
    mq_broadcaster = coordinator_detail::make_mq_object_broadcaster(cpu_group, unique_name);
  }
}

GroupCoordinator* GroupCoordinator::find(const std::string& unique_name) {
  return coordinator_detail::find_group(unique_name);
}

std::uint64_t GroupCoordinator::registry_generation() {
  return coordinator_detail::registry_generation();
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's tensor collectives, barrier, point-to-point tensors, sibling groups and MoE
// routing. Each collective follows vLLM: bypass at world size 1 (returning the input), else hand
// the tensor to the device communicator. Arguments are checked here (communicator/op_checks.h),
// so the messages do not depend on the communicator plugged in.

namespace {

// World size 1 with a caller-provided output: checks `out` against the input (the result of
// every collective then has the input's shape) and copies the input into it; returns `out`.
Tensor copy_into_output(const comm::OpLabel& label, const Tensor& input, const Tensor& out) {
  comm::check_output(label, out, input.shape(), input.dtype(), input.device());
  return comm::write_into(out, input);
}

}  // namespace

Tensor GroupCoordinator::all_reduce(const Tensor& input) try {
  Impl& s = *impl_;
  s.check_alive("all_reduce");
  if (s.world_size == 1) return input;
  comm::check_defined(s.label("all_reduce"), input, "input");
  return s.communicator_for("all_reduce", input).all_reduce(input);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::all_gather(const Tensor& input, int dim) try {
  Impl& s = *impl_;
  s.check_alive("all_gather");
  if (s.world_size == 1) return input;
  check_dim(s.label("all_gather"), input, dim);
  return s.communicator_for("all_gather", input).all_gather(input, dim);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::all_gatherv(const Tensor& input, int dim,
                                     const std::optional<std::vector<std::int64_t>>& sizes) try {
  Impl& s = *impl_;
  s.check_alive("all_gatherv");
  s.require_communicator("all_gatherv");
  DeviceCommunicator& comm = s.communicator_for("all_gatherv", input);
  comm::check_gatherv_args(s.label("all_gatherv"), input, dim, sizes, s.world_size,
                           s.rank_in_group);
  return comm.all_gatherv(input, dim, sizes);  // one input: no vectors
} catch (...) {
  rethrow_under_failure_policy();
}

std::vector<Tensor> GroupCoordinator::all_gatherv(
    const std::vector<Tensor>& inputs, int dim,
    const std::optional<std::vector<std::int64_t>>& sizes) try {
  Impl& s = *impl_;
  s.check_alive("all_gatherv");
  s.require_communicator("all_gatherv");
  const comm::OpLabel label = s.label("all_gatherv");
  GC_CHECK(!inputs.empty(), label, ": the list of inputs is empty");
  DeviceCommunicator& comm = s.communicator_for("all_gatherv", inputs.front());
  for (const Tensor& input : inputs) {
    comm::check_gatherv_args(label, input, dim, sizes, s.world_size, s.rank_in_group);
  }
  return comm.all_gatherv(inputs, dim, sizes);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::reduce_scatter(const Tensor& input, int dim) try {
  Impl& s = *impl_;
  s.check_alive("reduce_scatter");
  if (s.world_size == 1) return input;
  const comm::OpLabel label = s.label("reduce_scatter");
  check_dim(label, input, dim);
  DeviceCommunicator& comm = s.communicator_for("reduce_scatter", input);
  comm::check_scatterv_args(label, input, dim, std::nullopt, s.world_size);
  return comm.reduce_scatter(input, dim);
} catch (...) {
  rethrow_under_failure_policy();
}

// Caller-provided outputs: the coordinator checks the input as for the out-of-place call and
// leaves `out` to the communicator, except at world size 1, where it copies the input.
Tensor GroupCoordinator::all_reduce(const Tensor& input, const Tensor& out) try {
  Impl& s = *impl_;
  s.check_alive("all_reduce");
  const comm::OpLabel label = s.label("all_reduce");
  comm::check_defined(label, input, "input");
  if (s.world_size == 1) return copy_into_output(label, input, out);
  return s.communicator_for("all_reduce", input).all_reduce(input, out);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::all_gather(const Tensor& input, int dim, const Tensor& out) try {
  Impl& s = *impl_;
  s.check_alive("all_gather");
  const comm::OpLabel label = s.label("all_gather");
  check_dim(label, input, dim);
  if (s.world_size == 1) return copy_into_output(label, input, out);
  return s.communicator_for("all_gather", input).all_gather(input, dim, out);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::reduce_scatter(const Tensor& input, int dim, const Tensor& out) try {
  Impl& s = *impl_;
  s.check_alive("reduce_scatter");
  const comm::OpLabel label = s.label("reduce_scatter");
  check_dim(label, input, dim);
  if (s.world_size == 1) return copy_into_output(label, input, out);
  DeviceCommunicator& comm = s.communicator_for("reduce_scatter", input);
  comm::check_scatterv_args(label, input, dim, std::nullopt, s.world_size);
  return comm.reduce_scatter(input, dim, out);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::reduce_scatterv(
    const Tensor& input, int dim, const std::optional<std::vector<std::int64_t>>& sizes) try {
  Impl& s = *impl_;
  s.check_alive("reduce_scatterv");
  DeviceCommunicator& comm = s.communicator_for("reduce_scatterv", input);
  comm::check_scatterv_args(s.label("reduce_scatterv"), input, dim, sizes, s.world_size);
  return comm.reduce_scatterv(input, dim, sizes);
} catch (...) {
  rethrow_under_failure_policy();
}

std::optional<Tensor> GroupCoordinator::gather(const Tensor& input, int dst, int dim) try {
  Impl& s = *impl_;
  s.check_alive("gather");
  const comm::OpLabel label = s.label("gather");
  check_peer_rank(label, dst, "dst", s.rank_in_group, s.world_size, /*allow_self=*/true);
  if (s.world_size == 1) return input;
  DeviceCommunicator& comm = s.communicator_for("gather", input);
  check_dim(label, input, dim);
  return comm.gather(input, dst, dim);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::broadcast(const Tensor& input, int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast");
  const comm::OpLabel label = s.label("broadcast");
  check_peer_rank(label, src, "src", s.rank_in_group, s.world_size, /*allow_self=*/true);
  if (s.world_size == 1) return input;
  comm::check_defined(label, input, "input");
  // vLLM broadcasts on the device group directly; that is the Gloo device group for host
  // tensors, and the communicator (NCCL) otherwise.
  if (input.device().is_cpu()) {
    // Host tensors never go through NCCL: the CPU group carries them on the nccl backend.
    broadcast_host_tensor(s.device_group ? *s.device_group : *s.cpu_group, input, src);
    return input;
  }
  return s.require_communicator("broadcast").broadcast(input, src);
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::barrier() try {
  Impl& s = *impl_;
  s.check_alive("barrier");
  s.cpu_group->barrier();
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::send(const Tensor& tensor, std::optional<int> dst) try {
  Impl& s = *impl_;
  s.check_alive("send");
  s.require_communicator("send");
  const int peer = s.resolve_peer("send", "dst", dst);
  comm::check_defined(s.label("send"), tensor, "tensor");
  DeviceCommunicator& comm = s.communicator_for("send", tensor);
  comm.send(tensor, peer);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::recv(const Shape& size, DType dtype, std::optional<int> src) try {
  Impl& s = *impl_;
  s.check_alive("recv");
  DeviceCommunicator& comm = s.require_communicator("recv");
  const int peer = s.resolve_peer("recv", "src", src);
  return comm.recv(size, dtype, peer);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::recv(const Tensor& out, std::optional<int> src) try {
  Impl& s = *impl_;
  s.check_alive("recv");
  DeviceCommunicator& comm = s.communicator_for("recv", out);  // host tensors as send's
  const int peer = s.resolve_peer("recv", "src", src);
  return comm.recv(out, peer);
} catch (...) {
  rethrow_under_failure_policy();
}

std::shared_ptr<DeviceCommunicator> GroupCoordinator::make_sibling_device_group(
    std::optional<std::string> group_desc) try {
  Impl& s = *impl_;
  s.check_alive("make_sibling_device_group");
  const std::string name = s.unique_name + "/" + group_desc.value_or("sibling");
  DeviceCommunicatorContext context = s.communicator_context();
  context.device_group = nullptr;
  context.unique_name = name;
  // Collective over all world ranks for the gloo backend (one new group per list, as vLLM's
  // new_group loop); an NCCL communicator makes its own connections from the CPU group.
  if (s.backend_info.gloo_device_group) {
    context.device_group = create_sibling_groups(*world_group(), s.group_ranks, name, s.timeout);
  }
  return create_device_communicator(s.backend_info.communicator, context);
} catch (...) {
  rethrow_under_failure_policy();
}

DispatchRouterLogitsResult GroupCoordinator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) try {
  Impl& s = *impl_;
  s.check_alive("dispatch_router_logits");
  if (!s.communicator) return {hidden_states, router_logits, extra_tensors};
  return s.communicator->dispatch_router_logits(hidden_states, router_logits, is_sequence_parallel,
                                                extra_tensors);
} catch (...) {
  rethrow_under_failure_policy();
}

DispatchResult GroupCoordinator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                          const Tensor& topk_ids, bool is_sequence_parallel,
                                          const std::vector<Tensor>& extra_tensors) try {
  Impl& s = *impl_;
  s.check_alive("dispatch");
  if (!s.communicator) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return s.communicator->dispatch(hidden_states, topk_weights, topk_ids, is_sequence_parallel,
                                  extra_tensors);
} catch (...) {
  rethrow_under_failure_policy();
}

Tensor GroupCoordinator::combine(const Tensor& hidden_states, bool is_sequence_parallel) try {
  Impl& s = *impl_;
  s.check_alive("combine");
  if (!s.communicator) return hidden_states;
  return s.communicator->combine(hidden_states, is_sequence_parallel);
} catch (...) {
  rethrow_under_failure_policy();
}

namespace {

// Passes `why` to the ranks waiting for this source through `tell`. A failure to tell is logged:
// the caller is about to throw the error that matters.
template <typename Tell>
void tell_waiting_ranks(Tell&& tell, const std::string& why) {
  try {
    tell(why);
  } catch (const std::exception& tell_error) {
    GC_LOG(Warn, "could not tell the waiting ranks of the failure (", tell_error.what(), ")");
  }
}

// Runs `prepare` (a source's work before its first message); when it throws, tells the waiting
// ranks its text through `tell` and rethrows.
template <typename Prepare, typename Tell>
auto produce_or_tell(Prepare&& prepare, Tell&& tell) -> decltype(prepare()) {
  try {
    return prepare();
  } catch (const std::exception& error) {
    tell_waiting_ranks(tell, error.what());
    throw;
  }
}

// An explicit peer is range-checked even when the call is bypassed (world size 1).
void check_explicit_peer(const comm::OpLabel& label, const char* what, std::optional<int> peer,
                         int world_size) {
  if (peer) check_peer_rank(label, *peer, what, /*rank=*/0, world_size, /*allow_self=*/true);
}

}  // namespace

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's object operations. Objects are Bytes (Python pickles them); they go over the
// CPU group (object_protocol.h), except broadcast_object from the writer of the coordinator's
// message queue, which goes through that queue. broadcast_object_list too goes over the CPU group,
// where vLLM uses the device group (with NCCL a host-device round trip for pure host data).

Bytes GroupCoordinator::broadcast_object(const std::optional<Bytes>& obj, int src) {
  if (obj) return broadcast_held_object(*obj, src);
  return std::move(*broadcast_object_from(nullptr, src));  // on src, that throws: no object
}

Bytes GroupCoordinator::broadcast_held_object(const Bytes& obj, int src) {
  std::optional<Bytes> received = broadcast_object_from(&obj, src);
  return received ? std::move(*received) : detail::bytes_copy(obj);
}

Bytes GroupCoordinator::broadcast_moved_object(Bytes&& obj, int src) {
  std::optional<Bytes> received = broadcast_object_from(&obj, src);
  return received ? std::move(*received) : std::move(obj);
}

std::optional<Bytes> GroupCoordinator::broadcast_object_from(const Bytes* obj, int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast_object");
  const comm::OpLabel label = s.label("broadcast_object");
  check_peer_rank(label, src, "src", s.rank_in_group, s.world_size, /*allow_self=*/true);
  const bool is_src = s.rank_in_group == src;
  if (is_src && obj == nullptr) {
    const std::invalid_argument error(detail::concat(__FILE__, ":", __LINE__, ": ", label, ": src ",
                                                     src,
                                                     " (this rank) passed no object to broadcast"));
    if (s.world_size > 1)
      tell_waiting_ranks([&](const std::string& why) { broadcast_object_failed(why, src); },
                         error.what());
    throw error;
  }
  if (s.world_size == 1) return std::nullopt;
  if (s.mq_broadcaster && s.mq_broadcaster->writer_rank() == src) {
    try {
      return s.mq_broadcaster->broadcast_object(is_src ? obj : nullptr);
    } catch (const SourceFailedError& failed) {
      throw_source_failure(label, src, failed.why());  // in the words of the CPU-group route
    }
  }
  return broadcast_object_bytes(*s.cpu_group, is_src ? obj : nullptr, src, label);
} catch (...) {
  rethrow_under_failure_policy();
}

std::vector<Bytes> GroupCoordinator::broadcast_object_list(const std::vector<Bytes>& obj_list,
                                                           int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast_object_list");
  const comm::OpLabel label = s.label("broadcast_object_list");
  check_peer_rank(label, src, "src", s.rank_in_group, s.world_size, /*allow_self=*/true);
  if (s.world_size == 1) return obj_list;
  const bool is_src = s.rank_in_group == src;
  // One object carrying the whole list, so receivers learn its length from the source and can
  // check theirs after the collective has completed (the group stays in step either way).
  const Bytes packed = is_src ? pack_object_list(obj_list) : Bytes();
  const std::optional<Bytes> received =
      broadcast_object_bytes(*s.cpu_group, is_src ? &packed : nullptr, src, label);
  if (is_src) return obj_list;
  std::vector<Bytes> objects = unpack_object_list(*received, comm::to_string(label));
  GC_CHECK(objects.size() == obj_list.size(), label, ": this rank passed a list of ",
           obj_list.size(), " objects but src ", src, " broadcast ", objects.size());
  return objects;
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::send_object(const Bytes& obj, int dst) try {
  Impl& s = *impl_;
  s.check_alive("send_object");
  const comm::OpLabel label = s.label("send_object");
  check_peer_rank(label, dst, "dst", s.rank_in_group, s.world_size, /*allow_self=*/false);
  send_object_bytes(*s.cpu_group, obj, dst);
} catch (...) {
  rethrow_under_failure_policy();
}

Bytes GroupCoordinator::recv_object(int src) try {
  Impl& s = *impl_;
  s.check_alive("recv_object");
  const comm::OpLabel label = s.label("recv_object");
  check_peer_rank(label, src, "src", s.rank_in_group, s.world_size, /*allow_self=*/false);
  return recv_object_bytes(*s.cpu_group, src, label);
} catch (...) {
  rethrow_under_failure_policy();
}

std::shared_ptr<Work> GroupCoordinator::isend_object(Bytes obj, int dst) try {
  Impl& s = *impl_;
  s.check_alive("isend_object");
  const comm::OpLabel label = s.label("isend_object");
  check_peer_rank(label, dst, "dst", s.rank_in_group, s.world_size, /*allow_self=*/false);
  return isend_object_bytes(*s.cpu_group, std::move(obj), dst);
} catch (...) {
  rethrow_under_failure_policy();
}

// ---- a source that cannot send ----------------------------------------------------------------
// Each sends a failure where the receivers expect the object (object_protocol.h, and
// MessageQueue::enqueue_error on the queue's route): they consume it in step and throw.

void GroupCoordinator::Impl::check_is_source(const char* op, int src) const {
  const comm::OpLabel l = label(op);
  check_peer_rank(l, src, "src", rank_in_group, world_size, /*allow_self=*/true);
  GC_CHECK(rank_in_group == src, l, ": only the source reports its failure; src is ", src,
           " and this is rank ", rank_in_group);
}

void GroupCoordinator::broadcast_object_failed(const std::string& why, int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast_object_failed");
  s.check_is_source("broadcast_object_failed", src);
  if (s.world_size == 1) return;
  if (s.mq_broadcaster && s.mq_broadcaster->writer_rank() == src) {
    s.mq_broadcaster->broadcast_failure(cut_failure_text(why));
    return;
  }
  broadcast_object_failure(*s.cpu_group, why, src);
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::broadcast_object_list_failed(const std::string& why, int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast_object_list_failed");
  s.check_is_source("broadcast_object_list_failed", src);
  if (s.world_size == 1) return;
  broadcast_object_failure(*s.cpu_group, why, src);
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::send_object_failed(const std::string& why, std::optional<int> dst) try {
  Impl& s = *impl_;
  s.check_alive("send_object_failed");
  check_explicit_peer(s.label("send_object_failed"), "dst", dst, s.world_size);
  if (s.world_size == 1) return;
  const int peer = s.resolve_peer("send_object_failed", "dst", dst);
  // Not waited for: the caller is about to raise its own error. Retained like a tensor dict's
  // sends until the receiver has taken it.
  s.pending_isends.reap();
  s.pending_isends.push({isend_object_failure(*s.cpu_group, why, peer)}, {});
} catch (...) {
  rethrow_under_failure_policy();
}

// -------------------------------------------------------------------------------------------------
// vLLM's tensor-dict protocol. A dict travels as its metadata list (tensor_metadata.h), sent as
// one object over the CPU group, followed by each non-empty tensor: host tensors over the CPU
// group, device tensors through the device communicator. Empty tensors are rebuilt from the
// metadata alone. Receivers see the keys in the sender's order. broadcast_tensor_dict sends the
// host tensors of up to 64 KiB together, in one buffer, before the others.
//
// all_gather_group (send/recv only): a tensor whose element count divides by that group's size
// (or that all_gather_tensors forces) travels as the all_gather_group rank's slice
// reshape(ag_size, -1)[ag_rank]; the receivers all_gather the slices over all_gather_group
// (dim 0) and reshape to the original shape. Sending and receiving ranks must agree on
// all_gather_group's size and ranks, as in vLLM.

namespace {

// vLLM's _should_use_all_gather.
bool should_use_all_gather(const std::string& key, std::int64_t numel,
                           const GroupCoordinator* all_gather_group,
                           const std::optional<AllGatherTensors>& all_gather_tensors) {
  if (all_gather_group == nullptr) return false;
  bool use = numel % all_gather_group->world_size() == 0;
  if (all_gather_tensors) {
    for (const auto& [name, value] : *all_gather_tensors) {
      if (name == key) use = value;
    }
  }
  return use;
}

void check_divisible(const comm::OpLabel& label, const std::string& key, std::int64_t numel,
                     const GroupCoordinator& all_gather_group) {
  GC_CHECK(numel % all_gather_group.world_size() == 0, label, ": tensor '", key, "' has ", numel,
           " elements, which do not split evenly over all_gather_group ",
           all_gather_group.unique_name(), " of size ", all_gather_group.world_size(),
           " (all_gather_tensors forces the all_gather path for it)");
}

// The all_gather_group rank's share of a contiguous tensor: reshape(ag_size, -1)[ag_rank].
Tensor all_gather_slice(const Tensor& contiguous, const GroupCoordinator& all_gather_group) {
  return contiguous.reshape({all_gather_group.world_size(), -1})
      .narrow(0, all_gather_group.rank_in_group(), 1)
      .reshape({-1});
}

}  // namespace

// ---- Impl helpers ----------------------------------------------------------------------------

Device GroupCoordinator::Impl::device_for(DeviceType type) const {
  if (type == DeviceType::CPU) return Device::cpu();
  return device.is_cuda() ? device : Device::cuda(local_rank);
}

void GroupCoordinator::Impl::check_route(const char* op, const std::string& key,
                                         Device tensor_device) const {
  if (tensor_device.is_cpu()) return;
  GC_CHECK(communicator != nullptr, label(op), ": No device communicator found for tensor '", key,
           "' on ", tensor_device.str());
}

void GroupCoordinator::Impl::broadcast_dict_tensor(const Tensor& tensor, int src) {
  if (tensor.device().is_cpu()) {
    broadcast_host_tensor(*cpu_group, tensor, src);
  } else {
    communicator->broadcast(tensor, src);
  }
}

std::shared_ptr<Work> GroupCoordinator::Impl::isend_dict_tensor(const Tensor& tensor, int dst) {
  if (tensor.device().is_cpu()) return isend_host_tensor(*cpu_group, tensor, dst, kTensorDictTag);
  return communicator->isend(tensor, dst);
}

std::shared_ptr<Work> GroupCoordinator::Impl::irecv_dict_tensor(const Tensor& tensor, int src) {
  if (tensor.device().is_cpu()) return irecv_host_tensor(*cpu_group, tensor, src, kTensorDictTag);
  return communicator->irecv(tensor, src);
}

// ---- broadcast -------------------------------------------------------------------------------

namespace {

// Host tensors up to this size travel together in one broadcast (a decode step's metadata is a
// dozen small arrays: one collective instead of one each); larger ones go on their own, without
// the extra copies.
constexpr std::size_t kPackedHostBytes = std::size_t{64} << 10;

bool packs(const Tensor& tensor) {
  return tensor.device().is_cpu() && tensor.numel() > 0 && tensor.nbytes() <= kPackedHostBytes;
}

// Broadcasts the packed host tensors of `tensors` (every rank passes its tensors in dict order,
// the source its values, the others tensors of the same shapes to fill) in one buffer.
void broadcast_packed(ProcessGroup& group, const std::vector<Tensor>& tensors, int src) {
  std::size_t total = 0;
  for (const Tensor& t : tensors) {
    if (packs(t)) total += t.nbytes();
  }
  if (total == 0) return;
  Tensor packed = Tensor::empty({static_cast<std::int64_t>(total)}, DType::UInt8, Device::cpu());
  auto* bytes = static_cast<std::uint8_t*>(packed.data_ptr());
  const bool source = group.rank() == src;
  auto each = [&](auto&& move) {
    std::size_t offset = 0;
    for (const Tensor& t : tensors) {
      if (!packs(t)) continue;
      move(t, bytes + offset);
      offset += t.nbytes();
    }
  };
  if (source) {
    each([](const Tensor& t, std::uint8_t* at) {
      const Tensor compact = t.contiguous();
      detail::copy_bytes(at, compact.data_ptr(), compact.nbytes());
    });
  }
  group.broadcast(bytes, total, DType::UInt8, src);
  if (!source) {
    each([](const Tensor& t, std::uint8_t* at) {
      detail::copy_bytes(t.data_ptr(), at, t.nbytes());
    });
  }
}

}  // namespace

std::optional<TensorDict> GroupCoordinator::broadcast_tensor_dict(
    const std::optional<TensorDict>& tensor_dict, int src) try {
  Impl& s = *impl_;
  s.check_alive("broadcast_tensor_dict");
  const comm::OpLabel label = s.label("broadcast_tensor_dict");
  check_peer_rank(label, src, "src", s.rank_in_group, s.world_size, /*allow_self=*/true);
  if (s.world_size == 1) return tensor_dict;

  if (s.rank_in_group == src) {
    SplitTensorDict split = produce_or_tell(
        [&] {
          GC_CHECK(tensor_dict.has_value(), label, ": src ", src,
                   " (this rank) passed no tensor dict");
          SplitTensorDict checked = split_tensor_dict(*tensor_dict, comm::to_string(label));
          for (const auto& [key, tensor] : checked.tensors) {
            s.check_route("broadcast_tensor_dict", key, tensor.device());
          }
          return checked;
        },
        [&](const std::string& why) { broadcast_object_failed(why, src); });
    broadcast_object(encode_metadata(split.metadata), src);
    std::vector<Tensor> tensors;
    for (const auto& item : split.tensors) tensors.push_back(item.second);
    broadcast_packed(*s.cpu_group, tensors, src);
    for (const Tensor& tensor : tensors) {
      if (tensor.numel() > 0 && !packs(tensor)) s.broadcast_dict_tensor(tensor, src);
    }
    return tensor_dict;
  }

  const auto metadata =
      decode_metadata(broadcast_object(std::nullopt, src), comm::to_string(label));
  TensorDict result;
  result.reserve(metadata.size());
  std::vector<Tensor> tensors;  // in dict order, as the source sends them
  for (const MetadataEntry& entry : metadata) {
    if (entry.kind == MetadataEntry::Kind::Bytes) {
      result.emplace_back(entry.key, entry.value);
      continue;
    }
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype, s.device_for(entry.device_type));
    if (tensor.numel() > 0) s.check_route("broadcast_tensor_dict", entry.key, tensor.device());
    tensors.push_back(tensor);
    result.emplace_back(entry.key, tensor);
  }
  broadcast_packed(*s.cpu_group, tensors, src);
  for (const Tensor& tensor : tensors) {
    if (tensor.numel() > 0 && !packs(tensor)) s.broadcast_dict_tensor(tensor, src);
  }
  return result;
} catch (...) {
  rethrow_under_failure_policy();
}

// ---- send ------------------------------------------------------------------------------------

std::optional<TensorDict> GroupCoordinator::send_tensor_dict(
    const TensorDict& tensor_dict, std::optional<int> dst, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) try {
  Impl& s = *impl_;
  s.check_alive("send_tensor_dict");
  check_explicit_peer(s.label("send_tensor_dict"), "dst", dst, s.world_size);
  if (s.world_size == 1) return tensor_dict;
  auto handles = isend_tensor_dict(tensor_dict, dst, all_gather_group, all_gather_tensors);
  for (const auto& handle : handles) handle->wait();
  // Waited for: the retention entry isend_tensor_dict appended has nothing left to protect.
  s.pending_isends.drop(handles);
  return std::nullopt;
} catch (...) {
  rethrow_under_failure_policy();
}

std::vector<std::shared_ptr<Work>> GroupCoordinator::isend_tensor_dict(
    const TensorDict& tensor_dict, std::optional<int> dst, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) try {
  Impl& s = *impl_;
  const char* op = "isend_tensor_dict";
  s.check_alive(op);
  const comm::OpLabel label = s.label(op);
  check_explicit_peer(label, "dst", dst, s.world_size);
  if (s.world_size <= 1) return {};
  const int peer = s.resolve_peer(op, "dst", dst);

  // Everything is checked and sliced before the first message leaves: a bad dict sends only a
  // failure, which the receiver raises.
  SplitTensorDict split;
  std::vector<Tensor> pieces;
  produce_or_tell(
      [&] {
        split = split_tensor_dict(tensor_dict, comm::to_string(label));
        for (const auto& [key, tensor] : split.tensors) {
          if (tensor.numel() == 0) continue;
          s.check_route(op, key, tensor.device());
          if (should_use_all_gather(key, tensor.numel(), all_gather_group, all_gather_tensors)) {
            check_divisible(label, key, tensor.numel(), *all_gather_group);
            pieces.push_back(all_gather_slice(tensor.contiguous(), *all_gather_group));
          } else {
            pieces.push_back(tensor);
          }
        }
      },
      [&](const std::string& why) { send_object_failed(why, peer); });

  // Bound the retention FIFO before adding to it.
  s.pending_isends.reap();
  std::vector<std::shared_ptr<Work>> handles;
  try {
    handles.push_back(isend_object_bytes(*s.cpu_group, encode_metadata(split.metadata), peer));
    for (const Tensor& piece : pieces) handles.push_back(s.isend_dict_tensor(piece, peer));
  } catch (...) {
    // Whatever was posted stays retained until it completes.
    s.pending_isends.push(std::move(handles), std::move(pieces));
    throw;
  }
  s.pending_isends.push(handles, std::move(pieces));
  return handles;
} catch (...) {
  rethrow_under_failure_policy();
}

// ---- receive ---------------------------------------------------------------------------------

std::optional<TensorDict> GroupCoordinator::recv_tensor_dict(
    std::optional<int> src, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) try {
  Impl& s = *impl_;
  s.check_alive("recv_tensor_dict");
  check_explicit_peer(s.label("recv_tensor_dict"), "src", src, s.world_size);
  if (s.world_size == 1) return std::nullopt;
  IrecvTensorDictResult pending = irecv_tensor_dict(src, all_gather_group, all_gather_tensors);
  for (const auto& handle : pending.handles) handle->wait();
  for (const auto& step : pending.postprocess) step();
  return std::move(*pending.tensor_dict);
} catch (...) {
  rethrow_under_failure_policy();
}

IrecvTensorDictResult GroupCoordinator::irecv_tensor_dict(
    std::optional<int> src, GroupCoordinator* all_gather_group,
    const std::optional<AllGatherTensors>& all_gather_tensors) try {
  Impl& s = *impl_;
  const char* op = "irecv_tensor_dict";
  s.check_alive(op);
  const comm::OpLabel label = s.label(op);
  check_explicit_peer(label, "src", src, s.world_size);
  IrecvTensorDictResult result;
  if (s.world_size == 1) return result;
  const int peer = s.resolve_peer(op, "src", src);

  const auto metadata =
      decode_metadata(recv_object_bytes(*s.cpu_group, peer, label), comm::to_string(label));
  auto dict = std::make_shared<TensorDict>();
  dict->reserve(metadata.size());
  result.tensor_dict = dict;
  for (const MetadataEntry& entry : metadata) {
    if (entry.kind == MetadataEntry::Kind::Bytes) {
      dict->emplace_back(entry.key, entry.value);
      continue;
    }
    Tensor full = Tensor::empty(entry.shape, entry.dtype, s.device_for(entry.device_type));
    if (full.numel() == 0) {
      dict->emplace_back(entry.key, full);
      continue;
    }
    s.check_route(op, entry.key, full.device());
    if (!should_use_all_gather(entry.key, full.numel(), all_gather_group, all_gather_tensors)) {
      result.handles.push_back(s.irecv_dict_tensor(full, peer));
      dict->emplace_back(entry.key, full);
      continue;
    }
    check_divisible(label, entry.key, full.numel(), *all_gather_group);
    Tensor slice = all_gather_slice(full, *all_gather_group);
    result.handles.push_back(s.irecv_dict_tensor(slice, peer));
    const std::size_t index = dict->size();
    dict->emplace_back(entry.key, slice);
    // Collective over all_gather_group: every receiving rank of it runs its steps in order.
    result.postprocess.push_back([dict, index, slice, shape = entry.shape, all_gather_group] {
      (*dict)[index].second = all_gather_group->all_gather(slice, 0).reshape(shape);
    });
  }
  return result;
} catch (...) {
  rethrow_under_failure_policy();
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's shared-memory message queues (vLLM's create_mq_broadcaster and
// create_single_reader_mq_broadcasters).

std::shared_ptr<MessageQueue> GroupCoordinator::create_mq_broadcaster(int writer_rank,
                                                                      bool blocking) {
  return create_mq_broadcaster(writer_rank, std::nullopt, blocking);
}

std::shared_ptr<MessageQueue> GroupCoordinator::create_mq_broadcaster(
    int writer_rank, const std::optional<MessageQueue::Handle>& external_writer_handle,
    bool blocking) try {
  Impl& s = *impl_;
  s.check_alive("create_mq_broadcaster");
  GC_CHECK(writer_rank >= 0 && writer_rank < s.world_size, s.label("create_mq_broadcaster"),
           ": writer_rank ", writer_rank, " is out of range for a group of ", s.world_size);
  return MessageQueue::create_from_process_group(s.cpu_group, coordinator_detail::kMqChunkBytes,
                                                 coordinator_detail::kMqChunks, writer_rank,
                                                 external_writer_handle, blocking);
} catch (...) {
  rethrow_under_failure_policy();
}

std::vector<std::shared_ptr<MessageQueue>> GroupCoordinator::create_single_reader_mq_broadcasters(
    int reader_rank_in_group, bool blocking) try {
  Impl& s = *impl_;
  s.check_alive("create_single_reader_mq_broadcasters");
  GC_CHECK(reader_rank_in_group >= 0 && reader_rank_in_group < s.world_size,
           s.label("create_single_reader_mq_broadcasters"), ": reader_rank_in_group ",
           reader_rank_in_group, " is out of range for a group of ", s.world_size);
  auto queues = MessageQueue::create_from_process_group_single_reader(
      s.cpu_group, coordinator_detail::kMqChunkBytes, coordinator_detail::kMqChunks,
      reader_rank_in_group, blocking);
  return {std::make_move_iterator(queues.begin()), std::make_move_iterator(queues.end())};
} catch (...) {
  rethrow_under_failure_policy();
}

bool GroupCoordinator::has_mq_broadcaster() const { return impl_->mq_broadcaster != nullptr; }

std::shared_ptr<MessageQueue> GroupCoordinator::mq_broadcaster() const {
  return impl_->mq_broadcaster ? impl_->mq_broadcaster->queue() : nullptr;
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator's NCCL symmetric-memory entry points: forwarded to the device communicator
// (only the cuda one has symmetric memory). At world size 1 there is no communicator and every
// collective is a bypass, so a plain tensor serves.

Tensor GroupCoordinator::symmetric_empty(const Shape& shape, DType dtype) try {
  Impl& s = *impl_;
  s.check_alive("symmetric_empty");
  if (s.world_size == 1) return Tensor::empty(shape, dtype, s.device);
  GC_CHECK(s.device.is_cuda(), s.label("symmetric_empty"),
           ": needs a CUDA backend such as the nccl backend (this coordinator uses '", s.backend,
           "')");
  return s.require_communicator("symmetric_empty").symmetric_empty(shape, dtype);
} catch (...) {
  rethrow_under_failure_policy();
}

SymmetricMemoryStats GroupCoordinator::symmetric_memory_stats() const try {
  const Impl& s = *impl_;
  s.check_alive("symmetric_memory_stats");
  if (s.communicator == nullptr) {
    SymmetricMemoryStats stats;
    stats.disabled_reason = s.world_size == 1 ? "world size 1: collectives are bypassed"
                                              : "the group has no device communicator";
    return stats;
  }
  return s.communicator->symmetric_memory_stats();
} catch (...) {
  rethrow_under_failure_policy();
}

void GroupCoordinator::reserve_symmetric_scratch(std::int64_t bytes) try {
  Impl& s = *impl_;
  s.check_alive("reserve_symmetric_scratch");
  if (s.world_size == 1) return;
  GC_CHECK(s.device.is_cuda(), s.label("reserve_symmetric_scratch"),
           ": needs a CUDA backend such as the nccl backend (this coordinator uses '", s.backend,
           "')");
  s.require_communicator("reserve_symmetric_scratch").reserve_symmetric_scratch(bytes);
} catch (...) {
  rethrow_under_failure_policy();
}

// -------------------------------------------------------------------------------------------------
// GroupCoordinator::graph_capture (vLLM's graph_capture context manager) over the CUDA layer's
// GraphCaptureContext.

std::shared_ptr<GraphCaptureContext> GroupCoordinator::graph_capture(
    std::optional<std::uintptr_t> stream_handle) try {
  Impl& s = *impl_;
  s.check_alive("graph_capture");
  const comm::OpLabel label = s.label("graph_capture");
  GC_CHECK(s.device.is_cuda(), label, ": needs a CUDA backend such as the nccl backend (this ",
           "coordinator uses '", s.backend, "')");
#ifdef GROUPCOORD_WITH_CUDA
  if (stream_handle) return std::make_shared<GraphCaptureContext>(s.device, *stream_handle);
  return std::make_shared<GraphCaptureContext>(s.device);
#else
  GC_CHECK(false, label, ": this build has no CUDA support");
  return nullptr;
#endif
} catch (...) {
  rethrow_under_failure_policy();
}

}  // namespace groupcoord
