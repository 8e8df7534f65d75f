#include "fast_method.h"

#include <climits>
#include <new>
#include <stdexcept>
#include <string>

#include "errors.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {

FastSpec::FastSpec(const char* name_, std::initializer_list<FastParam> params_, const char* doc_)
    : name(name_), params(params_) {
  std::string signature = std::string(name) + "($self, /";
  bool keyword_only = false;
  for (const FastParam& p : params) {
    PyObject* interned = PyUnicode_InternFromString(p.name);
    if (interned == nullptr) throw py::error_already_set();
    this->interned.push_back(interned);  // leaked: lives as long as the method
    if (p.keyword_only && !keyword_only) {
      signature += ", *";
      keyword_only = true;
    }
    if (!p.keyword_only) ++positional;
    signature += ", ";
    signature += p.name;
    if (p.default_value != nullptr) {
      signature += "=" + py::repr(p.default_value).cast<std::string>();
    }
  }
  doc = signature + ")\n--\n\n" + doc_;
}

PyObject* default_none() {
  Py_INCREF(Py_None);
  return Py_None;
}

PyObject* default_int(long value) {
  PyObject* out = PyLong_FromLong(value);
  if (out == nullptr) throw py::error_already_set();
  return out;
}

bool parse_fast_arguments(const FastSpec& spec, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames, PyObject** out) {
  const std::size_t count = spec.params.size();
  nargs = PyVectorcall_NARGS(nargs);
  if (static_cast<std::size_t>(nargs) > spec.positional) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %zu positional arguments (%zd given)",
                 spec.name, spec.positional, nargs);
    return false;
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) out[i] = args[i];
  const Py_ssize_t keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < keywords; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    std::size_t i = 0;
    while (i < count && spec.interned[i] != key) ++i;  // interned: identity first
    if (i == count) {
      i = 0;
      while (i < count && PyUnicode_Compare(spec.interned[i], key) != 0) ++i;
      if (PyErr_Occurred()) return false;
    }
    if (i == count) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", spec.name, key);
      return false;
    }
    if (out[i] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", spec.name,
                   spec.params[i].name);
      return false;
    }
    out[i] = args[nargs + k];
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (out[i] != nullptr) continue;
    if (spec.params[i].default_value == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", spec.name,
                   spec.params[i].name);
      return false;
    }
    out[i] = spec.params[i].default_value;
  }
  return true;
}

int int_argument(PyObject* value, const FastSpec& spec, const char* name) {
  if (!PyFloat_Check(value)) {
    PyObject* index = PyNumber_Index(value);
    if (index != nullptr) {
      const long result = PyLong_AsLong(index);
      Py_DECREF(index);
      if (!(result == -1 && PyErr_Occurred()) && result >= INT_MIN && result <= INT_MAX) {
        return static_cast<int>(result);
      }
    }
    PyErr_Clear();
  }
  throw py::type_error(std::string(spec.name) + "(): " + name + " must be an int, got " +
                       py::repr(value).cast<std::string>());
}

void raise_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const py::builtin_exception& e) {
    e.set_error();
  } catch (...) {
    // groupcoord's translator (ValueError, DistributedError, DistributedTimeoutError), then
    // pybind11's defaults for the rest.
    if (translate_groupcoord_exception(std::current_exception())) return;
    try {
      throw;
    } catch (const std::bad_alloc&) {
      PyErr_SetString(PyExc_MemoryError, "std::bad_alloc");
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const std::overflow_error& e) {
      PyErr_SetString(PyExc_OverflowError, e.what());
    } catch (const std::domain_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::length_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::range_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::exception& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (...) {
      PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
    }
  }
}

void add_fast_method(py::handle cls, const FastSpec& spec, PyCFunction function) {
  auto* def = new PyMethodDef{spec.name, function, METH_FASTCALL | METH_KEYWORDS,
                              spec.doc.c_str()};  // leaked: the type refers to it forever
  PyObject* descriptor = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), def);
  if (descriptor == nullptr) throw py::error_already_set();
  py::setattr(cls, spec.name, py::reinterpret_steal<py::object>(descriptor));
}

}  // namespace python
}  // namespace groupcoord
