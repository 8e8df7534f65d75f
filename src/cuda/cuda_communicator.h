// The "cuda" device communicator: every collective of a GroupCoordinator on CUDA tensors, over
// NCCL (vLLM's CudaCommunicator with its PyNcclCommunicator). Registered under "cuda" by
// register_builtin_device_communicators (group_coordinator.h) in builds with CUDA.
//
// It builds its own NcclComm from context.cpu_group (collective) on context.device, installs the
// CUDA allocator and copy kernels if absent (init_cuda_layer), and accepts tensors on that device
// of every DType, with any strides. Each operation runs on the current stream of the device
// (groupcoord/cuda/stream.h) and returns without waiting for the GPU: results are ready in
// stream order, and outputs come from the CUDA allocator, stream-ordered. Collectives along a dim
// other than 0 move that dim to the front with the strided-copy kernel, run the dim-0 NCCL call
// and move it back. Sums use ncclSum (bool: logical or); see nccl_dtype.h for the types.
//
//   all_reduce      ncclAllReduce (out of place)
//
// With NCCL symmetric memory on (GROUPCOORD_USE_NCCL_SYMM_MEM=1, agreed by every rank; see
// cuda/symmetric/symmetric_config.h), all_gather, reduce_scatter, their v-variants with uniform
// sizes, and all_reduce where vLLM's table says so, run on the communicator's registered scratch
// window: the input is copied in (skipped for a symmetric_empty tensor), NCCL runs window to
// window, and the result is copied out into a new tensor, so results never alias the scratch.
//
//   all_gather      ncclAllGather
//   all_gatherv     ncclAllGather when the sizes are uniform, else one ncclBroadcast per rank
//                   inside ncclGroupStart/End
//   reduce_scatter  ncclReduceScatter
//   reduce_scatterv ncclReduceScatter when uniform, else one ncclReduce per rank in a group
//   gather          ncclSend to dst / ncclRecv from every rank on dst, in a group
//   broadcast       ncclBroadcast in place
//   send/recv       ncclSend/ncclRecv, enqueued (stream-ordered, as vLLM's pynccl)
//   isend/irecv     as send/recv, with a Work backed by a CUDA event
//   dispatch/combine  the naive all-to-all: all_gatherv / reduce_scatterv along dim 0 with the
//                   token counts exchanged over cpu_group (as the cpu communicator)
//
// Shrink (GroupCoordinator::shrink): shrink() keeps the NCCL connections where it can. Nobody
// excluded (only world ranks renumbered): the same NcclComm, moved onto the new CPU group, and the
// same symmetric memory (its windows stay registered on that communicator) pass to the new
// communicator, and this one lets go of them without destroying them. Otherwise
// NcclComm::shrink (ncclCommShrink); the new communicator registers its symmetric windows anew
// on the shrunk NCCL communicator, and this one's NcclComm is abandoned (aborted, windows kept).
// Either way this communicator is retired: its later calls throw DistributedError.
//
// Collective rule: every method except send/recv/isend/irecv must be called by every rank of the
// group, in the same order, with matching shapes and dtypes. Arguments are checked before
// anything is enqueued. Nothing hangs: a peer that does not take part makes the watchdog abort
// the communicator after the group's timeout (nccl_comm.h), and later calls, synchronize() and
// Work::wait() throw TimeoutError naming the group and the operation.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "communicator/dispatch_inputs.h"
#include "communicator/naive_all2all.h"
#include "communicator/op_label.h"
#include "cuda/nccl/nccl_comm.h"
#include "cuda/symmetric/symmetric_memory.h"
#include "cuda/symmetric/symmetric_scratch_layout.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

/// Builds the "cuda" communicator (collective over context.cpu_group). std::invalid_argument
/// when the context has no cpu_group or its device is not a CUDA device this process sees;
/// DistributedError / TimeoutError when NCCL cannot be loaded or initialised (see NcclComm).
std::unique_ptr<DeviceCommunicator> make_cuda_communicator(
    const DeviceCommunicatorContext& context);

/// NCCL-backed communicator over device memory. See the file comment for the rules.
class CudaCommunicator final : public DeviceCommunicator {
 public:
  /// See make_cuda_communicator.
  explicit CudaCommunicator(const DeviceCommunicatorContext& context);
  /// Calls destroy(); logs rather than throws.
  ~CudaCommunicator() override;

  std::string backend_name() const override { return "cuda"; }
  int rank_in_group() const override { return rank_; }
  int world_size() const override { return world_size_; }
  /// The device every tensor must live on.
  Device device() const { return device_; }

