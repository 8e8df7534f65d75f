// The extension module groupcoord._groupcoord. The package's __init__.py re-exports it and adds
// the pure-Python parts (graph_capture, communication_op helpers).
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "blocking_call.h"
#include "errors.h"
#include "groupcoord/group_coordinator.h"
#include "py_tensor.h"
#include "py_work.h"

#ifndef GROUPCOORD_VERSION
#define GROUPCOORD_VERSION "unknown"
#endif

namespace py = pybind11;

PYBIND11_MODULE(_groupcoord, m) {
  using namespace groupcoord::python;
  m.doc() = "groupcoord's C++ core: vLLM's GroupCoordinator and parallel_state without PyTorch.";
  m.attr("__version__") = GROUPCOORD_VERSION;
#ifdef GROUPCOORD_WITH_CUDA
  m.attr("_built_with_cuda") = true;
#else
  m.attr("_built_with_cuda") = false;
#endif
  init_blocking_calls();
  groupcoord::register_builtin_device_communicators();
  bind_errors(m);
  bind_tensor(m);
  bind_work(m);
  bind_process_group(m);
  bind_message_queue(m);
  bind_device_communicator(m);
  GroupClass cls = bind_group_coordinator(m);
  bind_group_tensor_ops(cls);
  bind_group_object_ops(cls);
  bind_symmetric_memory(m, cls);
  bind_parallel_state(m);
  bind_settings(m);
}
