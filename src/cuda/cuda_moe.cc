// CudaCommunicator's MoE dispatch/combine: the inputs unchanged without use_all2all, else the
// naive all-to-all of the cpu communicator (communicator/naive_all2all.h) on device tensors:
// token counts travel over the CPU group, the tensors through all_gatherv / reduce_scatterv.
// is_sequence_parallel changes nothing here, for the reason given in naive_all2all.h.
#include <exception>
#include <numeric>

#include "communicator/dispatch_inputs.h"
#include "communicator/sizes.h"
#include "cuda/cuda_communicator.h"
#include "groupcoord/check.h"

namespace groupcoord {

namespace {

// Marks a rank whose inputs failed validation in the counts exchange.
constexpr std::int64_t kInvalidCount = -1;

}  // namespace

std::vector<Tensor> CudaCommunicator::dispatch_tensors(const char* op,
                                                       const std::vector<Tensor>& tensors,
                                                       const std::vector<std::string>& names) {
  const comm::OpLabel where = label(op);
  std::exception_ptr local_error;
  try {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      check_tensor(where, tensors[i], names[i].c_str());
      GC_CHECK(tensors[i].dim() >= 1, where, ": ", names[i],
               " must have a token dim (dim 0), got a 0-d tensor");
      GC_CHECK(tensors[i].size(0) == tensors[0].size(0), where, ": ", names[i], " has ",
               tensors[i].size(0), " rows (dim 0) but ", names[0], " has ", tensors[0].size(0),
               " tokens");
    }
  } catch (const std::invalid_argument&) {
    local_error = std::current_exception();
  }
  // Every rank takes part in the exchange even with bad inputs, so all of them learn about it.
  const std::int64_t local = local_error ? kInvalidCount : tensors[0].size(0);
  std::vector<std::int64_t> counts(world_size_);
  cpu_group_->all_gather(&local, counts.data(), 1, DType::Int64);
  if (local_error) std::rethrow_exception(local_error);
  for (std::size_t r = 0; r < counts.size(); ++r) {
    GC_CHECK(counts[r] != kInvalidCount, where, ": rank ", r,
             " of the group passed invalid inputs (see its error)");
  }
  std::vector<Tensor> gathered = all_gatherv(tensors, 0, counts);
  last_counts_ = counts;
  return gathered;
}

DispatchRouterLogitsResult CudaCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  nccl("dispatch_router_logits");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, router_logits, extra_tensors};
  return comm::dispatch_router_logits_via(gather_for_dispatch(), hidden_states, router_logits,
                                          extra_tensors);
}

DispatchResult CudaCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                          const Tensor& topk_ids, bool is_sequence_parallel,
                                          const std::vector<Tensor>& extra_tensors) {
  nccl("dispatch");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return comm::dispatch_via(gather_for_dispatch(), hidden_states, topk_weights, topk_ids,
                            extra_tensors);
}

comm::DispatchGather CudaCommunicator::gather_for_dispatch() {
  return [this](const char* op, const std::vector<Tensor>& tensors,
                const std::vector<std::string>& names) {
    return dispatch_tensors(op, tensors, names);
  };
}

Tensor CudaCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  const comm::OpLabel where = label("combine");
  nccl(where.op);  // throws after destroy()
  if (!use_all2all_) return hidden_states;
  GC_CHECK(last_counts_.has_value(), where,
           ": no dispatch came first (combine returns the tokens of the last dispatch)");
  check_tensor(where, hidden_states, "hidden_states");
  GC_CHECK(hidden_states.dim() >= 1, where, ": hidden_states must have a token dim (dim 0)");
  const std::int64_t total =
      std::accumulate(last_counts_->begin(), last_counts_->end(), std::int64_t{0});
  GC_CHECK(hidden_states.size(0) == total, where, ": hidden_states has ", hidden_states.size(0),
           " rows (dim 0) but the last dispatch gathered ", total, " tokens");
  return reduce_scatterv(hidden_states, 0, *last_counts_);
}

}  // namespace groupcoord
