#include "dtype_arg.h"

#include <stdexcept>
#include <string>

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

}  // namespace

bool is_torch_dtype(py::handle dtype) {
  return !py::isinstance<py::str>(dtype) && type_module(dtype) == "torch";
}

DType dtype_from_python(py::handle dtype, const char* what) {
  std::string name;
  if (py::isinstance<py::str>(dtype)) {
    name = dtype.cast<std::string>();
  } else if (is_torch_dtype(dtype)) {
    name = py::str(dtype).cast<std::string>();  // "torch.float16"
  } else {
    name = numpy_dtype_name(dtype);
  }
  GC_CHECK(!name.empty(), what, ": dtype must be a name, a numpy or a torch dtype, got ",
           py::repr(dtype).cast<std::string>());
  return dtype_from_name(name);
}

}  // namespace python
}  // namespace groupcoord
