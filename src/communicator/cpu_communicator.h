// The "cpu" device communicator: every collective of a GroupCoordinator on host tensors, over a
// Gloo ProcessGroup (vLLM's CpuCommunicator / DeviceCommunicatorBase with the gloo backend).
//
// It runs on context.device_group, or on context.cpu_group when there is no device group, and
// accepts CPU tensors of every DType, with any strides. Collectives along any dim run as
// collectives along dim 0 of a copy with that dim moved to the front (dim_layout.h), which fixes
// vLLM's reduce_scatter on dims >= 2. all_reduce and reduce_scatter sum (fp16/bf16/fp8 accumulate
// in float in the ProcessGroup; bool sums as logical or).
//
// Collective rule: every method except send/recv/isend/irecv must be called by every rank of the
// group, in the same order, with matching shapes and dtypes, from one thread at a time. Arguments
// are validated before anything is sent, so an invalid argument passed alike on every rank makes
// every rank throw std::invalid_argument without touching the group. A check that only one rank
// can fail (e.g. all_gatherv's sizes[rank] against its own input) makes that rank throw while
// the others wait and, after the group's timeout, fail with TimeoutError; dispatch is the
// exception: it shares validity in its counts exchange, so every rank throws at once.
//
// Point to point: send/recv/isend/irecv may be called from any thread. They use one tag
// (kTensorTag) on the group, distinct from tag 0, so tensors do not mix with other traffic on a
// shared CPU group; transfers between two ranks are matched in the order they were posted.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "communicator/dispatch_inputs.h"
#include "communicator/in_flight_transfers.h"
#include "communicator/naive_all2all.h"
#include "communicator/op_label.h"
#include "groupcoord/device_communicator.h"

namespace groupcoord {

/// Builds the "cpu" communicator (registered under "cpu" by register_builtin_device_communicators,
/// in the coordinator layer). std::invalid_argument when the context has no group, or a non-CPU
/// device, or when cpu_group and device_group differ in membership or rank order.
std::unique_ptr<DeviceCommunicator> make_cpu_communicator(const DeviceCommunicatorContext& context);

/// Gloo-backed communicator over host memory. See the file comment for the rules.
class CpuCommunicator final : public DeviceCommunicator {
 public:
  /// Tag of the communicator's point-to-point tensor stream ("GCTN").
  static constexpr std::uint32_t kTensorTag = 0x4e544347;

  /// See make_cpu_communicator.
  explicit CpuCommunicator(const DeviceCommunicatorContext& context);
  /// Calls destroy(); logs rather than throws.
  ~CpuCommunicator() override;

  // ---- DeviceCommunicator overrides (documented there; notes only where this one differs) ----

  /// "cpu".
  std::string backend_name() const override { return "cpu"; }
  int rank_in_group() const override { return rank_; }
  int world_size() const override { return world_size_; }

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
  /// Into `out`: all_reduce and all_gather along dim 0 of a contiguous input allocate nothing;
  /// reduce_scatter sums into a temporary (Gloo's reduce-scatter is not used, see the file
  /// comment).
  Tensor all_reduce(const Tensor& input, const Tensor& out) override;
  Tensor all_gather(const Tensor& input, int dim, const Tensor& out) override;
  Tensor reduce_scatter(const Tensor& input, int dim, const Tensor& out) override;

  void send(const Tensor& tensor, std::optional<int> dst = std::nullopt) override;
  Tensor recv(const Shape& shape, DType dtype, std::optional<int> src = std::nullopt) override;
  /// Receives straight into `out` (contiguous, on the CPU).
  Tensor recv(const Tensor& out, std::optional<int> src = std::nullopt) override;
  /// A non-contiguous tensor is sent from a contiguous copy, which the Work keeps alive.
  std::shared_ptr<Work> isend(const Tensor& tensor, int dst) override;
  /// `tensor` must be contiguous (as torch requires); it is written when the Work completes.
  std::shared_ptr<Work> irecv(const Tensor& tensor, int src) override;

  DispatchRouterLogitsResult dispatch_router_logits(
      const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel = false,
      const std::vector<Tensor>& extra_tensors = {}) override;
  DispatchResult dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                          const Tensor& topk_ids, bool is_sequence_parallel = false,
                          const std::vector<Tensor>& extra_tensors = {}) override;
  Tensor combine(const Tensor& hidden_states, bool is_sequence_parallel = false) override;

  /// Marks the communicator destroyed and waits (bounded) for its in-flight isend/irecv.
  /// Idempotent. The groups belong to the coordinator and are left as they are. Not to be called
  /// concurrently with other methods.
  void destroy() override;

 private:
  /// The group, or DistributedError naming the group and `op` after destroy().
  ProcessGroup& group(const char* op) const;
  /// Label for error messages.
  comm::OpLabel label(const char* op) const { return comm::OpLabel{name_, op}; }

  /// all_gather of one validated input along the wrapped dim `dim`, into `out` when given
  /// (checked by the caller).
  Tensor gather_uniform(ProcessGroup& group, const Tensor& input, int dim,
                        const Tensor& out = Tensor());
  /// all_gatherv's checks of input `index` of `count` (a host tensor, its own size against
  /// `sizes`); returns its wrapped dim.
  int check_gatherv_input(const comm::OpLabel& where, const Tensor& input, std::size_t index,
                          std::size_t count, int dim,
                          const std::optional<std::vector<std::int64_t>>& sizes) const;
  /// all_gatherv of one validated input with non-uniform `sizes`.
  Tensor gather_varying(ProcessGroup& group, const Tensor& input, int dim,
                        const std::vector<std::int64_t>& sizes);
  /// Sum across ranks, then this rank's slice of the wrapped dim `dim`, where rank r's slice is
  /// lengths[r] entries long (they sum to the dim's size), into `out` when given (checked by the
  /// caller). Along dim 0 it is the group's reduce_scatter (each rank reduces only its slice);
  /// along other dims an all_reduce of the whole input and a slice.
  Tensor sum_and_slice(ProcessGroup& group, const Tensor& input, int dim,
                       const std::vector<std::int64_t>& lengths, const Tensor& out = Tensor());

  std::string name_;
  std::shared_ptr<ProcessGroup> group_;
  int rank_ = 0;
  int world_size_ = 1;
  bool use_all2all_ = false;
  std::unique_ptr<comm::NaiveAll2All> all2all_;
  comm::InFlightTransfers in_flight_;
  std::atomic<bool> destroyed_{false};
};

}  // namespace groupcoord