  Tensor all_reduce(const Tensor& input) override;
  Tensor all_gather(const Tensor& input, int dim = -1) override;
  std::vector<Tensor> all_gatherv(
      const std::vector<Tensor>& inputs, int dim = 0,
      const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt) override;
  Tensor all_gatherv(const Tensor& input, int dim = 0,
                     const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt) override;
  Tensor reduce_scatter(const Tensor& input, int dim = -1) override;
  Tensor reduce_scatterv(
      const Tensor& input, int dim = -1,
      const std::optional<std::vector<std::int64_t>>& sizes = std::nullopt) override;
  std::optional<Tensor> gather(const Tensor& input, int dst = 0, int dim = -1) override;
  Tensor broadcast(const Tensor& tensor, int src = 0) override;
  /// Into `out`: contiguous inputs (all_gather / reduce_scatter: along dim 0) allocate nothing;
  /// the symmetric path copies its result out of the scratch into `out`.
  Tensor all_reduce(const Tensor& input, const Tensor& out) override;
  Tensor all_gather(const Tensor& input, int dim, const Tensor& out) override;
  Tensor reduce_scatter(const Tensor& input, int dim, const Tensor& out) override;

  /// Enqueues the send and returns (the tensor is kept alive until it has been sent).
  void send(const Tensor& tensor, std::optional<int> dst = std::nullopt) override;
  /// Enqueues the receive into a new tensor and returns it (valid in stream order).
  Tensor recv(const Shape& shape, DType dtype, std::optional<int> src = std::nullopt) override;
  /// Enqueues the receive into `out` (contiguous, on this device) and returns it.
  Tensor recv(const Tensor& out, std::optional<int> src = std::nullopt) override;
  /// A non-contiguous tensor is sent from a contiguous copy, which the Work keeps alive.
  /// Not allowed during CUDA graph capture (the Work's event could not be waited on).
  std::shared_ptr<Work> isend(const Tensor& tensor, int dst) override;
  /// `tensor` must be contiguous; it is written when the Work completes.
  std::shared_ptr<Work> irecv(const Tensor& tensor, int src) override;

