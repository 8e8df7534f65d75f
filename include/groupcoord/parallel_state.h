// parallel_state: vLLM's module-level functions that build the world and the model-parallel
// groups, and the getters engines call everywhere (get_tp_group(), ...).
//
// Layout (vLLM): world ranks are arranged as arange(W).reshape(-1, DP, PP, PCP, TP) — external DP
// outermost, TP innermost. TP groups are the last axis; DCP groups split each TP group into
// contiguous chunks of DCP ranks (DCP must divide TP); PCP, PP and DP groups run along their own
// axis (that axis moved last, the rest in row-major order); EP groups span DP x PCP x TP (one per
// PP stage and external-DP replica). docs/parallel_state.md lists the exact orders with examples.
//
// Collective rule: init_distributed_environment, initialize_model_parallel,
// ensure_model_parallel_initialized (when it initializes), in_the_same_node_as and
// get_node_count(group) must be called by every rank concerned (all world ranks, or every rank of
// `group`), in the same order, with the same arguments. The getters and the destroy functions are
// local.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/default_timeout.h"
#include "groupcoord/group_coordinator.h"

namespace groupcoord {

/// Collective over all world ranks: rendezvous and the world group ("world" coordinator).
/// `backend` "" picks nccl when this build has CUDA and a CUDA device is visible, else gloo
/// (default_backend()); any name of the backend table (register_backend) is accepted.
/// `local_rank` -1 takes the launcher's (world_info().local_rank).
/// `timeout` bounds the rendezvous and is the default timeout of every group. If the world
/// already exists (this function or init_world ran before), only the "world" coordinator is
/// created, and a second call with the same world is a no-op, as in vLLM; explicit world_size,
/// rank or backend values that disagree with the existing world throw std::invalid_argument. Also
/// counts the nodes (get_node_count()).
void init_distributed_environment(int world_size = -1, int rank = -1,
                                  const std::string& distributed_init_method = "env://",
                                  int local_rank = -1, const std::string& backend = "",
                                  std::chrono::milliseconds timeout = default_timeout());

/// Collective over all world ranks: creates the coordinators "tp", "dcp", "pcp", "pp", "dp" and
/// "ep", in that order (vLLM's), with device communicators; `backend` "" uses the world group's.
/// Throws std::invalid_argument, on every rank and before any group is created, before
/// init_distributed_environment, when already initialized, or for sizes that
/// compute_model_parallel_layout rejects. If creating a group fails (TimeoutError,
/// DistributedError), the groups created so far are destroyed before the error propagates.
void initialize_model_parallel(int tensor_model_parallel_size = 1,
                               int pipeline_model_parallel_size = 1,
                               int prefill_context_model_parallel_size = 1,
                               int decode_context_model_parallel_size = 1,
                               int data_parallel_size = 1, const std::string& backend = "");

/// initialize_model_parallel (with data_parallel_size 1) unless already initialized; when it is,
/// checks that the TP, PP, PCP and DCP sizes match and throws std::invalid_argument otherwise.
/// Requires init_distributed_environment.
void ensure_model_parallel_initialized(int tensor_model_parallel_size,
                                       int pipeline_model_parallel_size,
                                       int prefill_context_model_parallel_size = 1,
                                       int decode_context_model_parallel_size = 1,
                                       const std::string& backend = "");

/// True when the model-parallel groups exist (vLLM: the TP and PP groups; all six are created and
/// destroyed together here).
bool model_parallel_is_initialized();

/// The groups. Each throws std::invalid_argument naming the group before it exists.
GroupCoordinator& get_world_group();
GroupCoordinator& get_tp_group();
GroupCoordinator& get_pp_group();
GroupCoordinator& get_dp_group();
GroupCoordinator& get_ep_group();
GroupCoordinator& get_dcp_group();
GroupCoordinator& get_pcp_group();

/// vLLM's shortcuts: size of / this rank in the TP and DCP groups.
int get_tensor_model_parallel_world_size();
int get_tensor_model_parallel_rank();
int get_decode_context_model_parallel_world_size();
int get_decode_context_model_parallel_rank();

/// The number of nodes the world spans, counted once by init_distributed_environment (vLLM's
/// get_node_count()). Throws std::invalid_argument before it.
int get_node_count();

/// Destroys the model-parallel groups (not the world). Local and idempotent; call it after the
/// last collective on those groups.
void destroy_model_parallel();
/// Destroys the model-parallel groups if still there, the world group and the world (world.h's
/// destroy_world). Local and idempotent; world rank 0 hosts the store, so call it after the last
/// collective every rank takes part in (a world barrier is a good last collective).
void destroy_distributed_environment();

/// Collective over `group` (a Gloo group): for each rank of the group, whether it runs on the same
/// node as the group's `source_rank` (a rank in the group), as vLLM's in_the_same_node_as. "Same
/// node" means the same kernel boot id (/proc/sys/kernel/random/boot_id) and the same host name;
/// vLLM probes POSIX shared memory instead, which agrees except across containers that share a
/// host name but not /dev/shm. std::invalid_argument for a source_rank out of range.
std::vector<bool> in_the_same_node_as(ProcessGroup& group, int source_rank = 0);
/// Collective over `group`: the number of distinct nodes (as above) its ranks run on.
int get_node_count(ProcessGroup& group);

/// The rank lists of each group kind (world ranks), in the order the groups are created.
struct ModelParallelLayout {
  std::vector<std::vector<int>> tp, pp, dcp, pcp, dp, ep;
};
/// The pure layout computation behind initialize_model_parallel, exposed for tests and tools: the
/// groups of each kind for a world of `world_size` ranks. Throws std::invalid_argument naming the
/// sizes when one is not positive, when DP x PP x PCP x TP does not divide world_size, or when DCP
/// does not divide TP.
ModelParallelLayout compute_model_parallel_layout(int world_size, int tensor_model_parallel_size,
                                                  int pipeline_model_parallel_size,
                                                  int prefill_context_model_parallel_size,
                                                  int decode_context_model_parallel_size,
                                                  int data_parallel_size);

// ---- surviving a dead rank (docs/elastic.md) --------------------------------------------------

/// What shrink_model_parallel did.
struct ModelParallelShrink {
  std::vector<int> excluded;     ///< world ranks removed, as numbered before the shrink
  std::vector<int> new_rank_of;  ///< old world rank -> new world rank, -1 for the excluded
  int world_size = 0;            ///< the world's size after the shrink
  int rank = -1;                 ///< this process's world rank after the shrink
  /// Each kind's groups after the shrink (world ranks, new numbering; a group that lost every
  /// member is gone, the others may now differ in size); empty without the model-parallel groups.
  ModelParallelLayout layout;
};

/// Collective over the surviving world ranks, after a peer died (RankFailureError names it under
/// RankFailurePolicy::kIdentify; find_dead_ranks() otherwise) or on request: every survivor calls
/// it with the same `excluded_world_ranks` (world ranks before the shrink). Shrinks the world
/// coordinator, then TP, DCP, PCP, PP, DP and EP when they exist (GroupCoordinator::shrink: the
/// survivors agree through the store, groups and communicators are rebuilt, ranks renumbered in
/// order), recounts the nodes and reports the new layout. The getters keep returning the same
/// coordinators, now over the survivors. Errors as GroupCoordinator::shrink; a group whose shrink
/// failed refuses every later call (destroy_distributed_environment still works).
ModelParallelShrink shrink_model_parallel(const std::vector<int>& excluded_world_ranks);

}  // namespace groupcoord
