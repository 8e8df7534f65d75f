#include "array_import.h"

#include <dlpack/dlpack.h>

#include <memory>
#include <stdexcept>

#include "deferred_release.h"
#include "groupcoord/check.h"
#include "py_tensor.h"
#include "stream_order.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

std::string type_name(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>();
}

[[noreturn]] void fail(const ArgContext& ctx, const std::string& why) {
  throw std::invalid_argument(ctx.owner + "." + ctx.op + ": " + ctx.arg + " " + why);
}

// ---- buffer protocol (numpy) -----------------------------------------------------------------

/// DType of a PEP 3118 format ("<f", "=e", "?", "l", ...), or false when unsupported.
bool dtype_from_format(const char* format, py::ssize_t itemsize, DType* dtype) {
  if (format == nullptr) return false;
  if (*format == '@' || *format == '=' || *format == '<') ++format;
  if ((*format == '>' || *format == '!') && itemsize > 1) return false;  // big-endian
  if (*format == '>' || *format == '!') ++format;
  if (format[0] == '\0' || format[1] != '\0') return false;
  switch (format[0]) {
    case '?':
      *dtype = DType::Bool;
      return true;
    case 'e':
      *dtype = DType::Float16;
      return true;
    case 'f':
      *dtype = DType::Float32;
      return true;
    case 'd':
      *dtype = DType::Float64;
      return true;
    case 'B':
      *dtype = DType::UInt8;
      return itemsize == 1;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
      if (itemsize == 1)
        *dtype = DType::Int8;
      else if (itemsize == 4)
        *dtype = DType::Int32;
      else if (itemsize == 8)
        *dtype = DType::Int64;
      else
        return false;
      return true;
    default:
      return false;
  }
}

/// Element strides of a view, or false when a stride is negative or not a whole element.
bool element_strides(const Py_buffer& view, Shape* strides) {
  for (int d = 0; d < view.ndim; ++d) {
    const py::ssize_t stride = view.strides[d];
    if (stride < 0 || stride % view.itemsize != 0) return false;
    strides->push_back(stride / view.itemsize);
  }
  return true;
}

Tensor import_numpy(py::handle obj, const ArgContext& ctx, Access access) {
  auto view = std::make_unique<Py_buffer>();
  const int flags = access == Access::Write ? PyBUF_RECORDS : PyBUF_RECORDS_RO;
  if (PyObject_GetBuffer(obj.ptr(), view.get(), flags) != 0) {
    PyErr_Clear();
    fail(ctx, access == Access::Write ? "is read-only but is written in place"
                                      : "does not export its memory (buffer protocol)");
  }
  DType dtype;
  Shape strides;
  const bool dtype_ok = dtype_from_format(view->format, view->itemsize, &dtype);
  const bool strides_ok = dtype_ok && element_strides(*view, &strides);
  if (!strides_ok) {
    const std::string format = view->format != nullptr ? view->format : "?";
    PyBuffer_Release(view.get());
    if (!dtype_ok) {
      fail(ctx, "has an unsupported dtype " + py::str(obj.attr("dtype")).cast<std::string>());
    }
    if (access == Access::Write) fail(ctx, "has negative strides and is written in place");
    py::object copy = py::module_::import("numpy").attr("ascontiguousarray")(obj);
    return import_numpy(copy, ctx, access);
  }
  Shape shape(view->shape, view->shape + view->ndim);
  void* data = view->buf;
  Py_buffer* owned = view.release();
  return Tensor::from_blob(data, shape, strides, dtype, Device::cpu(),
                           [owned](void*) { release_buffer(owned); });
}

// ---- DLPack ----------------------------------------------------------------------------------

/// (device_type, device_id) from __dlpack_device__.
std::pair<int, int> dlpack_device(py::handle obj, const ArgContext& ctx) {
  py::tuple device = obj.attr("__dlpack_device__")();
  if (device.size() != 2) fail(ctx, "has a malformed __dlpack_device__");
  return {device[0].cast<int>(), device[1].cast<int>()};
}

Device device_of(std::pair<int, int> dl, const ArgContext& ctx) {
  switch (dl.first) {
    case kDLCPU:
    case kDLCUDAHost:
      return Device::cpu();
    case kDLCUDA:
    case kDLCUDAManaged:
      return Device::cuda(dl.second);
    default:
      fail(ctx, "is on DLPack device type " + std::to_string(dl.first) +
                    " (supported: CPU, CUDA, CUDA host, CUDA managed)");
  }
}

