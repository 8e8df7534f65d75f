#include "bindings.h"
#include "fast_method.h"
#include "groupcoord/check.h"
#include "moe_ops.h"
#include "py_communicator.h"
#include "py_work.h"
#include "tensor_ops.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {

PyCommunicator::PyCommunicator(std::shared_ptr<PyGroup> group)
    : group_(std::move(group)),
      borrowed_(group_->get().device_communicator()),
      device_(group_->get().device()),
      label_("DeviceCommunicator(" + group_->unique_name() + ")") {}

PyCommunicator::PyCommunicator(std::shared_ptr<DeviceCommunicator> owned, const PyGroup& group)
    : owned_(std::move(owned)),
      device_(group.get().device()),
      label_("DeviceCommunicator(" + group.unique_name() + ", sibling)") {}

DeviceCommunicator& PyCommunicator::get() const {
  if (owned_) return *owned_;
  if (group_->get().device_communicator() != borrowed_) {
    GC_THROW(DistributedError, label_, ": the coordinator's communicator no longer exists");
  }
  return *borrowed_;
}

namespace {

using CommPtr = std::shared_ptr<PyCommunicator>;

OpTarget<DeviceCommunicator> target(const CommPtr& self) {
  return {&self->get(), self, self->label()};
}

/// isend / irecv: the tensor is shared (kept alive by the returned Handle), enqueued on the
/// stream it was imported for (the caller's library's current stream on CUDA).
std::shared_ptr<Work> async_op(const CommPtr& self, py::object tensor, int peer, bool send) {
  ImportedArray in = import_array(tensor, {self->label(), send ? "isend" : "irecv", "tensor"},
                                  send ? Access::Read : Access::Write, py::none());
  return call_blocking(BlockingKind::Enqueue, [self, x = in.tensor, s = in.stream, peer, send] {
    return with_stream(x.device(), s, [&] {
      return send ? self->get().isend(x, peer) : self->get().irecv(x, peer);
    });
  });
}

// ---- the collectives, as fast methods (fast_method.h) -----------------------------------------

const FastSpec kAllReduce{
    "all_reduce",
    {{"input_"}, {"out", default_none()}, {"stream", default_none(), true}},
    "Sum across the group (out of place, or into ``out``, which is returned)."};

py::object all_reduce(py::handle self, PyObject* const* a) {
  return op_all_reduce(target(self_holder<PyCommunicator>(self)), a[0], a[1], a[2]);
}

const FastSpec kAllGather{
    "all_gather",
    {{"input_"},
     {"dim", default_int(-1)},
     {"out", default_none()},
     {"stream", default_none(), true}},
    "Concatenation of every rank's input along dim (into ``out`` when given)."};

py::object all_gather(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kAllGather, "dim");
  return op_all_gather(target(self_holder<PyCommunicator>(self)), a[0], dim, a[2], a[3]);
}

const FastSpec kAllGatherv{
    "all_gatherv",
    {{"input_"},
     {"dim", default_int(0)},
     {"sizes", default_none()},
     {"stream", default_none(), true}},
    "all_gather with per-rank sizes along dim (one array, or a list of arrays)."};

py::object all_gatherv(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kAllGatherv, "dim");
  return op_all_gatherv(target(self_holder<PyCommunicator>(self)), a[0], dim, a[2], a[3]);
}

const FastSpec kReduceScatter{
    "reduce_scatter",
    {{"input_"},
     {"dim", default_int(-1)},
     {"out", default_none()},
     {"stream", default_none(), true}},
    "Sum across the group, then this rank's slice along dim (into ``out`` when given)."};

py::object reduce_scatter(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kReduceScatter, "dim");
  return op_reduce_scatter(target(self_holder<PyCommunicator>(self)), a[0], dim, a[2], a[3]);
}

const FastSpec kReduceScatterv{"reduce_scatterv",
                               {{"input_"},
                                {"dim", default_int(-1)},
                                {"sizes", default_none()},
                                {"stream", default_none(), true}},
                               "reduce_scatter with per-rank slice sizes."};

py::object reduce_scatterv(py::handle self, PyObject* const* a) {
  const int dim = int_argument(a[1], kReduceScatterv, "dim");
  return op_reduce_scatterv(target(self_holder<PyCommunicator>(self)), a[0], dim, a[2], a[3]);
}

const FastSpec kBroadcast{"broadcast",
                          {{"tensor"}, {"src", default_int(0)}, {"stream", default_none(), true}},
                          "In place from group rank src; returns the input object."};

py::object broadcast(py::handle self, PyObject* const* a) {
  const int src = int_argument(a[1], kBroadcast, "src");
  return op_broadcast(target(self_holder<PyCommunicator>(self)), a[0], src, a[2]);
}

