// The "naive" all-to-all manager behind dispatch/combine (vLLM's use_all2all with the
// allgather-reducescatter backend): before the experts run, every rank gathers every rank's
// tokens; afterwards every rank sums the experts' outputs and keeps its own tokens.
//
//   dispatch: exchange token counts (dim 0) over the CPU group, then all_gatherv each tensor
//             along dim 0 with those counts; the counts are kept for combine.
//   combine:  reduce_scatterv along dim 0 with the counts of the last dispatch.
//
// Sequence parallelism (is_sequence_parallel): vLLM's sequence-parallel variant first splits the
// tokens across the TP ranks so that each rank dispatches only its shard. Here every rank simply
// passes its shard: the counts are exchanged per rank either way, so the semantics for this
// manager are identical and the flag changes nothing.
//
// Collective rule: every rank of the group calls dispatch/combine in the same order, with the
// same number of extra tensors; token counts may differ per rank.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "communicator/dispatch_inputs.h"
#include "groupcoord/device_communicator.h"
#include "groupcoord/process_group.h"

namespace groupcoord {
namespace comm {

/// dispatch/combine for one communicator.
class NaiveAll2All {
 public:
  /// `communicator` (which must outlive this object) runs the gathers and scatters on tensors of
  /// `device`; `count_group` (the CPU group) carries the token counts; `name` names the group in
  /// errors. The cpu and the cuda communicator both use it, so dispatch/combine exist once.
  NaiveAll2All(DeviceCommunicator& communicator, Device device,
               std::shared_ptr<ProcessGroup> count_group, std::string name);

  /// Gathers every rank's `tensors` along dim 0. tensors[0] defines the token count; every
  /// tensor must have at least one dim and that many rows; `names` name them in errors. An
  /// invalid input on any rank makes every rank throw std::invalid_argument (the counts
  /// exchange carries a flag), so a mistake on one rank never leaves the others waiting.
  std::vector<Tensor> dispatch(const char* op, const std::vector<Tensor>& tensors,
                               const std::vector<std::string>& names);

  /// dispatch() as the gather of the shared dispatch packing (dispatch_inputs.h); valid while this
  /// object lives.
  DispatchGather as_gather();

  /// Sums `hidden_states` across ranks and returns this rank's rows, with the counts of the last
  /// dispatch. std::invalid_argument when no dispatch came first or when dim 0 is not the sum of
  /// the counts.
  Tensor combine(const Tensor& hidden_states);

 private:
  /// Collective: every rank's token count, or -1 from a rank whose inputs were invalid.
  std::vector<std::int64_t> exchange_counts(std::int64_t local_count);

  DeviceCommunicator& communicator_;
  Device device_;
  std::shared_ptr<ProcessGroup> count_group_;
  std::string name_;
  /// Token counts of the last dispatch, one per rank.
  std::optional<std::vector<std::int64_t>> last_counts_;
};

}  // namespace comm
}  // namespace groupcoord
