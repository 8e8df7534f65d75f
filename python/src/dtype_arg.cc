#include "dtype_arg.h"

#include <stdexcept>
#include <string>
#include <unordered_map>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

std::string type_module(py::handle object) {
  return py::str(py::type::handle_of(object).attr("__module__")).cast<std::string>();
}

/// numpy's canonical name of whatever numpy.dtype() accepts, or "" when numpy rejects it.
std::string numpy_dtype_name(py::handle dtype) {
  try {
    return py::module_::import("numpy").attr("dtype")(dtype).attr("name").cast<std::string>();
  } catch (const py::error_already_set&) {
    return "";
  }
}

/// What a dtype object (not a str) names. torch keeps one object per dtype, and numpy one class
/// per scalar type (numpy.float32): those are cached by identity (the cache holds a reference,
/// so an address is never reused while cached), as recv asks per call and the string
/// conversions cost about a microsecond. Anything else (numpy.dtype instances, which numpy may
/// make anew, objects with a .dtype attribute) is read every time.
struct KnownDType {
  DType dtype;
  bool torch;
};

std::unordered_map<PyObject*, KnownDType>& known_dtypes() {
  // Touched with the GIL held only; leaked on purpose (it holds Python objects).
  static auto* known = new std::unordered_map<PyObject*, KnownDType>();
  return *known;
}

/// Whether `dtype` is a numpy scalar type (a subclass of numpy.generic). numpy is imported.
bool numpy_scalar_type(py::handle dtype) {
  if (!PyType_Check(dtype.ptr())) return false;
  py::object generic = py::module_::import("numpy").attr("generic");
  const int subclass = PyObject_IsSubclass(dtype.ptr(), generic.ptr());
  if (subclass < 0) PyErr_Clear();
  return subclass == 1;
}

KnownDType describe(py::handle dtype, const char* what) {
  auto& known = known_dtypes();
  if (auto it = known.find(dtype.ptr()); it != known.end()) return it->second;
  const bool torch = type_module(dtype) == "torch";
  const std::string name = torch ? py::str(dtype).cast<std::string>()  // "torch.float16"
                                 : numpy_dtype_name(dtype);
  GC_CHECK(!name.empty(), what, ": dtype must be a name, a numpy or a torch dtype, got ",
           py::repr(dtype).cast<std::string>());
  const KnownDType answer{dtype_from_name(name), torch};
  // A handful in practice; never grow without bound. emplace after the calls above, which may
  // have let another thread insert the same key (then nothing is added, nor referenced).
  if (known.size() < 256 && (torch || numpy_scalar_type(dtype)) &&
      known.emplace(dtype.ptr(), answer).second) {
    dtype.inc_ref();
  }
  return answer;
}

}  // namespace

bool is_torch_dtype(py::handle dtype) {
  if (py::isinstance<py::str>(dtype)) return false;
  const auto& known = known_dtypes();
  if (auto it = known.find(dtype.ptr()); it != known.end()) return it->second.torch;
  return type_module(dtype) == "torch";
}

DType dtype_from_python(py::handle dtype, const char* what) {
  if (py::isinstance<py::str>(dtype)) return dtype_from_name(dtype.cast<std::string>());
  return describe(dtype, what).dtype;
}

}  // namespace python
}  // namespace groupcoord
