// GroupCoordinator: vLLM's parallel_state.GroupCoordinator without PyTorch. One object per
// process group owns a Gloo CPU group and a device group (and, with use_device_communicator, a
// DeviceCommunicator) and runs every collective and point-to-point protocol of vLLM's coordinator.
//
// Conventions (docs/architecture.md): method names, parameter order and defaults follow vLLM;
// Python's None is std::optional; every rank argument (src, dst) is a rank *in the group*; objects
// travel as Bytes (Python pickles them); tensor dictionaries are TensorDict.
//
// Collective rule: the constructor and make_sibling_device_group are collective over ALL world
// ranks (every world rank calls them, in the same order, with the same group_ranks, like
// torch.distributed.new_group). Every other collective method is collective over the ranks of
// this group, in the same order on every rank. Point-to-point methods pair one sender with one
// receiver, in matching order.
//
// World size 1 bypasses exactly as vLLM: all_reduce, all_gather, reduce_scatter, gather, broadcast,
// the object broadcasts and the tensor-dict protocols return their input; all_gatherv,
// reduce_scatterv, send and recv need a device communicator and throw std::invalid_argument
// ("No device communicator found") when there is none.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "groupcoord/bytes.h"
#include "groupcoord/device.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/message_queue.h"
#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"
#include "groupcoord/tensor_dict.h"
#include "groupcoord/work.h"

