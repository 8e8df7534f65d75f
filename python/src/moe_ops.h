// MoE calls shared by GroupCoordinator and DeviceCommunicator (vLLM's dispatch_router_logits,
// dispatch, combine). Tuples come back as in vLLM: the extra tensors' list is only there when
// extra_tensors was passed.
#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "tensor_ops.h"

namespace groupcoord {
namespace python {

/// extra_tensors= (None or a list of arrays).
std::vector<ImportedArray> import_extra(pybind11::handle extra, const std::string& label,
                                        const char* op, pybind11::handle stream);
std::vector<Tensor> tensors_of(const std::vector<ImportedArray>& arrays);
/// Results of `extra` exported like the inputs they came from (the first input when more come).
pybind11::list export_extra(const std::vector<Tensor>& outs, const std::vector<ImportedArray>& ins,
                            const ImportedArray& fallback);

template <typename T>
pybind11::tuple op_dispatch_router_logits(const OpTarget<T>& g, pybind11::handle hidden_states,
                                          pybind11::handle router_logits, bool is_sequence_parallel,
                                          pybind11::handle extra, pybind11::handle stream) {
  const char* op = "dispatch_router_logits";
  ImportedArray h =
      import_array(hidden_states, {g.label, op, "hidden_states"}, Access::Read, stream);
  ImportedArray r =
      import_array(router_logits, {g.label, op, "router_logits"}, Access::Read, stream);
  std::vector<ImportedArray> ex = import_extra(extra, g.label, op, stream);
  FrameworkResults results(h.library, h.tensor.device());
  DispatchRouterLogitsResult out =
      call_blocking(kind_for(h.tensor), [t = g.target, keep = g.keep, hx = h.tensor, rx = r.tensor,
                                         exs = tensors_of(ex), is_sequence_parallel, s = h.stream] {
        return with_stream(hx.device(), s, [&] {
          return t->dispatch_router_logits(hx, rx, is_sequence_parallel, exs);
        });
      });
  pybind11::object hs = export_like(out.hidden_states, h);
  pybind11::object rl = export_like(out.router_logits, r);
  if (extra.is_none()) return pybind11::make_tuple(hs, rl);
  return pybind11::make_tuple(hs, rl, export_extra(out.extra_tensors, ex, h));
}

template <typename T>
pybind11::tuple op_dispatch(const OpTarget<T>& g, pybind11::handle hidden_states,
                            pybind11::handle topk_weights, pybind11::handle topk_ids,
                            bool is_sequence_parallel, pybind11::handle extra,
                            pybind11::handle stream) {
  const char* op = "dispatch";
  ImportedArray h =
      import_array(hidden_states, {g.label, op, "hidden_states"}, Access::Read, stream);
  ImportedArray w = import_array(topk_weights, {g.label, op, "topk_weights"}, Access::Read, stream);
  ImportedArray i = import_array(topk_ids, {g.label, op, "topk_ids"}, Access::Read, stream);
  std::vector<ImportedArray> ex = import_extra(extra, g.label, op, stream);
  FrameworkResults results(h.library, h.tensor.device());
  DispatchResult out = call_blocking(
      kind_for(h.tensor), [t = g.target, keep = g.keep, hx = h.tensor, wx = w.tensor, ix = i.tensor,
                           exs = tensors_of(ex), is_sequence_parallel, s = h.stream] {
        return with_stream(hx.device(), s,
                           [&] { return t->dispatch(hx, wx, ix, is_sequence_parallel, exs); });
      });
  pybind11::object hs = export_like(out.hidden_states, h);
  pybind11::object ws = export_like(out.topk_weights, w);
  pybind11::object is = export_like(out.topk_ids, i);
  if (extra.is_none()) return pybind11::make_tuple(hs, ws, is);
  return pybind11::make_tuple(hs, ws, is, export_extra(out.extra_tensors, ex, h));
}

template <typename T>
pybind11::object op_combine(const OpTarget<T>& g, pybind11::handle hidden_states,
                            bool is_sequence_parallel, pybind11::handle stream) {
  ImportedArray h =
      import_array(hidden_states, {g.label, "combine", "hidden_states"}, Access::Read, stream);
  FrameworkResults results(h.library, h.tensor.device());
  Tensor out = call_blocking(kind_for(h.tensor), [t = g.target, keep = g.keep, hx = h.tensor,
                                                  is_sequence_parallel, s = h.stream] {
    return with_stream(hx.device(), s, [&] { return t->combine(hx, is_sequence_parallel); });
  });
  return export_like(out, h);
}

}  // namespace python
}  // namespace groupcoord
