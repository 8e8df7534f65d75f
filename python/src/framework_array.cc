#include "framework_array.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "groupcoord/check.h"
#include "py_tensor.h"
#include "stream_arg.h"
#include "stream_order.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

// Every cache below is touched with the GIL held only, and leaked on purpose: it holds Python
// objects that must not be released after the interpreter is gone.

/// sys.modules[name], or a null object when the module is not imported. Never imports.
py::object imported_module(const char* name) {
  PyObject* module = PyImport_GetModule(py::str(name).ptr());  // new reference or null
  if (module == nullptr) {
    PyErr_Clear();
    return py::object();
  }
  return py::reinterpret_steal<py::object>(module);
}

/// torch's objects the fast path calls, found once torch is imported.
struct TorchApi {
  py::object module;
  py::object tensor_type;  ///< torch.Tensor
  py::object raw_stream;   ///< torch._C._cuda_getCurrentRawStream (None when absent)
};

/// cupy's, likewise.
struct CupyApi {
  py::object ndarray_type;        ///< cupy.ndarray
  py::object get_current_stream;  ///< cupy.cuda.get_current_stream
  py::object get_device;          ///< cupy.cuda.runtime.getDevice
  py::object device;              ///< cupy.cuda.Device
  py::object empty;               ///< cupy.empty
  /// Whether get_current_stream takes a device id (cupy >= 10: per-device current streams):
  /// -1 not known yet, 0 no, 1 yes.
  int stream_takes_device = -1;
};

const TorchApi* torch_api() {
  static TorchApi* api = nullptr;
  if (api != nullptr) return api;
  py::object torch = imported_module("torch");
  if (!torch || !py::hasattr(torch, "Tensor")) return nullptr;  // not (yet fully) imported
  py::object raw = py::getattr(torch.attr("_C"), "_cuda_getCurrentRawStream", py::none());
  api = new TorchApi{torch, torch.attr("Tensor"), raw};
  return api;
}

CupyApi* cupy_api() {
  static CupyApi* api = nullptr;
  if (api != nullptr) return api;
  py::object cupy = imported_module("cupy");
  if (!cupy || !py::hasattr(cupy, "ndarray") || !py::hasattr(cupy, "cuda")) return nullptr;
  py::object cuda = cupy.attr("cuda");
  api = new CupyApi{cupy.attr("ndarray"), cuda.attr("get_current_stream"),
                    cuda.attr("runtime").attr("getDevice"), cuda.attr("Device"),
                    cupy.attr("empty")};
  return api;
}

bool has_type(py::handle obj, const py::object& type) {
  return reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())) == type.ptr();
}

/// Runs `fn` with cupy's current device set to `index` (a no-op when it already is).
template <typename Fn>
auto on_cupy_device(const CupyApi& api, int index, Fn&& fn) -> decltype(fn()) {
  if (py::cast<int>(api.get_device()) == index) return fn();
  py::object device = api.device(index);
  device.attr("__enter__")();
  try {
    auto result = fn();
    device.attr("__exit__")(py::none(), py::none(), py::none());
    return result;
  } catch (...) {
    device.attr("__exit__")(py::none(), py::none(), py::none());
    throw;
  }
}

/// The DType of a torch.dtype or numpy.dtype object (cupy's dtypes are numpy's), by identity:
/// both libraries keep one object per type. nullopt when groupcoord has no such type.
std::optional<DType> dtype_of(py::handle dtype, Framework framework) {
  static auto* cache = new std::unordered_map<PyObject*, std::optional<DType>>();
  auto it = cache->find(dtype.ptr());
  if (it != cache->end()) return it->second;
  std::optional<DType> value;
  try {
    // "torch.bfloat16" / "float16": dtype_from_name takes both spellings.
    const std::string name = framework == Framework::Torch
                                 ? py::str(dtype).cast<std::string>()
                                 : py::str(dtype.attr("name")).cast<std::string>();
    value = dtype_from_name(name);
  } catch (const std::invalid_argument&) {
  } catch (const py::error_already_set&) {
  }
  if (cache->size() < 256) {  // a handful of dtypes in practice; never grow without bound
    cache->emplace(dtype.inc_ref().ptr(), value);  // the key stays alive with the cache
  }
  return value;
}

/// The ints of a tuple (torch.Size is one), false for anything else.
bool read_ints(py::handle seq, Shape* out) {
  if (!PyTuple_Check(seq.ptr())) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq.ptr());
  out->resize(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long value = PyLong_AsLongLong(PyTuple_GET_ITEM(seq.ptr(), i));
    if (value == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    (*out)[static_cast<std::size_t>(i)] = value;
  }
  return true;
}

void* address(py::handle value) { return reinterpret_cast<void*>(value.cast<std::uintptr_t>()); }

