#include "errors.h"

#include <stdexcept>

#include <pybind11/stl.h>

#include "groupcoord/errors.h"
#include "groupcoord/world.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

// Owned by the module (added as attributes); plain pointers so that no static py::object is
// destroyed after the interpreter.
PyObject* g_distributed_error = nullptr;
PyObject* g_timeout_error = nullptr;
PyObject* g_rank_failure_error = nullptr;

PyObject* new_exception(const char* name, const char* doc, PyObject* bases) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

void translate(std::exception_ptr error) {
  if (!translate_groupcoord_exception(error) && error) std::rethrow_exception(error);
}

/// A groupcoord.RankFailureError with its dead_ranks attribute.
void set_rank_failure_error(const groupcoord::RankFailureError& e) {
  py::object instance =
      py::reinterpret_steal<py::object>(PyObject_CallFunction(g_rank_failure_error, "s", e.what()));
  if (!instance) throw py::error_already_set();
  instance.attr("dead_ranks") = py::cast(e.dead_ranks());
  PyErr_SetObject(g_rank_failure_error, instance.ptr());
}

}  // namespace

/// Most specific first: TimeoutError derives from DistributedError in C++.
bool translate_groupcoord_exception(std::exception_ptr error) {
  try {
    // The fast paths call communicators directly, past the coordinator operations that apply
    // the rank-failure policy in C++: apply it here too.
    if (error) std::rethrow_exception(apply_rank_failure_policy(error));
  } catch (const groupcoord::RankFailureError& e) {
    set_rank_failure_error(e);
    return true;
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
  g_rank_failure_error =
      new_exception("groupcoord.RankFailureError",
                    "A collective failed and the world ranks in .dead_ranks are dead (raised under "
                    "set_rank_failure_policy('identify'); C++: groupcoord::RankFailureError). "
                    "shrink_model_parallel(e.dead_ranks) on every survivor lets the job go on.",
                    g_distributed_error);
  module.add_object("DistributedError", py::handle(g_distributed_error));
  module.add_object("RankFailureError", py::handle(g_rank_failure_error));
  module.add_object("DistributedTimeoutError", py::handle(g_timeout_error));
  py::register_exception_translator(&translate);
}

}  // namespace python
}  // namespace groupcoord