void bind_tensor_ops(py::class_<PyCommunicator, CommPtr>& cls) {
  add_fast_method<kAllReduce, all_reduce>(cls);
  add_fast_method<kAllGather, all_gather>(cls);
  add_fast_method<kAllGatherv, all_gatherv>(cls);
  add_fast_method<kReduceScatter, reduce_scatter>(cls);
  add_fast_method<kReduceScatterv, reduce_scatterv>(cls);
  add_fast_method<kBroadcast, broadcast>(cls);
  cls.def(
         "gather",
         [](const CommPtr& s, py::object x, int dst, int dim, py::object stream) {
           return op_gather(target(s), x, dst, dim, stream);
         },
         "input_"_a, "dst"_a = 0, "dim"_a = -1, py::kw_only(), "stream"_a = py::none(),
         "Concatenation along dim on group rank dst; None elsewhere.")
      .def(
          "send",
          [](const CommPtr& s, py::object x, py::object dst, py::object stream) {
            op_send(target(s), x, dst, stream);
          },
          "tensor"_a, "dst"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "Blocking send to group rank dst (None: the next rank).")
      .def(
          "recv",
          [](const CommPtr& s, py::object size, py::object dtype, py::object src, py::object stream,
             py::object library) {
            return op_recv(target(s), s->device(), size, dtype, src, stream, library);
          },
          "size"_a, "dtype"_a, "src"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(), "Blocking receive from group rank src.")
      .def(
          "isend",
          [](const CommPtr& s, py::object x, int dst) { return PyWork{async_op(s, x, dst, true)}; },
          "tensor"_a, "dst"_a, "Asynchronous send; returns a Handle.")
      .def(
          "irecv",
          [](const CommPtr& s, py::object x, int src) {
            return PyWork{async_op(s, x, src, false)};
          },
          "tensor"_a, "src"_a, "Asynchronous receive into tensor; returns a Handle.");
}

void bind_moe_ops(py::class_<PyCommunicator, CommPtr>& cls) {
  cls.def(
         "dispatch_router_logits",
         [](const CommPtr& s, py::object h, py::object r, bool sp, py::object extra,
            py::object stream) {
           return op_dispatch_router_logits(target(s), h, r, sp, extra, stream);
         },
         "hidden_states"_a, "router_logits"_a, "is_sequence_parallel"_a = false,
         "extra_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
         "MoE: gathers every rank's tokens before the experts run.")
      .def(
          "dispatch",
          [](const CommPtr& s, py::object h, py::object w, py::object i, bool sp, py::object extra,
             py::object stream) { return op_dispatch(target(s), h, w, i, sp, extra, stream); },
          "hidden_states"_a, "topk_weights"_a, "topk_ids"_a, "is_sequence_parallel"_a = false,
          "extra_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "MoE: gathers tokens, weights and ids across the group.")
      .def(
          "combine",
          [](const CommPtr& s, py::object h, bool sp, py::object stream) {
            return op_combine(target(s), h, sp, stream);
          },
          "hidden_states"_a, "is_sequence_parallel"_a = false, py::kw_only(),
          "stream"_a = py::none(), "MoE: the inverse of the last dispatch.");
}

}  // namespace

void bind_device_communicator(py::module_& module) {
  py::class_<PyCommunicator, CommPtr> cls(module, "DeviceCommunicator", R"doc(
The device half of a GroupCoordinator (vLLM's DeviceCommunicatorBase): "cpu" (Gloo) or "cuda"
(NCCL). Reached through GroupCoordinator.device_communicator, or created by
make_sibling_device_group(). Tensor calls take the same arguments as GroupCoordinator's.)doc");
  cls.def_property_readonly(
         "backend_name", [](const CommPtr& s) { return s->get().backend_name(); },
         "Registry name of the implementation ('cpu', 'cuda', ...).")
      .def_property_readonly(
          "rank_in_group", [](const CommPtr& s) { return s->get().rank_in_group(); },
          "This rank in the group.")
      .def_property_readonly(
          "world_size", [](const CommPtr& s) { return s->get().world_size(); },
          "Size of the group.")
      .def(
          "destroy",
          [](const CommPtr& s) { run_blocking(BlockingKind::Wait, [s] { s->get().destroy(); }); },
          "Releases the communicator (idempotent); later calls raise DistributedError.")
      .def("__repr__", [](const CommPtr& s) { return "groupcoord." + s->label(); });
  bind_tensor_ops(cls);
  bind_moe_ops(cls);
}

}  // namespace python
}  // namespace groupcoord
