// CpuCommunicator's MoE dispatch/combine: the inputs unchanged without use_all2all (vLLM without
// an all2all manager), else the naive manager of naive_all2all.h. is_sequence_parallel is
// accepted and changes nothing here (see naive_all2all.h for why).
#include "communicator/cpu_communicator.h"

namespace groupcoord {

namespace {

// Appends extra_tensors and their names ("extra_tensors[i]").
void append_extras(const std::vector<Tensor>& extras, std::vector<Tensor>& tensors,
                   std::vector<std::string>& names) {
  for (std::size_t i = 0; i < extras.size(); ++i) {
    tensors.push_back(extras[i]);
    names.push_back("extra_tensors[" + std::to_string(i) + "]");
  }
}

}  // namespace

DispatchRouterLogitsResult CpuCommunicator::dispatch_router_logits(
    const Tensor& hidden_states, const Tensor& router_logits, bool is_sequence_parallel,
    const std::vector<Tensor>& extra_tensors) {
  const char* op = "dispatch_router_logits";
  group(op);  // throws after destroy()
  if (!use_all2all_) return {hidden_states, router_logits, extra_tensors};
  std::vector<Tensor> tensors{hidden_states, router_logits};
  std::vector<std::string> names{"hidden_states", "router_logits"};
  append_extras(extra_tensors, tensors, names);
  std::vector<Tensor> out = all2all_->dispatch(op, tensors, names);
  return {out[0], out[1], std::vector<Tensor>(out.begin() + 2, out.end())};
}

DispatchResult CpuCommunicator::dispatch(const Tensor& hidden_states, const Tensor& topk_weights,
                                         const Tensor& topk_ids, bool is_sequence_parallel,
                                         const std::vector<Tensor>& extra_tensors) {
  const char* op = "dispatch";
  group(op);  // throws after destroy()
  if (!use_all2all_) return {hidden_states, topk_weights, topk_ids, extra_tensors};
  std::vector<Tensor> tensors{hidden_states, topk_weights, topk_ids};
  std::vector<std::string> names{"hidden_states", "topk_weights", "topk_ids"};
  append_extras(extra_tensors, tensors, names);
  std::vector<Tensor> out = all2all_->dispatch(op, tensors, names);
  return {out[0], out[1], out[2], std::vector<Tensor>(out.begin() + 3, out.end())};
}

Tensor CpuCommunicator::combine(const Tensor& hidden_states, bool is_sequence_parallel) {
  group("combine");  // throws after destroy()
  if (!use_all2all_) return hidden_states;
  return all2all_->combine(hidden_states);
}

}  // namespace groupcoord
