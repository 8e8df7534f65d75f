// The packing every communicator's MoE dispatch shares: which tensors dispatch gathers, in which
// order, under which names (for errors), and how the gathered list maps back onto the result
// structs. Only the gathering itself differs between communicators (host tensors through the
// naive all-to-all, device tensors through all_gatherv), so it is passed in.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "groupcoord/device_communicator.h"

namespace groupcoord {
namespace comm {

/// Gathers `tensors` (tensors[0] sets the token count) along dim 0 for `op`; `names` name them.
using DispatchGather = std::function<std::vector<Tensor>(
    const char* op, const std::vector<Tensor>& tensors, const std::vector<std::string>& names)>;

/// dispatch_router_logits through `gather`: hidden_states, router_logits, then the extras.
DispatchRouterLogitsResult dispatch_router_logits_via(const DispatchGather& gather,
                                                      const Tensor& hidden_states,
                                                      const Tensor& router_logits,
                                                      const std::vector<Tensor>& extra_tensors);

/// dispatch through `gather`: hidden_states, topk_weights, topk_ids, then the extras.
DispatchResult dispatch_via(const DispatchGather& gather, const Tensor& hidden_states,
                            const Tensor& topk_weights, const Tensor& topk_ids,
                            const std::vector<Tensor>& extra_tensors);

}  // namespace comm
}  // namespace groupcoord
