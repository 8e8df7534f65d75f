// CpuCommunicator's MoE dispatch/combine: the inputs unchanged without use_all2all (vLLM without
// an all2all manager), else the naive manager of naive_all2all.h. is_sequence_parallel is
// accepted and changes nothing here (see naive_all2all.h for why).
#include "communicator/cpu_communicator.h"
#include "communicator/dispatch_inputs.h"

namespace groupcoord {

DispatchRouterLogitsResult CpuCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  group("dispatch_router_logits");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, router_logits, extra_tensors};
  return comm::dispatch_router_logits_via(all2all_gather(), hidden_states, router_logits,
                                          extra_tensors);
}

DispatchResult CpuCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                         const Tensor& topk_ids, bool is_sequence_parallel,
                                         const std::vector<Tensor>& extra_tensors) {
  group("dispatch");  // throws after destroy()
  if (!use_all2all_) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  return comm::dispatch_via(all2all_gather(), hidden_states, topk_weights, topk_ids, extra_tensors);
}

comm::DispatchGather CpuCommunicator::all2all_gather() {
  return [this](const char* op, const std::vector<Tensor>& tensors,
                const std::vector<std::string>& names) {
    return all2all_->dispatch(op, tensors, names);
  };
}

Tensor CpuCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  group("combine");  // throws after destroy()
  if (!use_all2all_) return hidden_states;
  return all2all_->combine(hidden_states);
}

}  // namespace groupcoord