Tensor consume_capsule(py::object capsule, const ArgContext& ctx) {
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    fail(ctx, "__dlpack__ did not return an unused 'dltensor' capsule");
  }
  Tensor tensor;
  try {
    tensor = Tensor::from_dlpack(managed);  // on a throw the capsule still owns it
  } catch (const std::invalid_argument& e) {
    fail(ctx, std::string("cannot be imported: ") + e.what());
  }
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  return tensor;
}

ImportedArray import_dlpack(py::handle obj, const ArgContext& ctx, py::handle stream) {
  ImportedArray out;
  out.library = library_of(obj);
  const Device device = device_of(dlpack_device(obj, ctx), ctx);
  py::object capsule;
  if (device.is_cuda()) {
    out.stream = resolve_stream(stream, out.library, device);
    py::object arg = py::none();
    if (out.stream) arg = py::int_(dlpack_stream_argument(*out.stream));
    capsule = obj.attr("__dlpack__")(py::arg("stream") = arg);
  } else {
    capsule = obj.attr("__dlpack__")();
  }
  out.tensor = consume_capsule(std::move(capsule), ctx);
  return out;
}

/// groupcoord.Tensor's type, looked up once (pybind11's isinstance looks the C++ type up in its
/// registry and goes through type.__instancecheck__ on every call).
bool is_py_tensor(py::handle obj) {
  static PyTypeObject* type = nullptr;
  if (type == nullptr) {
    type = reinterpret_cast<PyTypeObject*>(py::type::of<PyTensor>().ptr());  // lives as long
  }
  return PyObject_TypeCheck(obj.ptr(), type) != 0;
}

/// A groupcoord.Tensor: on a `stream=` other than the one it was made on, that stream waits for
/// it (as a DLPack producer would arrange).
ImportedArray import_py_tensor(py::handle obj, py::handle stream) {
  const PyTensor& t = obj.cast<const PyTensor&>();
  ImportedArray out;
  out.tensor = t.tensor;
  out.library = &library_by_name("dlpack");
  out.stream = t.stream;
  if (t.tensor.device().is_cuda() && !stream.is_none()) {
    out.stream = stream_handle(stream);
    if (t.stream) order_streams(t.tensor.device(), *t.stream, *out.stream);
  } else if (!out.stream) {
    out.stream = groupcoord_stream(t.tensor.device());
  }
  return out;
}

/// The fast path (framework_array.h), or false. `borrowed`: a view that owns nothing will do.
bool import_framework(py::handle obj, const ArgContext& ctx, py::handle stream, bool borrowed,
                      ImportedArray* out) {
  FrameworkArray array;
  if (!read_framework_array(obj, &array, borrowed)) {
    if (array.negative) {
      fail(ctx,
           "is a torch tensor with its negative bit set (a lazily negated view, such as "
           ".conj().imag); call .resolve_neg() on it first");
    }
    return false;
  }
  out->tensor = std::move(array.tensor);
  out->library = &framework_library(array.framework);
  if (out->tensor.device().is_cuda()) {
    out->stream = framework_call_stream(stream, array.framework, out->tensor.device());
  }
  out->framework = array.framework;
  out->object = obj;
  out->shape_object = std::move(array.shape);
  out->dtype_object = std::move(array.dtype);
  return true;
}

}  // namespace

bool is_array(py::handle obj) {
  return is_numpy_array(obj) || is_py_tensor(obj) || py::hasattr(obj, "__dlpack__");
}

ImportedArray import_array(py::handle obj, const ArgContext& ctx, Access access, py::handle stream,
                           Ownership ownership) {
  if (is_numpy_array(obj)) {
    ImportedArray out;
    out.tensor = import_numpy(obj, ctx, access);
    static const ArrayLibrary* numpy = &library_by_name("numpy");
    out.library = numpy;
    return out;
  }
  {  // first: a type comparison for anything else; CUDA views only when borrowed
    ImportedArray fast;
    if (import_framework(obj, ctx, stream, ownership == Ownership::Borrowed, &fast)) return fast;
  }
  if (is_py_tensor(obj)) return import_py_tensor(obj, stream);
  if (!py::hasattr(obj, "__dlpack__")) {
    fail(ctx, "must be an array (numpy, torch, cupy or any object with __dlpack__), got " +
                  type_name(obj));
  }
  return import_dlpack(obj, ctx, stream);
}

}  // namespace python
}  // namespace groupcoord