bool read_torch(py::handle obj, FrameworkArray* out) {
  if (obj.attr("is_cuda").ptr() != Py_True) return false;
  const std::optional<DType> dtype = dtype_of(obj.attr("dtype"), Framework::Torch);
  Shape shape, strides;  // torch strides count elements, as groupcoord's
  if (!dtype || !read_ints(obj.attr("shape"), &shape) || !read_ints(obj.attr("stride")(), &strides)) {
    return false;
  }
  const int index = obj.attr("get_device")().cast<int>();
  out->framework = Framework::Torch;
  out->tensor = Tensor::from_blob(address(obj.attr("data_ptr")()), shape, strides, *dtype,
                                  Device::cuda(index));
  return true;
}

bool read_cupy(py::handle obj, FrameworkArray* out) {
  const std::optional<DType> dtype = dtype_of(obj.attr("dtype"), Framework::Cupy);
  Shape shape, strides;  // cupy strides count bytes
  if (!dtype || !read_ints(obj.attr("shape"), &shape) || !read_ints(obj.attr("strides"), &strides)) {
    return false;
  }
  const auto item = static_cast<std::int64_t>(dtype_size(*dtype));
  for (std::int64_t& stride : strides) {
    if (stride < 0 || stride % item != 0) return false;  // DLPack's path copies or refuses
    stride /= item;
  }
  const int index = obj.attr("device").attr("id").cast<int>();
  out->framework = Framework::Cupy;
  out->tensor = Tensor::from_blob(address(obj.attr("data").attr("ptr")), shape, strides, *dtype,
                                  Device::cuda(index));
  return true;
}

}  // namespace

bool read_framework_array(py::handle obj, FrameworkArray* out) {
  try {
    if (const TorchApi* torch = torch_api(); torch != nullptr && has_type(obj, torch->tensor_type)) {
      return read_torch(obj, out);
    }
    if (const CupyApi* cupy = cupy_api(); cupy != nullptr && has_type(obj, cupy->ndarray_type)) {
      return read_cupy(obj, out);
    }
  } catch (const py::error_already_set&) {
    // A tensor whose memory these calls cannot describe (sparse, meta, ...): DLPack's path
    // reports it properly.
  } catch (const py::cast_error&) {
  }
  return false;
}

std::uintptr_t framework_current_stream(Framework framework, int index) {
  if (framework == Framework::Torch) {
    const TorchApi* api = torch_api();
    GC_ASSERT(api != nullptr, "torch's current stream asked for, but torch is not imported");
    if (!api->raw_stream.is_none()) return api->raw_stream(index).cast<std::uintptr_t>();
    return api->module.attr("cuda").attr("current_stream")(index).attr("cuda_stream")
        .cast<std::uintptr_t>();
  }
  CupyApi* api = cupy_api();
  GC_ASSERT(api != nullptr, "cupy's current stream asked for, but cupy is not imported");
  if (api->stream_takes_device != 0) {
    try {
      const auto handle = api->get_current_stream(index).attr("ptr").cast<std::uintptr_t>();
      api->stream_takes_device = 1;
      return handle;
    } catch (py::error_already_set& e) {
      if (api->stream_takes_device == 1 || !e.matches(PyExc_TypeError)) throw;
      api->stream_takes_device = 0;  // cupy < 10: one current stream, read on the device
    }
  }
  return on_cupy_device(*api, index, [&] {
    return api->get_current_stream().attr("ptr").cast<std::uintptr_t>();
  });
}

std::uintptr_t framework_call_stream(py::handle stream, Framework framework, Device device) {
  const std::uintptr_t current = framework_current_stream(framework, device.index);
  if (stream.is_none()) return current;
  const std::uintptr_t chosen = stream_handle(stream);
  order_streams(device, current, chosen);
  return chosen;
}

py::object framework_empty(py::handle like, Framework framework, const Tensor& like_tensor,
                           const Shape& shape, Tensor* view) {
  py::tuple dims = int_tuple(shape);
  py::object out;
  void* data = nullptr;
  if (framework == Framework::Torch) {
    out = like.attr("new_empty")(dims);  // like's dtype and device, torch's current stream
    data = address(out.attr("data_ptr")());
  } else {
    const CupyApi& api = *cupy_api();
    out = on_cupy_device(api, like_tensor.device().index,
                         [&] { return api.empty(dims, "dtype"_a = like.attr("dtype")); });
    data = address(out.attr("data").attr("ptr"));
  }
  *view = Tensor::from_blob(data, shape, like_tensor.dtype(), like_tensor.device());
  return out;
}

const ArrayLibrary& framework_library(Framework framework) {
  static const ArrayLibrary* torch = nullptr;
  static const ArrayLibrary* cupy = nullptr;
  const ArrayLibrary*& library = framework == Framework::Torch ? torch : cupy;
  if (library == nullptr) {
    library = &library_by_name(framework == Framework::Torch ? "torch" : "cupy");
  }
  return *library;
}

}  // namespace python
}  // namespace groupcoord