namespace groupcoord {

class GraphCaptureContext;  // groupcoord/cuda/graph_capture.h (CUDA builds)

/// The backend an empty `backend` argument means: "nccl" when this build has the CUDA
/// communicator and a CUDA device is visible, else "gloo".
std::string default_backend();

/// Registers the built-in communicators and backends if they are not registered yet
/// (idempotent): communicators "cpu" (and "cuda" when built with CUDA), backends "gloo" (and
/// "nccl"). Every GroupCoordinator constructor calls it; an engine calls it itself only to list or
/// replace the built-ins before making a group.
void register_builtin_device_communicators();

/// Result of irecv_tensor_dict(): the dictionary being filled, the receives to wait for, and the
/// steps to run after they complete (the all_gather reassembly), in order.
struct IrecvTensorDictResult {
  /// Null when the call was bypassed (world size 1). The postprocess steps write into it.
  std::shared_ptr<TensorDict> tensor_dict;
  std::vector<std::shared_ptr<Work>> handles;
  std::vector<std::function<void()>> postprocess;
};

/// See the file comment.
class GroupCoordinator {
 public:
  /// Collective over all world ranks: creates one CPU (Gloo) group and one device group per entry
  /// of `group_ranks` (world ranks) and keeps the one containing this rank. `backend` is "gloo" or
  /// "nccl" ("" picks nccl when CUDA devices are present, else gloo). `group_name` defaults to
  /// "anonymous"; unique_name() appends ":<n>" (the n-th group of that name in this process).
  /// Requires the world (init_world / init_distributed_environment). Throws std::invalid_argument
  /// when this rank is in no group or in several, or on an unknown backend.
  ///
  /// `timeout` (an addition to vLLM's arguments, which read it from the environment) is the
  /// deadline of every operation of the new groups; std::nullopt: world_timeout(). Every rank
  /// passes the same value.
  ///
  /// `use_message_queue_broadcaster` (vLLM's mq_broadcaster): with more than one rank the group
  /// makes a MessageQueue written by group rank 0, and broadcast_object from rank 0 goes through
  /// it (has_mq_broadcaster() says when); other sources use the CPU group.
  GroupCoordinator(std::vector<std::vector<int>> group_ranks, int local_rank, std::string backend,
                   bool use_device_communicator, bool use_message_queue_broadcaster = false,
                   std::optional<std::string> group_name = std::nullopt, bool use_all2all = false,
                   std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  /// Calls destroy(); logs instead of throwing.
  ~GroupCoordinator();
  GroupCoordinator(const GroupCoordinator&) = delete;
  GroupCoordinator& operator=(const GroupCoordinator&) = delete;

  // ---- ranks (vLLM's attributes and properties) -----------------------------------------------
  int rank() const;                       ///< world rank
  const std::vector<int>& ranks() const;  ///< world ranks of the group
  int world_size() const;                 ///< size of the group
  int local_rank() const;                 ///< rank used to pick the device
  int rank_in_group() const;
  const std::string& unique_name() const;  ///< e.g. "tp:0"
  int first_rank() const;                  ///< world rank of the group's first member
  int last_rank() const;
  bool is_first_rank() const;
  bool is_last_rank() const;
  int next_rank() const;  ///< world rank of the following member (wraps)
  int prev_rank() const;  ///< world rank of the preceding member (wraps)
  const std::vector<std::vector<int>>& group_ranks() const;
  const std::string& backend() const;  ///< "gloo" or "nccl"
  Device device() const;
  std::shared_ptr<ProcessGroup> cpu_group() const;
  /// The Gloo device group (gloo backend), else nullptr.
  std::shared_ptr<ProcessGroup> device_group() const;
  /// Null without use_device_communicator or at world size 1.
  DeviceCommunicator* device_communicator() const;

  // ---- tensor collectives ---------------------------------------------------------------------
  /// Sum across the group, out of place.
  Tensor all_reduce(const Tensor& input);
  /// Concatenation along `dim` (std::invalid_argument for a dim out of range).
  Tensor all_gather(const Tensor& input, int dim = -1);
  Tensor all_gatherv(const Tensor& input, int dim = 0,
                     const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt);
  std::vector<Tensor> all_gatherv(
      const std::vector<Tensor>& inputs, int dim = 0,
      const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt);
  Tensor reduce_scatter(const Tensor& input, int dim = -1);
  Tensor reduce_scatterv(const Tensor& input, int dim = -1,
                         const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt);
  /// Caller-provided outputs (beyond vLLM's API; DeviceCommunicator states the rules for
  /// `out`): the result is written into `out`, which is returned. At world size 1 the input is
  /// copied into `out` (nothing when `out` is the input).
  Tensor all_reduce(const Tensor& input, const Tensor& out);
  Tensor all_gather(const Tensor& input, int dim, const Tensor& out);
  Tensor reduce_scatter(const Tensor& input, int dim, const Tensor& out);
  /// The concatenation on `dst`, std::nullopt elsewhere.
  std::optional<Tensor> gather(const Tensor& input, int dst = 0, int dim = -1);
  /// In place from group rank `src`; returns `input`.
  Tensor broadcast(const Tensor& input, int src = 0);

  // ---- objects (Bytes; Python pickles) --------------------------------------------------------
  /// `obj` on `src` (required there), the received bytes elsewhere.
  Bytes broadcast_object(const std::optional<Bytes>& obj = std::nullopt, int src = 0);
  /// The same for a Bytes (beyond vLLM's API): it goes out without first being copied into a
  /// temporary std::optional, and an rvalue comes back as the source's result without a copy (the
  /// overload above copies twice on the source: a 64 KiB object cost the writer 7 µs more per
  /// call, 35 µs where the copy met memcpy's slow case). Only a Bytes chooses this overload;
  /// literals and std::nullopt keep the one above.
  template <typename B, std::enable_if_t<std::is_same_v<std::decay_t<B>, Bytes>, int> = 0>
  Bytes broadcast_object(B&& obj, int src = 0) {
    if constexpr (std::is_lvalue_reference_v<B> || std::is_const_v<std::remove_reference_t<B>>) {
      return broadcast_held_object(obj, src);  // a const one cannot be moved from either
    } else {
      return broadcast_moved_object(std::move(obj), src);
    }
  }
  /// Every rank passes a list of the same length; non-src entries are replaced.
  std::vector<Bytes> broadcast_object_list(const std::vector<Bytes>& obj_list, int src = 0);
  void send_object(const Bytes& obj, int dst);
  Bytes recv_object(int src);
  /// Non-blocking send_object; the handle keeps the buffers alive until it completes.
  std::shared_ptr<Work> isend_object(Bytes obj, int dst);

  // ---- a source that cannot send (beyond vLLM's API) -------------------------------------------
  /// What the source calls instead of the operation when it cannot produce what it would send
  /// (its serializer threw): the ranks waiting for it throw SourceFailedError (errors.h) naming
  /// the source and carrying `why` (cut to 64 KiB) at once instead of at their deadline, and the
  /// group stays in step. A broadcast's failure is itself a broadcast: when the other ranks never
  /// come, it ends at the group's deadline like any collective. broadcast_object_failed answers
  /// broadcast_object and broadcast_tensor_dict (whose metadata is a broadcast object);
  /// broadcast_object_list_failed answers broadcast_object_list; send_object_failed answers
  /// recv_object and recv_tensor_dict (dst as send_tensor_dict's: the next rank by default) and
  /// does not wait for the receiver. `src` must be this rank. The coordinator's own tensor-dict
  /// calls do this for the errors they find before sending; the Python binding does it when
  /// pickling fails.
  void broadcast_object_failed(const std::string& why, int src = 0);
  void broadcast_object_list_failed(const std::string& why, int src = 0);
  void send_object_failed(const std::string& why, std::optional<int> dst = std::nullopt);

  // ---- tensor dictionaries --------------------------------------------------------------------
  /// `tensor_dict` on `src` (required there); the received dictionary elsewhere.
  std::optional<TensorDict> broadcast_tensor_dict(
      const std::optional<TensorDict>& tensor_dict = std::nullopt, int src = 0);
  /// Blocking send (dst defaults to the next rank). Returns the dict itself when bypassed
  /// (world size 1), std::nullopt otherwise (as vLLM).
  std::optional<TensorDict> send_tensor_dict(
      const TensorDict& tensor_dict, std::optional<int> dst = std::nullopt,
      GroupCoordinator* all_gather_group = nullptr,
      const std::optional<AllGatherTensors>& all_gather_tensors = std::nullopt);
  /// Non-blocking send. The handles (metadata first) are also retained by the coordinator, with
  /// the tensors they read, until they complete: fire-and-forget callers may drop them.
  std::vector<std::shared_ptr<Work>> isend_tensor_dict(
      const TensorDict& tensor_dict, std::optional<int> dst = std::nullopt,
      GroupCoordinator* all_gather_group = nullptr,
      const std::optional<AllGatherTensors>& all_gather_tensors = std::nullopt);
  /// Blocking receive (src defaults to the previous rank); std::nullopt when bypassed.
  std::optional<TensorDict> recv_tensor_dict(
      std::optional<int> src = std::nullopt, GroupCoordinator* all_gather_group = nullptr,
      const std::optional<AllGatherTensors>& all_gather_tensors = std::nullopt);
  IrecvTensorDictResult irecv_tensor_dict(
      std::optional<int> src = std::nullopt, GroupCoordinator* all_gather_group = nullptr,
      const std::optional<AllGatherTensors>& all_gather_tensors = std::nullopt);

  // ---- point to point, barrier ----------------------------------------------------------------
  /// Barrier on the CPU group (never the device group).
  void barrier();
  void send(const Tensor& tensor, std::optional<int> dst = std::nullopt);
  Tensor recv(const Shape& size, DType dtype, std::optional<int> src = std::nullopt);
  /// recv into `out` (beyond vLLM's API, as torch.distributed.recv): its shape and dtype say
  /// what arrives; the device communicator's rules for `out` apply. Returns `out`.
  Tensor recv(const Tensor& out, std::optional<int> src = std::nullopt);

  // ---- shared-memory message queues (vLLM's shm_broadcast) ----------------------------------
  /// Collective over the group: a MessageQueue (6 chunks of 4 MiB, as vLLM) written by group rank
  /// `writer_rank` and read by every other rank (same node only; see message_queue.h).
  std::shared_ptr<MessageQueue> create_mq_broadcaster(int writer_rank = 0, bool blocking = true);
  /// vLLM's create_mq_broadcaster(writer_rank, external_writer_handle, blocking): with a handle
  /// (exported by a writer outside the group, see MessageQueue::export_handle), every rank of the
  /// group attaches as a reader (MessageQueue::create_from_process_group with a handle).
  std::shared_ptr<MessageQueue> create_mq_broadcaster(
      int writer_rank, const std::optional<MessageQueue::Handle>& external_writer_handle,
      bool blocking = true);
  /// Collective over the group: every rank but `reader_rank_in_group` writes its own queue read by
  /// that rank. The reader gets one queue per writer (group-rank order), a writer its own.
  std::vector<std::shared_ptr<MessageQueue>> create_single_reader_mq_broadcasters(
      int reader_rank_in_group = 0, bool blocking = false);
  /// True when broadcast_object from group rank 0 goes through the shared-memory queue made for
  /// use_message_queue_broadcaster (false when disabled, at world size 1, or when the queue could
  /// not be made, which every rank decides alike).
  bool has_mq_broadcaster() const;
  /// vLLM's mq_broadcaster attribute: the queue behind has_mq_broadcaster(), or null. Shared, so
  /// that a caller's reference stays valid after destroy() (which only drops the coordinator's).
  std::shared_ptr<MessageQueue> mq_broadcaster() const;

  // ---- CUDA graphs ----------------------------------------------------------------------------
  /// vLLM's graph_capture: a scope with its own capture stream (or `stream_handle`, a caller's
  /// cudaStream_t as an integer) that first waits on the current stream and is the current stream
  /// until the returned context is destroyed; collectives issued inside can be captured into a
  /// CUDA graph and replayed (include groupcoord/cuda/graph_capture.h to use the context).
  /// std::invalid_argument on a non-nccl coordinator or a build without CUDA.
  std::shared_ptr<GraphCaptureContext> graph_capture(
      std::optional<std::uintptr_t> stream_handle = std::nullopt);

  // ---- NCCL symmetric memory (docs/cuda.md) -----------------------------------------------------
  /// Collective (same shape and dtype on every rank, in the same order): an uninitialised tensor
  /// inside the device communicator's symmetric window; collectives on it skip the input copy.
  /// At world size 1 (collectives are bypassed, there is no communicator) a plain tensor on
  /// device(). std::invalid_argument when the communicator has no symmetric memory or it is off.
  Tensor symmetric_empty(const Shape& shape, DType dtype);
  /// The device communicator's symmetric-memory state and counters (disabled, with the reason,
  /// where there is no communicator).
  SymmetricMemoryStats symmetric_memory_stats() const;
  /// Collective: makes the scratch window at least `bytes` now (before CUDA graph capture).
  /// A no-op at world size 1; std::invalid_argument where symmetric memory is off.
  void reserve_symmetric_scratch(std::int64_t bytes);

  // ---- groups and MoE -------------------------------------------------------------------------
  /// Collective over all world ranks: a new device communicator with this group's membership
  /// but its own connections, for ops that run concurrently with this group's.
  std::shared_ptr<DeviceCommunicator> make_sibling_device_group(
      std::optional<std::string> group_desc = std::nullopt);
  DispatchRouterLogitsResult dispatch_router_logits(const Tensor& hidden_states,
                                                    const Tensor& router_logits,
                                                    bool is_sequence_parallel = false,
                                                    const std::vector<Tensor>& extra_tensors = {});
  DispatchResult dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                          const Tensor& topk_ids, bool is_sequence_parallel = false,
                          const std::vector<Tensor>& extra_tensors = {});
  Tensor combine(const Tensor& hidden_states, bool is_sequence_parallel = false);

