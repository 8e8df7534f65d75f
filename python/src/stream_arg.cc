#include "stream_arg.h"

#include <string>

#include "framework_array.h"
#include "groupcoord/check.h"
#include "stream_order.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

/// The current stream of the caller's library on `device`, when it has one.
StreamHandle library_stream(const ArrayLibrary* library, Device device) {
  if (library == nullptr) return std::nullopt;
  if (library->name == "torch") return framework_current_stream(Framework::Torch, device.index);
  if (library->name == "cupy") return framework_current_stream(Framework::Cupy, device.index);
  return std::nullopt;
}

}  // namespace

std::uintptr_t stream_handle(py::handle stream) {
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

StreamHandle groupcoord_stream(Device device) {
#ifdef GROUPCOORD_WITH_CUDA
  if (device.is_cuda()) return cuda_stream_handle(current_cuda_stream(device));
#endif
  return std::nullopt;
}

StreamHandle resolve_stream(py::handle stream, const ArrayLibrary* library, Device device) {
  if (!device.is_cuda()) return std::nullopt;
  if (!stream.is_none()) return stream_handle(stream);
  if (StreamHandle handle = library_stream(library, device)) return handle;
  // No library stream to follow: groupcoord's own, named explicitly so that a producer's
  // __dlpack__ orders its work before it (None would mean the legacy default stream).
  return groupcoord_stream(device);
}

std::uintptr_t dlpack_stream_argument(std::uintptr_t handle) { return canonical_stream(handle); }

}  // namespace python
}  // namespace groupcoord
