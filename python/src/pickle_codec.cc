#include "pickle_codec.h"

#include <string>

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// The pickle module's functions, looked up once (the module lives as long as the interpreter).
struct Pickle {
  py::handle dumps;
  py::handle loads;
  py::object protocol;
};

const Pickle& pickle() {
  static const Pickle* instance = [] {
    py::module_ module = py::module_::import("pickle");
    return new Pickle{py::object(module.attr("dumps")).release(),
                      py::object(module.attr("loads")).release(), module.attr("HIGHEST_PROTOCOL")};
  }();
  return *instance;
}

}  // namespace

Bytes dumps(py::handle obj) {
  py::object data = pickle().dumps(obj, pickle().protocol);
  char* buffer = nullptr;
  Py_ssize_t size = 0;
  if (PyBytes_AsStringAndSize(data.ptr(), &buffer, &size) != 0) throw py::error_already_set();
  return Bytes(buffer, static_cast<std::size_t>(size));
}

py::object loads(const Bytes& data) {
  py::memoryview view =
      py::memoryview::from_memory(data.data(), static_cast<py::ssize_t>(data.size()));
  return pickle().loads(view);
}

}  // namespace python
}  // namespace groupcoord
