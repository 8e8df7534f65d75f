// One attribute or method of a Python type, looked up once per type version: the torch fast path
// (framework_array.h) reads seven attributes per tensor on every collective, and
// PyObject_GetAttr / PyObject_VectorcallMethod find each through the type's method cache (a hash
// of the name) and the instance's dict before reaching the descriptor. Here the descriptor is
// kept with the type's version tag, which CPython changes whenever the type or a base is
// modified; a read with the same type and tag calls the descriptor directly.
//
// Same results as the generic lookup, with one documented difference: a method (a non-data
// descriptor) shadowed by an attribute set on the instance itself (`x.data_ptr = ...`) is not
// seen; torch's own C++ code, which reads the tensor's C struct, ignores such attributes too.
// Types with their own attribute lookup (__getattribute__ / __getattr__, or a C tp_getattro
// such as Cython's, which cupy's classes most likely have), and members that are neither data
// descriptors (getset, member, property) nor C methods, take the generic lookup. Used with the GIL
// held only.
#pragma once

#include <Python.h>

namespace groupcoord {
namespace python {

class TypeMember {
 public:
  /// `name`: an interned str, kept alive by the caller for the member's lifetime.
  explicit TypeMember(PyObject* name) : name_(name) {}
  TypeMember(const TypeMember&) = delete;
  TypeMember& operator=(const TypeMember&) = delete;

  /// obj.name: a new reference, or null with the Python error set.
  PyObject* get(PyObject* obj);
  /// obj.name(): a new reference, or null with the Python error set.
  PyObject* call(PyObject* obj);

  PyObject* name() const { return name_; }

 private:
  enum class Kind { Generic, Attribute, Method };
  struct Found {
    Kind kind;
    PyObject* descriptor;  ///< a new reference (null for Generic)
  };
  /// The member of `type`, looked up again when the type or its version changed.
  Found find(PyTypeObject* type);

  PyObject* name_;
  PyTypeObject* type_ = nullptr;    ///< not owned: the tag below identifies it
  unsigned int version_ = 0;        ///< type_->tp_version_tag when looked up
  PyObject* descriptor_ = nullptr;  ///< owned (leaked with the member, which lives forever)
  Kind kind_ = Kind::Generic;
};

}  // namespace python
}  // namespace groupcoord