  DispatchRouterLogitsResult dispatch_router_logits(
      const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel = false,
      const std::vector<Tensor>& extra_tensors = {}) override;
  DispatchResult dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                          const Tensor& topk_ids, bool is_sequence_parallel = false,
                          const std::vector<Tensor>& extra_tensors = {}) override;
  Tensor combine(const Tensor& hidden_states, bool is_sequence_parallel = false) override;

  /// NCCL symmetric memory (cuda/symmetric/symmetric_memory.h).
  SymmetricMemoryStats symmetric_memory_stats() const override;
  Tensor symmetric_empty(const Shape& shape, DType dtype) override;
  void reserve_symmetric_scratch(std::int64_t bytes) override;
  /// The NCCL communicator (tests call it directly).
  cuda::NcclComm& nccl_comm() const { return nccl("nccl_comm"); }
  /// The NCCL symmetric memory (tests reach the windows through it).
  cuda::SymmetricMemory& symmetric_memory() const {
    nccl("symmetric_memory");  // throws once destroyed
    return *symmetric_;
  }

  /// Waits on the host until the work enqueued so far on the device's current stream has run,
  /// bounded by the group's timeout. Throws TimeoutError / DistributedError naming the group and
  /// the operation when the communicator broke meanwhile (not collective).
  void synchronize();

  /// Collective over the survivors (context.cpu_group, already shrunk): a communicator over
  /// them made from this one's NCCL communicator, or nullptr on every survivor when it cannot be
  /// kept (NcclComm::shrink says when; the caller then creates a fresh one). Retires this one
  /// (see the file comment). Not to be called concurrently with other methods.
  std::unique_ptr<DeviceCommunicator> shrink(const std::vector<int>& excluded,
                                             const DeviceCommunicatorContext& context) override;

  /// Releases the NCCL communicator (bounded, see NcclComm::destroy). Idempotent; later calls
  /// throw DistributedError. Not to be called concurrently with other methods.
  void destroy() override;

 private:
  /// A communicator around `nccl` (already over context.cpu_group), as the public constructor
  /// builds one around a communicator it creates (nccl == nullptr: it creates it). `symmetric`,
  /// when given, is `nccl`'s symmetric memory taken over from a communicator retired by a
  /// shrink; otherwise a new one is agreed on (collective) and registers its own windows.
  CudaCommunicator(const DeviceCommunicatorContext& context, std::shared_ptr<cuda::NcclComm> nccl,
                   std::unique_ptr<cuda::SymmetricMemory> symmetric = nullptr);

  /// The NCCL communicator, or DistributedError naming the group and `op` after destroy().
  cuda::NcclComm& nccl(const char* op) const;
  comm::OpLabel label(const char* op) const { return comm::OpLabel{name_, op}; }
  /// std::invalid_argument unless `tensor` is defined and on device_; `what` names it.
  void check_tensor(const comm::OpLabel& where, const Tensor& tensor, const char* what) const;

  /// reduce_scatter's checks (tensor, dim, dtype, divisibility); returns the wrapped dim.
  int check_scatter(const comm::OpLabel& where, const Tensor& input, int dim);
  /// The result of a dim-0 collective (`front`) in the caller's layout: moved back to `dim` and,
  /// when `out` is defined and was not written directly, copied into it.
  Tensor finish_front(const Tensor& front, int dim, const Tensor& out);
  /// all_reduce of one checked input into `out` (undefined: a new tensor).
  Tensor reduce_all(const comm::OpLabel& where, const Tensor& input, const Tensor& out);
  /// all_gather of one checked input along the wrapped dim `dim`, into `out` when defined.
  Tensor gather_uniform(const Tensor& input, int dim, const Tensor& out = Tensor());
  /// all_gatherv's checks of input `index` of `count` (its own size against `sizes`); returns its
  /// wrapped dim.
  int check_gatherv_input(const comm::OpLabel& where, const Tensor& input, std::size_t index,
                          std::size_t count, int dim,
                          const std::optional<std::vector<std::int64_t>>& sizes) const;
  /// all_gatherv of one checked input with non-uniform `sizes` (grouped broadcasts).
  Tensor gather_varying(const Tensor& input, int dim, const std::vector<std::int64_t>& sizes);
  /// reduce_scatter of one checked input along the wrapped dim `dim` (equal shares), into `out`
  /// when defined.
  Tensor scatter_uniform(const comm::OpLabel& where, const Tensor& input, int dim,
                         const Tensor& out = Tensor());
  /// Enqueues ncclRecv from `peer` into the checked `out` on the current stream; returns `out`.
  Tensor receive_into(const comm::OpLabel& where, cuda::NcclComm& nc, const Tensor& out, int peer);
  /// reduce_scatterv with non-uniform `sizes` (grouped reduces).
  Tensor scatter_varying(const comm::OpLabel& where, const Tensor& input, int dim,
                         const std::vector<std::int64_t>& sizes);
  /// The symmetric-memory paths: each returns std::nullopt when the call takes the regular path
  /// (off, unsupported dtype, table says no, no scratch). `front` has the collective's dim first
  /// and is on device_; `out`, when defined, receives the result in that layout.
  std::optional<Tensor> symmetric_all_gather(const Tensor& front, const Tensor& out);
  std::optional<Tensor> symmetric_reduce_scatter(const comm::OpLabel& where, const Tensor& front,
                                                 const Tensor& out);
  std::optional<Tensor> symmetric_all_reduce(const comm::OpLabel& where, const Tensor& input,
                                             const Tensor& out);
  /// How one routed call uses the scratch.
  struct SymmetricPlan {
    bool zero_copy = false;  ///< the input lies in a pool window: no input copy
    Tensor out;              ///< where the result goes (undefined: a new tensor)
    cuda::ScratchLayout layout;
    Shape output_shape;
  };
  /// The NCCL call of a routed collective, from `send` to `recv` (both in windows).
  using SymmetricCall = std::function<ncclResult_t(const cuda::NcclApi&, ncclComm_t, const void*,
                                                   void*, cudaStream_t)>;
  /// Leases the scratch, stages `input` (unless zero-copy), enqueues `call` and copies the result
  /// out; std::nullopt (the regular path) when the scratch cannot be leased.
  std::optional<Tensor> run_symmetric(const char* op, const Tensor& input,
                                      const SymmetricPlan& plan, const SymmetricCall& call);
  /// True when `tensor` is contiguous and inside this communicator's symmetric_empty pool.
  bool in_symmetric_pool(const Tensor& tensor) const;

  std::string name_;
  Device device_;
  std::shared_ptr<ProcessGroup> cpu_group_;
  std::shared_ptr<cuda::NcclComm> nccl_;
  /// Declared after nccl_, so destroyed first: it refers to the communicator (and detaches from
  /// it when it goes, after destroy() has deregistered its windows).
  std::unique_ptr<cuda::SymmetricMemory> symmetric_;
  int rank_ = 0;
  int world_size_ = 1;
  bool use_all2all_ = false;
  /// dispatch/combine with use_all2all: the cpu communicator's manager, on this communicator's
  /// all_gatherv / reduce_scatterv, token counts over the CPU group.
  std::unique_ptr<comm::NaiveAll2All> all2all_;
  std::atomic<bool> destroyed_{false};
  /// Set (before destroyed_) when a shrink replaced this communicator: its errors say so.
  bool replaced_by_shrink_ = false;
};

}  // namespace groupcoord
