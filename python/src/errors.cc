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
PyObject* g_source_failed_error = nullptr;

PyObject* new_exception(const char* name, const char* doc, PyObject* bases) {
  PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
  if (type == nullptr) throw py::error_already_set();
  return type;
}

void translate(std::exception_ptr error) {
  if (!translate_groupcoord_exception(error) && error) std::rethrow_exception(error);
}

/// `text` as a Python str. Messages carry text from peers (a source's failure) that may not be
/// valid UTF-8: undecodable bytes become U+FFFD rather than a UnicodeDecodeError.
py::str text_of(const std::string& text) {
  PyObject* str =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

/// Raises `type(message)` with `attributes` set on the instance.
void set_error(PyObject* type, const char* message, const py::dict& attributes = py::dict()) {
  py::object instance = py::reinterpret_steal<py::object>(
      PyObject_CallFunctionObjArgs(type, text_of(message).ptr(), nullptr));
  if (!instance) throw py::error_already_set();
  for (auto item : attributes) instance.attr(item.first) = item.second;
  PyErr_SetObject(type, instance.ptr());
}

}  // namespace

/// Most specific first: TimeoutError derives from DistributedError in C++.
bool translate_groupcoord_exception(std::exception_ptr error) {
  try {
    // The fast paths call communicators directly, past the coordinator operations that apply
    // the rank-failure policy in C++: apply it here too.
    if (error) std::rethrow_exception(apply_rank_failure_policy(error));
  } catch (const groupcoord::RankFailureError& e) {
    py::dict attributes;
    attributes["dead_ranks"] = py::cast(e.dead_ranks());
    set_error(g_rank_failure_error, e.what(), attributes);
    return true;
  } catch (const groupcoord::SourceFailedError& e) {
    py::dict attributes;
    attributes["src"] = e.src();
    attributes["why"] = text_of(e.why());
    set_error(g_source_failed_error, e.what(), attributes);
    return true;
  } catch (const groupcoord::TimeoutError& e) {
    set_error(g_timeout_error, e.what());
    return true;
  } catch (const groupcoord::DistributedError& e) {
    set_error(g_distributed_error, e.what());
    return true;
  } catch (const std::invalid_argument& e) {
    set_error(PyExc_ValueError, e.what());
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
  g_source_failed_error =
      new_exception("groupcoord.SourceFailedError",
                    "The rank this one was receiving from could not produce its object and sent "
                    "its error instead (.src: its group rank, .why: its text); the group stays "
                    "usable (C++: groupcoord::SourceFailedError).",
                    g_distributed_error);
  module.add_object("DistributedError", py::handle(g_distributed_error));
  module.add_object("SourceFailedError", py::handle(g_source_failed_error));
  module.add_object("RankFailureError", py::handle(g_rank_failure_error));
  module.add_object("DistributedTimeoutError", py::handle(g_timeout_error));
  py::register_exception_translator(&translate);
}

}  // namespace python
}  // namespace groupcoord
