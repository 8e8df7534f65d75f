#include "type_member.h"

namespace groupcoord {
namespace python {

TypeMember::Found TypeMember::find(PyTypeObject* type) {
  if (type != type_ || type->tp_version_tag != version_ ||
      !PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
    // _PyType_Lookup is what generic attribute access calls; it also (re)assigns the version tag.
    PyObject* found = _PyType_Lookup(type, name_);  // borrowed or null
    Kind kind = Kind::Generic;
    if (found != nullptr && type->tp_getattro == PyObject_GenericGetAttr &&
        PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
      PyTypeObject* descriptor_type = Py_TYPE(found);
      if (Py_IS_TYPE(found, &PyMethodDescr_Type)) {
        kind = Kind::Method;
      } else if (descriptor_type->tp_descr_get != nullptr &&
                 descriptor_type->tp_descr_set != nullptr) {
        kind = Kind::Attribute;  // a data descriptor: it wins over any instance attribute
      }
    }
    // Every field first, the old descriptor released last: its release may run Python code
    // that reads this member again.
    PyObject* previous = descriptor_;
    Py_XINCREF(found);
    descriptor_ = found;
    type_ = type;
    version_ = type->tp_version_tag;
    kind_ = kind;
    Py_XDECREF(previous);
  }
  if (kind_ == Kind::Generic) return {Kind::Generic, nullptr};
  Py_INCREF(descriptor_);  // the caller's own: the call may run code that replaces ours
  return {kind_, descriptor_};
}

PyObject* TypeMember::get(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  const Found found = find(type);
  if (found.kind != Kind::Attribute) {
    Py_XDECREF(found.descriptor);
    return PyObject_GetAttr(obj, name_);
  }
  PyObject* value = Py_TYPE(found.descriptor)
                        ->tp_descr_get(found.descriptor, obj, reinterpret_cast<PyObject*>(type));
  Py_DECREF(found.descriptor);
  return value;
}

PyObject* TypeMember::call(PyObject* obj) {
  const Found found = find(Py_TYPE(obj));
  if (found.kind != Kind::Method) {
    Py_XDECREF(found.descriptor);
    PyObject* args[] = {obj};
    return PyObject_VectorcallMethod(name_, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  }
  // A method descriptor called with the instance first, as the bound call would.
  PyObject* value = PyObject_Vectorcall(found.descriptor, &obj, 1, nullptr);
  Py_DECREF(found.descriptor);
  return value;
}

}  // namespace python
}  // namespace groupcoord
