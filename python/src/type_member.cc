#include "type_member.h"

namespace groupcoord {
namespace python {

TypeMember::Kind TypeMember::kind_for(PyTypeObject* type) {
  if (type == type_ && type->tp_version_tag == version_ &&
      PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG)) {
    return kind_;
  }
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
  Py_XINCREF(found);
  Py_XDECREF(descriptor_);
  descriptor_ = found;
  type_ = type;
  version_ = type->tp_version_tag;
  kind_ = kind;
  return kind;
}

PyObject* TypeMember::get(PyObject* obj) {
  PyTypeObject* type = Py_TYPE(obj);
  if (kind_for(type) == Kind::Attribute) {
    return Py_TYPE(descriptor_)->tp_descr_get(descriptor_, obj, reinterpret_cast<PyObject*>(type));
  }
  return PyObject_GetAttr(obj, name_);
}

PyObject* TypeMember::call(PyObject* obj) {
  if (kind_for(Py_TYPE(obj)) == Kind::Method) {
    // A method descriptor called with the instance first, as the bound call would.
    return PyObject_Vectorcall(descriptor_, &obj, 1, nullptr);
  }
  PyObject* args[] = {obj};
  return PyObject_VectorcallMethod(name_, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

}  // namespace python
}  // namespace groupcoord
