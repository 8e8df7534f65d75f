// GroupCoordinator's tensor calls. World size 1 bypasses as vLLM does: all_reduce, all_gather,
// reduce_scatter, gather and broadcast return their input object itself — except with `out=`,
// where the input is copied into `out` (checked as at any size) and `out` is returned.
#include <string>

#include "bindings.h"
#include "fast_method.h"
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
py::object bypass(const GroupPtr& g, GroupCoordinator& c, py::handle input, const char* op,
                  py::handle out = py::none()) {
  if (c.world_size() != 1 || !out.is_none()) return py::object();
  GC_CHECK(is_array(input), g->label(), ".", op,
           ": input_ must be an array (numpy, torch, cupy or any object with __dlpack__), got ",
           py::str(py::type::handle_of(input).attr("__name__")).cast<std::string>());
  return py::reinterpret_borrow<py::object>(input);
}

// ---- the collectives, as fast methods (fast_method.h) -----------------------------------------

const FastSpec kAllReduce{"all_reduce",
                          {{"input_"}, {"out", default_none()}, {"stream", default_none(), true}},
                          R"doc(
Sum across the group, out of place (collective over the group). Returns the caller's array type;
at world size 1 returns ``input_`` itself. ``out``: an array of the input's shape, dtype and
device, contiguous, to write the result into (may be ``input_``: in place); the call then returns
``out`` itself (at world size 1 the input is copied into it). torch and cupy CUDA results without
``out`` are allocated by torch / cupy. ``stream``: CUDA stream (ignored on CPU).)doc"};

py::object all_reduce(py::handle self, PyObject* const* a) {
  const GroupPtr g = self_holder<PyGroup>(self);
  GroupCoordinator& c = g->get();
  if (py::object same = bypass(g, c, a[0], "all_reduce", a[1])) return same;
  return op_all_reduce(OpTarget<GroupCoordinator>{&c, g, g->label()}, a[0], a[1], a[2]);
}

const FastSpec kAllGather{"all_gather",
                          {{"input_"},
                           {"dim", default_int(-1)},
                           {"out", default_none()},
                           {"stream", default_none(), true}},
                          R"doc(
Concatenation of every rank's input along dim (collective). ``out``: a contiguous array of the
result's shape (dim multiplied by the world size), the input's dtype and device, written and
returned.)doc"};

py::object all_gather(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kAllGather, "dim");
  const GroupPtr g = self_holder<PyGroup>(self);
  GroupCoordinator& c = g->get();
  if (py::object same = bypass(g, c, a[0], "all_gather", a[2])) return same;
  return op_all_gather(OpTarget<GroupCoordinator>{&c, g, g->label()}, a[0], dim, a[2], a[3]);
}

const FastSpec kAllGatherv{"all_gatherv",
                           {{"input_"},
                            {"dim", default_int(0)},
                            {"sizes", default_none()},
                            {"stream", default_none(), true}},
                           R"doc(
all_gather with per-rank sizes along dim (``sizes[r]``: rank r's size; None: all equal). Takes
one array or a list of arrays (returns the same shape of result). Needs a device communicator:
ValueError "No device communicator found" at world size 1, as vLLM.)doc"};

py::object all_gatherv(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kAllGatherv, "dim");
  const GroupPtr g = self_holder<PyGroup>(self);
  return op_all_gatherv(target(g), a[0], dim, a[2], a[3]);
}

const FastSpec kReduceScatter{"reduce_scatter",
                              {{"input_"},
                               {"dim", default_int(-1)},
                               {"out", default_none()},
                               {"stream", default_none(), true}},
                              R"doc(
Sum across the group, then this rank's 1/world_size slice along dim (collective). ``out``: a
contiguous array of the slice's shape, the input's dtype and device, written and returned.)doc"};

py::object reduce_scatter(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kReduceScatter, "dim");
  const GroupPtr g = self_holder<PyGroup>(self);
  GroupCoordinator& c = g->get();
  if (py::object same = bypass(g, c, a[0], "reduce_scatter", a[2])) return same;
  return op_reduce_scatter(OpTarget<GroupCoordinator>{&c, g, g->label()}, a[0], dim, a[2], a[3]);
}

const FastSpec kReduceScatterv{
    "reduce_scatterv",
    {{"input_"},
     {"dim", default_int(-1)},
     {"sizes", default_none()},
     {"stream", default_none(), true}},
    "reduce_scatter with per-rank slice sizes (needs a device communicator)."};

py::object reduce_scatterv(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kReduceScatterv, "dim");
  const GroupPtr g = self_holder<PyGroup>(self);
  return op_reduce_scatterv(target(g), a[0], dim, a[2], a[3]);
}

const FastSpec kBroadcast{"broadcast",
                          {{"input_"}, {"src", default_int(0)}, {"stream", default_none(), true}},
                          "In place from group rank src; returns ``input_`` itself (collective)."};

py::object broadcast(py::handle self, PyObject* const* a) {
  const int src = int_argument(a[1], kBroadcast, "src");
  const GroupPtr g = self_holder<PyGroup>(self);
  GroupCoordinator& c = g->get();
  if (c.world_size() == 1) {
    GC_CHECK(src == 0, g->label(), ".broadcast: invalid src rank (", src, ")");
  }
  if (py::object same = bypass(g, c, a[0], "broadcast")) return same;
  return op_broadcast(OpTarget<GroupCoordinator>{&c, g, g->label()}, a[0], src, a[2]);
}

void bind_collectives(GroupClass& cls) {
  add_fast_method<kAllReduce, all_reduce>(cls);
  add_fast_method<kAllGather, all_gather>(cls);
  add_fast_method<kAllGatherv, all_gatherv>(cls);
  add_fast_method<kReduceScatter, reduce_scatter>(cls);
  add_fast_method<kReduceScatterv, reduce_scatterv>(cls);
  cls.def(
      "gather",
      [](const GroupPtr& g, py::object x, int dst, int dim, py::object stream) {
        GroupCoordinator& c = g->get();
        if (py::object same = bypass(g, c, x, "gather")) return same;
        return op_gather(OpTarget<GroupCoordinator>{&c, g, g->label()}, x, dst, dim, stream);
      },
      "input_"_a, "dst"_a = 0, "dim"_a = -1, py::kw_only(), "stream"_a = py::none(),
      "Concatenation along dim on group rank dst; None on the other ranks (collective).");
  add_fast_method<kBroadcast, broadcast>(cls);
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
device's default library (on CPU torch once the program imported torch, else numpy; see
set_default_array_library).)doc");
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
