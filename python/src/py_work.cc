#include "py_work.h"

#include "blocking_call.h"
#include "timeout_arg.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

void wait(const PyWork& self, py::object timeout) {
  const auto bound = timeout_from_python(timeout, "Handle.wait");
  run_blocking(BlockingKind::Wait, [work = self.work, bound] {
    if (bound) {
      work->wait(*bound);
    } else {
      work->wait();
    }
  });
}

}  // namespace

py::list handle_list(const std::vector<std::shared_ptr<Work>>& works) {
  py::list out;
  for (const auto& work : works) out.append(py::cast(PyWork{work}));
  return out;
}

void bind_work(py::module_& module) {
  py::class_<PyWork>(module, "Handle", R"doc(
Handle of an asynchronous operation (isend_object, isend_tensor_dict, irecv_tensor_dict, ...).

The operation progresses on its own: the handle may be waited on, polled, or dropped (dropping
never cancels it, and the buffers stay alive until it completes).)doc")
      .def("wait", &wait, "timeout"_a = py::none(), R"doc(
Waits for the operation, up to ``timeout`` seconds (a number or datetime.timedelta; None: the
group's timeout). Raises the operation's error, or DistributedTimeoutError when the wait runs
out (the operation keeps running then). Returns None.)doc")
      .def(
          "is_completed", [](const PyWork& self) { return self.work->is_completed(); },
          "True once the operation has finished (successfully or not). Never blocks.");
}

}  // namespace python
}  // namespace groupcoord
