// initialize_model_parallel and friends: the TP, DCP, PCP, PP, DP and EP coordinators, created in
// vLLM's order from compute_model_parallel_layout, their getters, and their shrink after a death.
#include <algorithm>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/check.h"
#include "groupcoord/logging.h"
#include "groupcoord/parallel_state.h"
#include "groupcoord/world.h"
#include "parallel_state/default_backend.h"
#include "parallel_state/state.h"

namespace groupcoord {

namespace {

using parallel_state_detail::checked;
using parallel_state_detail::ParallelState;

// vLLM gives the TP and DCP groups a shared-memory message-queue broadcaster (broadcast_object
// from group rank 0 then costs two memcpy); groups spanning nodes fall back to the CPU group.
constexpr bool kUseMessageQueueBroadcaster = true;

constexpr const char* kTpName = "tensor model parallel group";
constexpr const char* kDcpName = "decode context model parallel group";
constexpr const char* kPcpName = "prefill context parallel group";
constexpr const char* kPpName = "pipeline model parallel group";
constexpr const char* kDpName = "data parallel group";
constexpr const char* kEpName = "expert parallel group";

// Collective over all world ranks (vLLM's init_model_parallel_group).
std::unique_ptr<GroupCoordinator> make_group(const std::vector<std::vector<int>>& group_ranks,
                                             int local_rank, const std::string& backend,
                                             bool use_message_queue_broadcaster, const char* name) {
  return std::make_unique<GroupCoordinator>(group_ranks, local_rank, backend,
                                            /*use_device_communicator=*/true,
                                            use_message_queue_broadcaster, name);
}

// Every rank creates the groups in the same order; a failure part-way (a timeout, a dead peer)
// leaves nothing behind, so the caller may destroy the world or retry.
void create_groups(ParallelState& state, const ModelParallelLayout& layout,
                   const std::string& backend) {
  const int local_rank = state.world->local_rank();
  try {
    state.tp = make_group(layout.tp, local_rank, backend, kUseMessageQueueBroadcaster, "tp");
    state.dcp = make_group(layout.dcp, local_rank, backend, kUseMessageQueueBroadcaster, "dcp");
    state.pcp = make_group(layout.pcp, local_rank, backend, false, "pcp");
    state.pp = make_group(layout.pp, local_rank, backend, false, "pp");
    state.dp = make_group(layout.dp, local_rank, backend, false, "dp");
    state.ep = make_group(layout.ep, local_rank, backend, false, "ep");
  } catch (...) {
    parallel_state_detail::destroy_model_parallel_locked(state);
    throw;
  }
}

void initialize_locked(ParallelState& state, int tp, int pp, int pcp, int dcp, int dp,
                       const std::string& backend) {
  const char* op = "initialize_model_parallel";
  GC_CHECK(state.world != nullptr, op, ": the distributed environment is not initialized; call ",
           "init_distributed_environment first");
  GC_CHECK(state.tp == nullptr, op, ": ", kTpName, " is already initialized (call ",
           "destroy_model_parallel first)");
  const std::string resolved = backend.empty()
                                   ? state.world->backend()
                                   : parallel_state_detail::resolve_backend(backend, op);
  // Validates the sizes on every rank before any rank starts creating groups.
  const ModelParallelLayout layout =
      compute_model_parallel_layout(state.world->world_size(), tp, pp, pcp, dcp, dp);
  create_groups(state, layout, resolved);
  GC_LOG(Info, "rank ", state.world->rank(), " in world size ", state.world->world_size(),
         " is assigned as DP rank ", state.dp->rank_in_group(), ", PP rank ",
         state.pp->rank_in_group(), ", PCP rank ", state.pcp->rank_in_group(), ", TP rank ",
         state.tp->rank_in_group(), ", EP rank ", state.ep->rank_in_group());
}

void check_size(const std::unique_ptr<GroupCoordinator>& group, const char* what, int wanted) {
  GC_CHECK(group->world_size() == wanted, what,
           " already initialized, but of unexpected size: got ", group->world_size(),
           " vs. wanted ", wanted);
}

GroupCoordinator& get_group(std::unique_ptr<GroupCoordinator> ParallelState::*member,
                            const char* what) {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  return checked(state.*member, what);
}

}  // namespace

namespace parallel_state_detail {

void destroy_model_parallel_locked(ParallelState& state) {
  // vLLM's order: TP, DCP, PCP, PP, DP, EP.
  for (auto* group : {&state.tp, &state.dcp, &state.pcp, &state.pp, &state.dp, &state.ep}) {
    if (*group == nullptr) continue;
    try {
      (*group)->destroy();
    } catch (const std::exception& e) {
      GC_LOG(Warn, "destroy_model_parallel: destroying ", (*group)->unique_name(),
             " failed: ", e.what());
    }
    group->reset();
  }
}

}  // namespace parallel_state_detail

void initialize_model_parallel(int tensor_model_parallel_size, int pipeline_model_parallel_size,
                               int prefill_context_model_parallel_size,
                               int decode_context_model_parallel_size, int data_parallel_size,
                               const std::string& backend) {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  initialize_locked(state, tensor_model_parallel_size, pipeline_model_parallel_size,
                    prefill_context_model_parallel_size, decode_context_model_parallel_size,
                    data_parallel_size, backend);
}

void ensure_model_parallel_initialized(int tensor_model_parallel_size,
                                       int pipeline_model_parallel_size,
                                       int prefill_context_model_parallel_size,
                                       int decode_context_model_parallel_size,
                                       const std::string& backend) {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  checked(state.world, "world group");
  if (state.tp == nullptr) {
    initialize_locked(state, tensor_model_parallel_size, pipeline_model_parallel_size,
                      prefill_context_model_parallel_size, decode_context_model_parallel_size,
                      /*data_parallel_size=*/1, backend);
    return;
  }
  check_size(state.tp, "tensor parallel group", tensor_model_parallel_size);
  check_size(state.pp, "pipeline parallel group", pipeline_model_parallel_size);
  check_size(state.pcp, "prefill context parallel group", prefill_context_model_parallel_size);
  check_size(state.dcp, "decode context parallel group", decode_context_model_parallel_size);
}

ModelParallelShrink shrink_model_parallel(const std::vector<int>& excluded_world_ranks) {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  GroupCoordinator& world = checked(state.world, "world group");
  // The world coordinator first: it shrinks the world itself (agreement, renumbering), and every
  // other group follows that world shrink, in the order they were created.
  world.shrink(excluded_world_ranks);
  ModelParallelShrink result;
  const WorldShrink done = world_shrinks().back();
  result.excluded = done.excluded;
  result.new_rank_of = done.new_rank_of;
  result.world_size = world.world_size();
  result.rank = world.rank();
  struct Kind {
    std::unique_ptr<GroupCoordinator>* group;
    std::vector<std::vector<int>>* layout;
  };
  for (const Kind& kind :
       {Kind{&state.tp, &result.layout.tp}, Kind{&state.dcp, &result.layout.dcp},
        Kind{&state.pcp, &result.layout.pcp}, Kind{&state.pp, &result.layout.pp},
        Kind{&state.dp, &result.layout.dp}, Kind{&state.ep, &result.layout.ep}}) {
    if (*kind.group == nullptr) continue;
    (*kind.group)->shrink(excluded_world_ranks);
    *kind.layout = (*kind.group)->group_ranks();
  }
  state.node_count = get_node_count(*world.cpu_group());
  return result;
}

bool model_parallel_is_initialized() {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.tp != nullptr && state.pp != nullptr;
}

GroupCoordinator& get_tp_group() { return get_group(&ParallelState::tp, kTpName); }
GroupCoordinator& get_dcp_group() { return get_group(&ParallelState::dcp, kDcpName); }
GroupCoordinator& get_pcp_group() { return get_group(&ParallelState::pcp, kPcpName); }
GroupCoordinator& get_pp_group() { return get_group(&ParallelState::pp, kPpName); }
GroupCoordinator& get_dp_group() { return get_group(&ParallelState::dp, kDpName); }
GroupCoordinator& get_ep_group() { return get_group(&ParallelState::ep, kEpName); }

int get_tensor_model_parallel_world_size() { return get_tp_group().world_size(); }
int get_tensor_model_parallel_rank() { return get_tp_group().rank_in_group(); }
int get_decode_context_model_parallel_world_size() { return get_dcp_group().world_size(); }
int get_decode_context_model_parallel_rank() { return get_dcp_group().rank_in_group(); }

void destroy_model_parallel() {
  ParallelState& state = parallel_state_detail::state();
  std::lock_guard<std::mutex> lock(state.mutex);
  parallel_state_detail::destroy_model_parallel_locked(state);
}

}  // namespace groupcoord
