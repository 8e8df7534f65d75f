// The hot tensor methods (all_reduce, all_gather(v), reduce_scatter(v), broadcast) as raw CPython
// methods: METH_FASTCALL | METH_KEYWORDS, arguments matched against interned names. pybind11's
// dispatcher builds an argument tuple, two vectors and, with keywords, a copy of the keyword
// dict plus a temporary string per parameter on every call: about 0.25 µs per positional call and
// 0.5-0.75 µs with `out=` on the 2-core build machine, against 0.03-0.05 µs here. The methods
// keep the names, order, defaults, keyword-only parameters and docstrings (with a text
// signature, so help() and inspect.signature read them) they had under pybind11; C++
// exceptions become the same Python exceptions (errors.h).
#pragma once

#include <pybind11/pybind11.h>

#include <initializer_list>
#include <memory>
#include <vector>

namespace groupcoord {
namespace python {

/// One parameter after `self`.
struct FastParam {
  const char* name;
  /// Null: required. Else the default, a new reference owned (forever) by the spec.
  PyObject* default_value = nullptr;
  bool keyword_only = false;
};

/// A method: its name, parameters and docstring (the text signature is added).
struct FastSpec {
  FastSpec(const char* name, std::initializer_list<FastParam> params, const char* doc);
  const char* name;
  std::vector<FastParam> params;
  std::vector<PyObject*> interned;  ///< the parameters' names, interned
  std::size_t positional = 0;       ///< parameters that may be passed by position
  std::string doc;                  ///< "name($self, ...)\n--\n\n" + doc
};

/// A default of None / of an int, for FastParam::default_value.
PyObject* default_none();
PyObject* default_int(long value);

/// Fills `out[i]` (borrowed references) with the arguments of `spec`'s parameters from a
/// vectorcall; false with a TypeError set on a wrong call (too many positional arguments, an
/// unknown or repeated keyword, a missing required argument).
bool parse_fast_arguments(const FastSpec& spec, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames, PyObject** out);

/// `value` as a C int, as pybind11 converts one (ints, bools, objects with __index__; not
/// floats); pybind11::type_error naming the method and parameter otherwise.
int int_argument(PyObject* value, const FastSpec& spec, const char* name);

/// `self` of a fast method of a pybind11 class held by std::shared_ptr<T>: a copy of its
/// holder. CPython has checked that `self` is an instance of the class (or of
/// a subclass) before calling the method. The class's pybind11 record is found once, so a call
/// pays no lookup of T's type by its C++ name (a string hash: about 400 of the 845 instructions a
/// call of the binding made before its array was read, callgrind); anything unusual goes
/// through pybind11's own cast.
template <typename T>
std::shared_ptr<T> self_holder(pybind11::handle self) {
  static const pybind11::detail::type_info* const type =
      pybind11::detail::get_type_info(typeid(T), /*throw_if_missing=*/true);
  auto* instance = reinterpret_cast<pybind11::detail::instance*>(self.ptr());
  if (Py_TYPE(self.ptr()) == type->type && instance->simple_layout &&
      instance->simple_holder_constructed) {
    return pybind11::detail::value_and_holder(instance, type, 0, 0)
        .template holder<std::shared_ptr<T>>();
  }
  return self.cast<std::shared_ptr<T>>();
}

/// The body of a method: `self` and the parsed arguments, in the spec's order.
using FastBody = pybind11::object (*)(pybind11::handle self, PyObject* const* args);

/// Sets the Python error for the C++ exception being handled (call inside a catch block): the
/// translation pybind11 applies (errors.h's translator first).
void raise_current_exception();

template <const FastSpec& Spec, FastBody Body>
PyObject* fast_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  try {
    PyObject* parsed[8];
    if (!parse_fast_arguments(Spec, args, nargs, kwnames, parsed)) return nullptr;
    return Body(self, parsed).release().ptr();
  } catch (...) {
    raise_current_exception();
    return nullptr;
  }
}

/// Adds `Spec`'s method, running `Body`, to the class `cls` (replacing any attribute of that
/// name).
void add_fast_method(pybind11::handle cls, const FastSpec& spec, PyCFunction function);

template <const FastSpec& Spec, FastBody Body>
void add_fast_method(pybind11::handle cls) {
  add_fast_method(
      cls, Spec,
      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(&fast_method<Spec, Body>)));
}

}  // namespace python
}  // namespace groupcoord
