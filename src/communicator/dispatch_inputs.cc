#include "communicator/dispatch_inputs.h"

namespace groupcoord {
namespace comm {

namespace {

// Gathers `tensors` followed by the extras ("extra_tensors[i]").
std::vector<Tensor> gather_with_extras(const DispatchGather& gather, const char* op,
                                       std::vector<Tensor> tensors, std::vector<std::string> names,
                                       const std::vector<Tensor>& extras) {
  for (std::size_t i = 0; i < extras.size(); ++i) {
    tensors.push_back(extras[i]);
    names.push_back("extra_tensors[" + std::to_string(i) + "]");
  }
  return gather(op, tensors, names);
}

}  // namespace

DispatchRouterLogitsResult dispatch_router_logits_via(const DispatchGather& gather,
                                                      const Tensor& hidden_states,
                                                      const Tensor& router_logits,
                                                      const std::vector<Tensor>& extra_tensors) {
  const std::vector<Tensor> out =
      gather_with_extras(gather, "dispatch_router_logits", {hidden_states, router_logits},
                         {"hidden_states", "router_logits"}, extra_tensors);
  return {out[0], out[1], std::vector<Tensor>(out.begin() + 2, out.end())};
}

DispatchResult dispatch_via(const DispatchGather& gather, const Tensor& hidden_states,
                            const Tensor& topk_weights, const Tensor& topk_ids,
                            const std::vector<Tensor>& extra_tensors) {
  const std::vector<Tensor> out =
      gather_with_extras(gather, "dispatch", {hidden_states, topk_weights, topk_ids},
                         {"hidden_states", "topk_weights", "topk_ids"}, extra_tensors);
  return {out[0], out[1], out[2], std::vector<Tensor>(out.begin() + 3, out.end())};
}

}  // namespace comm
}  // namespace groupcoord
