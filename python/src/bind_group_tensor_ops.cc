// GroupCoordinator's tensor calls. World size 1 bypasses as vLLM does: all_reduce, all_gather,
// reduce_scatter, gather and broadcast return their input object itself — except with `out=`,
// where the input is copied into `out` (checked as at any size) and `out` is returned.
#include <string>

#include "bindings.h"
#include "groupcoord/check.h"
#include "moe_ops.h"
#include "tensor_ops.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

OpTarget<GroupCoordinator> target(const GroupPtr& g) { return {&g->get(), g, g->label()}; }

/// The input itself when the group has one rank (after checking it is an array), else null.
/// `out` given: null (the out= call copies the input into it at world size 1).
py::object bypass(const GroupPtr& g, py::object input, const char* op,
                  py::handle out = py::none()) {
  if (g->get().world_size() != 1 || !out.is_none()) return py::object();
  GC_CHECK(is_array(input), g->label(), ".", op,
           ": input_ must be an array (numpy, torch, cupy or any object with __dlpack__), got ",
           py::str(py::type::handle_of(input).attr("__name__")).cast<std::string>());
  return py::reinterpret_borrow<py::object>(input);
}

void bind_collectives(GroupClass& cls) {
  cls.def(
         "all_reduce",
         [](const GroupPtr& g, py::object x, py::object out, py::object stream) {
           if (py::object same = bypass(g, x, "all_reduce", out)) return same;
           return op_all_reduce(target(g), x, out, stream);
         },
         "input_"_a, "out"_a = py::none(), py::kw_only(), "stream"_a = py::none(), R"doc(
Sum across the group, out of place (collective over the group). Returns the caller's array type;
at world size 1 returns ``input_`` itself. ``out``: an array of the input's shape, dtype and
device, contiguous, to write the result into (may be ``input_``: in place); the call then returns
``out`` itself (at world size 1 the input is copied into it). torch and cupy CUDA results without
``out`` are allocated by torch / cupy. ``stream``: CUDA stream (ignored on CPU).)doc")
      .def(
          "all_gather",
          [](const GroupPtr& g, py::object x, int dim, py::object out, py::object stream) {
            if (py::object same = bypass(g, x, "all_gather", out)) return same;
            return op_all_gather(target(g), x, dim, out, stream);
          },
          "input_"_a, "dim"_a = -1, "out"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          R"doc(
Concatenation of every rank's input along dim (collective). ``out``: a contiguous array of the
result's shape (dim multiplied by the world size), the input's dtype and device, written and
returned.)doc")
      .def(
          "all_gatherv",
          [](const GroupPtr& g, py::object x, int dim, py::object sizes, py::object stream) {
            return op_all_gatherv(target(g), x, dim, sizes, stream);
          },
          "input_"_a, "dim"_a = 0, "sizes"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          R"doc(
all_gather with per-rank sizes along dim (``sizes[r]``: rank r's size; None: all equal). Takes
one array or a list of arrays (returns the same shape of result). Needs a device communicator:
ValueError "No device communicator found" at world size 1, as vLLM.)doc")
      .def(
          "reduce_scatter",
          [](const GroupPtr& g, py::object x, int dim, py::object out, py::object stream) {
            if (py::object same = bypass(g, x, "reduce_scatter", out)) return same;
            return op_reduce_scatter(target(g), x, dim, out, stream);
          },
          "input_"_a, "dim"_a = -1, "out"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          R"doc(
Sum across the group, then this rank's 1/world_size slice along dim (collective). ``out``: a
contiguous array of the slice's shape, the input's dtype and device, written and returned.)doc")
      .def(
          "reduce_scatterv",
          [](const GroupPtr& g, py::object x, int dim, py::object sizes, py::object stream) {
            return op_reduce_scatterv(target(g), x, dim, sizes, stream);
          },
          "input_"_a, "dim"_a = -1, "sizes"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "reduce_scatter with per-rank slice sizes (needs a device communicator).")
      .def(
          "gather",
          [](const GroupPtr& g, py::object x, int dst, int dim, py::object stream) {
            if (py::object same = bypass(g, x, "gather")) return same;
            return op_gather(target(g), x, dst, dim, stream);
          },
          "input_"_a, "dst"_a = 0, "dim"_a = -1, py::kw_only(), "stream"_a = py::none(),
          "Concatenation along dim on group rank dst; None on the other ranks (collective).")
      .def(
          "broadcast",
          [](const GroupPtr& g, py::object x, int src, py::object stream) {
            if (g->get().world_size() == 1) {
              GC_CHECK(src == 0, g->label(), ".broadcast: invalid src rank (", src, ")");
            }
            if (py::object same = bypass(g, x, "broadcast")) return same;
            return op_broadcast(target(g), x, src, stream);
          },
          "input_"_a, "src"_a = 0, py::kw_only(), "stream"_a = py::none(),
          "In place from group rank src; returns ``input_`` itself (collective).");
}

void bind_point_to_point(GroupClass& cls) {
  cls.def(
         "send",
         [](const GroupPtr& g, py::object x, py::object dst, py::object stream) {
           op_send(target(g), x, dst, stream);
         },
         "tensor"_a, "dst"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
         "Blocking send to group rank dst (None: the next rank). Needs a device communicator.")
      .def(
          "recv",
          [](const GroupPtr& g, py::object size, py::object dtype, py::object src,
             py::object stream, py::object library) {
            return op_recv(target(g), g->get().device(), size, dtype, src, stream, library);
          },
          "size"_a, "dtype"_a, "src"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(), R"doc(
Blocking receive of an array of ``size`` and ``dtype`` from group rank src (None: the previous
rank). ``dtype``: a name, numpy dtype or torch dtype. Returns a torch tensor for a torch dtype,
else an array of ``array_library`` ("numpy", "torch", "cupy", "dlpack") or, by default, of the
device's default library (numpy on CPU, see set_default_array_library).)doc");
}

void bind_moe(GroupClass& cls) {
  cls.def(
         "dispatch_router_logits",
         [](const GroupPtr& g, py::object h, py::object r, bool sp, py::object extra,
            py::object stream) {
           return op_dispatch_router_logits(target(g), h, r, sp, extra, stream);
         },
         "hidden_states"_a, "router_logits"_a, "is_sequence_parallel"_a = false,
         "extra_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
         "MoE: (hidden_states, router_logits[, extra_tensors]) gathered before the experts.")
      .def(
          "dispatch",
          [](const GroupPtr& g, py::object h, py::object w, py::object i, bool sp, py::object extra,
             py::object stream) { return op_dispatch(target(g), h, w, i, sp, extra, stream); },
          "hidden_states"_a, "topk_weights"_a, "topk_ids"_a, "is_sequence_parallel"_a = false,
          "extra_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "MoE: (hidden_states, topk_weights, topk_ids[, extra_tensors]) gathered.")
      .def(
          "combine",
          [](const GroupPtr& g, py::object h, bool sp, py::object stream) {
            return op_combine(target(g), h, sp, stream);
          },
          "hidden_states"_a, "is_sequence_parallel"_a = false, py::kw_only(),
          "stream"_a = py::none(), "MoE: the experts' outputs summed back to this rank's tokens.");
}

}  // namespace

void bind_group_tensor_ops(GroupClass& cls) {
  bind_collectives(cls);
  bind_point_to_point(cls);
  bind_moe(cls);
}

}  // namespace python
}  // namespace groupcoord