  // ---- surviving a dead rank (docs/elastic.md) -------------------------------------------------
  /// Collective over the surviving world ranks (each calls it for each of its coordinators, in
  /// the same order, with the same set; shrink_model_parallel does it for parallel_state's
  /// groups): removes `excluded_world_ranks` (world ranks as numbered before the shrink) from the
  /// world and this group, in place, after a peer died or on request. The first coordinator to
  /// shrink shrinks the world (shrink_world: the survivors agree through the store, with the
  /// world timeout, and are renumbered in order); each later one follows that world shrink. The
  /// CPU and device groups are rebuilt over the survivors, the device communicator shrunk
  /// (ncclCommShrink where the loaded NCCL has it, else created anew; its symmetric memory is
  /// registered anew), the message-queue broadcaster rebuilt; rank(), ranks(), group_ranks(),
  /// rank_in_group() and world_size() then give the new numbering. Handles to the old groups,
  /// communicators and queues throw DistributedError naming the shrink; sibling communicators
  /// (make_sibling_device_group) must be made anew. std::invalid_argument as shrink_world says,
  /// or when the set differs from the world shrink this group has to follow; when the shrink
  /// fails later, the coordinator refuses every call from then on.
  void shrink(const std::vector<int>& excluded_world_ranks);

  /// Releases the communicator, then the groups (idempotent). Later collective calls throw
  /// DistributedError.
  void destroy();

  /// The live coordinator registered under `unique_name`, or nullptr (vLLM's _groups lookup).
  static GroupCoordinator* find(const std::string& unique_name);
  /// A number that changes whenever a coordinator leaves that registry (destroyed): a handle that
  /// found its coordinator with find() at generation g knows it is still there while the
  /// generation is g, without a lookup (one atomic load; the Python binding's borrowed groups).
  static std::uint64_t registry_generation();

 private:
  /// broadcast_object's collective: `obj` non-null on `src`; the received bytes elsewhere,
  /// nullopt on `src` (each public overload makes the source's result its own way).
  std::optional<Bytes> broadcast_object_from(const Bytes* obj, int src);
  Bytes broadcast_held_object(const Bytes& obj, int src);
  Bytes broadcast_moved_object(Bytes&& obj, int src);

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace groupcoord
