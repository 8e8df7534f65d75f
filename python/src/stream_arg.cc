#include "stream_arg.h"

#include <string>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

std::uintptr_t handle_from_object(py::handle stream) {
  if (py::isinstance<py::int_>(stream)) return stream.cast<std::uintptr_t>();
  if (py::hasattr(stream, "__cuda_stream__")) {  // CUDA Python: (version, handle)
    py::tuple value = stream.attr("__cuda_stream__")();
    return value[1].cast<std::uintptr_t>();
  }
  if (py::hasattr(stream, "cuda_stream")) return stream.attr("cuda_stream").cast<std::uintptr_t>();
  if (py::hasattr(stream, "ptr")) return stream.attr("ptr").cast<std::uintptr_t>();
  GC_CHECK(false,
           "stream must be an int handle or an object with cuda_stream, __cuda_stream__ "
           "or ptr, got ",
           py::repr(stream).cast<std::string>());
  return 0;
}

/// The current stream of the caller's library on `device`, when it has one.
StreamHandle library_stream(const ArrayLibrary* library, Device device) {
  if (library == nullptr) return std::nullopt;
  if (library->name == "torch") {
    py::object cuda = py::module_::import("torch").attr("cuda");
    return cuda.attr("current_stream")(device.index).attr("cuda_stream").cast<std::uintptr_t>();
  }
  if (library->name == "cupy") {
    py::object cuda = py::module_::import("cupy").attr("cuda");
    py::object dev = cuda.attr("Device")(device.index);
    dev.attr("__enter__")();
    std::uintptr_t handle = cuda.attr("get_current_stream")().attr("ptr").cast<std::uintptr_t>();
    dev.attr("__exit__")(py::none(), py::none(), py::none());
    return handle;
  }
  return std::nullopt;
}

}  // namespace

StreamHandle resolve_stream(py::handle stream, const ArrayLibrary* library, Device device) {
  if (!device.is_cuda()) return std::nullopt;
  if (!stream.is_none()) return handle_from_object(stream);
  return library_stream(library, device);
}

std::uintptr_t dlpack_stream_argument(std::uintptr_t handle) { return handle == 0 ? 1 : handle; }

}  // namespace python
}  // namespace groupcoord
