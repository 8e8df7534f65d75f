// GroupCoordinator's object and tensor-dictionary calls (argument names and defaults as vLLM;
// `group` / `metadata_group` are accepted and ignored, as vLLM ignores them).
#include "bindings.h"
#include "group_objects.h"
#include "group_tensor_dicts.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

void bind_objects(GroupClass& cls) {
  cls.def("broadcast_object", &broadcast_object, "obj"_a = py::none(), "src"_a = 0,
          "Collective: ``obj`` from group rank src (returned as is there), unpickled elsewhere.")
      .def(
          "broadcast_object_list",
          [](const GroupPtr& g, py::object obj_list, int src, py::object /*group*/) {
            return broadcast_object_list(g, obj_list, src);
          },
          "obj_list"_a, "src"_a = 0, "group"_a = py::none(),
          "Collective: fills ``obj_list`` in place with src's objects and returns it.")
      .def("send_object", &send_object, "obj"_a, "dst"_a,
           "Sends a picklable object to group rank dst.")
      .def("recv_object", &recv_object, "src"_a, "Receives an object from group rank src.")
      .def("isend_object", &isend_object, "obj"_a, "dst"_a,
           "Non-blocking send_object; returns a Handle (keeps the pickle alive).");
}

void bind_tensor_dicts(GroupClass& cls) {
  cls.def(
         "broadcast_tensor_dict",
         [](const GroupPtr& g, py::object tensor_dict, int src, py::object, py::object,
            py::object stream, py::object library) {
           return broadcast_tensor_dict(g, tensor_dict, src, stream, library);
         },
         "tensor_dict"_a = py::none(), "src"_a = 0, "group"_a = py::none(),
         "metadata_group"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
         "array_library"_a = py::none(), R"doc(
Collective: src's dict (str keys; arrays travel as arrays, other values pickled). Returns
``tensor_dict`` itself on src and at world size 1, a new dict elsewhere (arrays of
``array_library`` or the device default).)doc")
      .def(
          "send_tensor_dict",
          [](const GroupPtr& g, py::object d, py::object dst, py::object ag, py::object agt,
             py::object stream) {
            return send_tensor_dict(g, d, {dst, ag, agt, stream, py::none()});
          },
          "tensor_dict"_a, "dst"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(), R"doc(
Sends a dict to group rank dst (None: the next rank). With ``all_gather_group`` each of its ranks
sends a slice of every tensor whose size divides (``all_gather_tensors`` overrides per key) and the
receiver reassembles it with an all_gather. Returns None (``tensor_dict`` at world size 1).)doc")
      .def(
          "isend_tensor_dict",
          [](const GroupPtr& g, py::object d, py::object dst, py::object ag, py::object agt,
             py::object stream) {
            return isend_tensor_dict(g, d, {dst, ag, agt, stream, py::none()});
          },
          "tensor_dict"_a, "dst"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "Non-blocking send_tensor_dict: returns the Handles (metadata first). The coordinator "
          "keeps the buffers alive until the sends complete, so the handles may be dropped.")
      .def(
          "recv_tensor_dict",
          [](const GroupPtr& g, py::object src, py::object ag, py::object agt, py::object stream,
             py::object library) {
            return recv_tensor_dict(g, {src, ag, agt, stream, library});
          },
          "src"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(),
          "Receives a dict from group rank src (None: the previous rank); None at world size 1.")
      .def(
          "irecv_tensor_dict",
          [](const GroupPtr& g, py::object src, py::object ag, py::object agt, py::object stream,
             py::object library) {
            return irecv_tensor_dict(g, {src, ag, agt, stream, library});
          },
          "src"_a = py::none(), "all_gather_group"_a = py::none(),
          "all_gather_tensors"_a = py::none(), py::kw_only(), "stream"_a = py::none(),
          "array_library"_a = py::none(), R"doc(
Non-blocking recv_tensor_dict: returns ``(tensor_dict, handles, postprocess)`` as vLLM. The dict's
arrays fill as the handles complete; then call each postprocess function in order (they run the
all_gather reassembly and update the dict). ``(None, [], [])`` at world size 1.)doc");
}

}  // namespace

void bind_group_object_ops(GroupClass& cls) {
  bind_objects(cls);
  bind_tensor_dicts(cls);
}

}  // namespace python
}  // namespace groupcoord
