#include "errors.h"

#include <stdexcept>

#include "groupcoord/errors.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

// Owned by the module (added as attributes); plain pointers so that no static py::object is
// destroyed after the interpreter.
PyObject* g_distributed_error = nullptr;
PyObject* g_timeout_error = nullptr;

PyObject* new_exception(const char* name, const char* doc, PyObject* bases) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

void translate(std::exception_ptr error) {
  if (!translate_groupcoord_exception(error) && error) std::rethrow_exception(error);
}

}  // namespace

/// Most specific first: TimeoutError derives from DistributedError in C++.
bool translate_groupcoord_exception(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const groupcoord::TimeoutError& e) {
    PyErr_SetString(g_timeout_error, e.what());
    return true;
  } catch (const groupcoord::DistributedError& e) {
    PyErr_SetString(g_distributed_error, e.what());
    return true;
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    return true;
  } catch (...) {
  }
  return false;
}

void bind_errors(py::module_& module) {
  g_distributed_error = new_exception(
      "groupcoord.DistributedError",
      "A dead or misbehaving peer, or a broken group (C++: groupcoord::DistributedError).",
      PyExc_RuntimeError);
  py::tuple timeout_bases =
      py::make_tuple(py::handle(PyExc_TimeoutError), py::handle(g_distributed_error));
  g_timeout_error =
      new_exception("groupcoord.DistributedTimeoutError",
                    "A deadline expired (C++: groupcoord::TimeoutError). Both a TimeoutError and a "
                    "DistributedError.",
                    timeout_bases.ptr());
  module.add_object("DistributedError", py::handle(g_distributed_error));
  module.add_object("DistributedTimeoutError", py::handle(g_timeout_error));
  py::register_exception_translator(&translate);
}

}  // namespace python
}  // namespace groupcoord
