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

/// What a dtype object (not a str) names. torch and numpy keep one object per type, so the
/// answer is cached by identity (the cache holds a reference, so an address is never reused
/// while cached): recv asks per call, and the string conversions cost about a microsecond.
struct KnownDType {
  DType dtype;
  bool torch;
};

std::unordered_map<PyObject*, KnownDType>& known_dtypes() {
  // Touched with the GIL held only; leaked on purpose (it holds Python objects).
  static auto* known = new std::unordered_map<PyObject*, KnownDType>();
  return *known;
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
  if (known.size() < 256) known.emplace(dtype.inc_ref().ptr(), answer);  // a handful in practice
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
