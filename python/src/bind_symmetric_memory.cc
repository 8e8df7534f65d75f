// NCCL symmetric memory on the Python GroupCoordinator: symmetric_empty, the scratch reservation
// and the counters (groupcoord.SymmetricMemoryStats), as in C++ (group_coordinator.h).
#include <string>

#include "bindings.h"
#include "blocking_call.h"
#include "dtype_arg.h"
#include "py_tensor.h"
#include "stream_arg.h"
#include "tensor_ops.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {

namespace {

std::string stats_repr(const SymmetricMemoryStats& s) {
  std::string text = "SymmetricMemoryStats(enabled=" + std::string(s.enabled ? "True" : "False");
  if (!s.enabled) text += ", disabled_reason='" + s.disabled_reason + "'";
  if (s.enabled) text += ", window_kind='" + s.window_kind + "'";
  text += ", windows_registered=" + std::to_string(s.windows_registered) +
          ", symmetric_calls=" + std::to_string(s.symmetric_calls) +
          ", fallbacks=" + std::to_string(s.fallbacks) +
          ", zero_copy_calls=" + std::to_string(s.zero_copy_calls) +
          ", scratch_bytes=" + std::to_string(s.scratch_bytes) +
          ", pool_bytes=" + std::to_string(s.pool_bytes) + ")";
  return text;
}

void bind_stats(py::module_& module) {
  py::class_<SymmetricMemoryStats>(module, "SymmetricMemoryStats", R"doc(
State and counters of a group's NCCL symmetric memory (read-only snapshot; counters only grow).)doc")
      .def_readonly("enabled", &SymmetricMemoryStats::enabled,
                    "True when routed collectives run on registered windows.")
      .def_readonly("disabled_reason", &SymmetricMemoryStats::disabled_reason,
                    "Why the path is off ('' when on).")
      .def_readonly("window_kind", &SymmetricMemoryStats::window_kind,
                    "'symmetric', 'default' (GROUPCOORD_SYMM_WINDOW_FLAGS=default) or ''.")
      .def_readonly("windows_registered", &SymmetricMemoryStats::windows_registered,
                    "ncclCommWindowRegister calls made by the communicator.")
      .def_readonly("symmetric_calls", &SymmetricMemoryStats::symmetric_calls,
                    "Collectives that ran on window buffers.")
      .def_readonly("fallbacks", &SymmetricMemoryStats::fallbacks,
                    "Routed collectives that took the regular path instead.")
      .def_readonly("zero_copy_calls", &SymmetricMemoryStats::zero_copy_calls,
                    "Symmetric calls whose input was a symmetric_empty array (no input copy).")
      .def_readonly("scratch_bytes", &SymmetricMemoryStats::scratch_bytes,
                    "Size of the current scratch window.")
      .def_readonly("pool_bytes", &SymmetricMemoryStats::pool_bytes,
                    "Size of the windows backing symmetric_empty arrays.")
      .def("__repr__", &stats_repr);
}

}  // namespace

void bind_symmetric_memory(py::module_& module, GroupClass& cls) {
  bind_stats(module);
  cls.def(
         "symmetric_empty",
         [](const GroupPtr& g, py::object size, py::object dtype, py::object stream,
            py::object array_library) {
           GroupCoordinator& c = g->get();
           const std::string label = g->label();
           const Shape shape = shape_from_python(size, label);
           const DType type = dtype_from_python(dtype, (label + ".symmetric_empty").c_str());
           // The result's library decides the stream too (as recv).
           const ArrayLibrary& library =
               is_torch_dtype(dtype)
                   ? library_by_name("torch")
                   : library_or_default(optional_library(array_library), c.device());
           const StreamHandle s = resolve_stream(stream, &library, c.device());
           Tensor out = call_blocking(BlockingKind::Wait, [g, shape, type, s] {
             GroupCoordinator& group = g->get();
             return with_stream(group.device(), s,
                                [&] { return group.symmetric_empty(shape, type); });
           });
           return export_tensor(out, library, s);
         },
         "size"_a, "dtype"_a, py::kw_only(), "stream"_a = py::none(),
         "array_library"_a = py::none(), R"doc(
Collective (same size and dtype on every rank, in the same order): an uninitialised array inside
the group's NCCL symmetric window; all_gather, reduce_scatter and all_reduce on it skip the input
copy. A torch dtype gives a torch tensor, else ``array_library`` or the device default. At world
size 1, a plain array. ValueError where symmetric memory is off (the reason is in the message).)doc")
      .def(
          "reserve_symmetric_scratch",
          [](const GroupPtr& g, std::int64_t bytes) {
            g->get();
            run_blocking(BlockingKind::Wait,
                         [g, bytes] { g->get().reserve_symmetric_scratch(bytes); });
          },
          "nbytes"_a, R"doc(
Collective (same value on every rank): makes the scratch window at least ``nbytes`` now, before
CUDA graph capture (nothing can be registered during a capture). ValueError where symmetric memory
is off; a no-op at world size 1.)doc")
      .def_property_readonly(
          "symmetric_memory_stats",
          [](const GroupPtr& g) { return g->get().symmetric_memory_stats(); },
          "groupcoord.SymmetricMemoryStats of the group's device communicator.");
}

}  // namespace python
}  // namespace groupcoord
