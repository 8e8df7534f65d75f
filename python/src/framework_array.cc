#include "framework_array.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "deferred_release.h"
#include "dtype_arg.h"
#include "groupcoord/check.h"
#include "py_tensor.h"
#include "stream_arg.h"
#include "stream_order.h"
#include "type_member.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

// Every cache below is touched with the GIL held only, and leaked on purpose: it holds Python
// objects that must not be released after the interpreter is gone.

PyObject* intern(const char* text) {
  PyObject* name = PyUnicode_InternFromString(text);
  if (name == nullptr) throw py::error_already_set();
  return name;
}

/// The attribute and method names the fast path uses, interned once: a lookup by an interned
/// name skips building (and hashing) a temporary string per call.
struct Names {
  PyObject* torch = intern("torch");
  PyObject* cupy = intern("cupy");
  PyObject* is_cuda = intern("is_cuda");
  PyObject* is_cpu = intern("is_cpu");
  PyObject* requires_grad = intern("requires_grad");
  PyObject* is_neg = intern("is_neg");
  PyObject* dtype = intern("dtype");
  PyObject* shape = intern("shape");
  PyObject* stride = intern("stride");
  PyObject* is_contiguous = intern("is_contiguous");
  PyObject* strides = intern("strides");
  PyObject* get_device = intern("get_device");
  PyObject* data_ptr = intern("data_ptr");
  PyObject* new_empty = intern("new_empty");
  PyObject* data = intern("data");
  PyObject* ptr = intern("ptr");
  PyObject* device_id = intern("device_id");
};

const Names& names() {
  static const Names* names = new Names();
  return *names;
}

/// The members the fast path reads, one cache per type that has them (type_member.h).
struct TorchMembers {
  TypeMember is_cuda{names().is_cuda};
  TypeMember is_cpu{names().is_cpu};
  TypeMember requires_grad{names().requires_grad};
  TypeMember is_neg{names().is_neg};
  TypeMember dtype{names().dtype};
  TypeMember shape{names().shape};
  TypeMember stride{names().stride};
  TypeMember is_contiguous{names().is_contiguous};
  TypeMember get_device{names().get_device};
  TypeMember data_ptr{names().data_ptr};
};

struct CupyMembers {
  TypeMember dtype{names().dtype};  // cupy.ndarray
  TypeMember shape{names().shape};
  TypeMember strides{names().strides};
  TypeMember data{names().data};
  TypeMember ptr{names().ptr};  // cupy.cuda.MemoryPointer
  TypeMember device_id{names().device_id};
};

TorchMembers& torch_members() {
  static auto* members = new TorchMembers();
  return *members;
}

CupyMembers& cupy_members() {
  static auto* members = new CupyMembers();
  return *members;
}

/// New reference or null (with the Python error set) as an object.
py::object steal(PyObject* value) { return py::reinterpret_steal<py::object>(value); }

/// obj.name (null object on error, the error set).
py::object get_attr(PyObject* obj, PyObject* name) { return steal(PyObject_GetAttr(obj, name)); }
py::object get_attr(PyObject* obj, TypeMember& member) { return steal(member.get(obj)); }

/// obj.member() (null object on error, the error set).
py::object call_method(PyObject* obj, TypeMember& member) { return steal(member.call(obj)); }

/// fn(index) (null object on error, the error set).
py::object call_with_int(PyObject* fn, long index) {
  py::object arg = steal(PyLong_FromLong(index));
  if (!arg) return arg;
  PyObject* args[] = {nullptr, arg.ptr()};
  return steal(PyObject_Vectorcall(fn, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
}

/// `value` as an unsigned integer (a pointer or stream handle); throws error_already_set.
std::uintptr_t to_address(const py::object& value) {
  if (!value) throw py::error_already_set();
  const unsigned long long address = PyLong_AsUnsignedLongLong(value.ptr());
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    throw py::error_already_set();
  }
  return static_cast<std::uintptr_t>(address);
}

/// sys.modules[name], or a null object when the module is not imported. Never imports.
py::object imported_module(PyObject* name) {
  PyObject* module = PyImport_GetModule(name);  // new reference or null
  if (module == nullptr) PyErr_Clear();
  return steal(module);
}

/// torch's objects the fast path calls, found once torch is imported.
struct TorchApi {
  py::object module;
  PyObject* tensor_type;          ///< torch.Tensor
  py::object raw_stream;          ///< torch._C._cuda_getCurrentRawStream (None when absent)
  py::object empty_like;          ///< torch.empty_like
  py::object empty;               ///< torch.empty
  py::object dtype_device_names;  ///< ("dtype", "device"): keyword names of a vectorcall
};

/// cupy's, likewise.
struct CupyApi {
  py::object module;
  PyObject* ndarray_type;         ///< cupy.ndarray (its constructor is what cupy.empty calls)
  py::object get_current_stream;  ///< cupy.cuda.get_current_stream
  py::object get_device;          ///< cupy.cuda.runtime.getDevice
  py::object device;              ///< cupy.cuda.Device
  /// Whether get_current_stream takes a device id (cupy >= 10: per-device current streams):
  /// -1 not known yet, 0 no, 1 yes.
  int stream_takes_device = -1;
};

const TorchApi* torch_api() {
  static TorchApi* api = nullptr;
  if (api != nullptr) return api;
  py::object torch = imported_module(names().torch);
  if (!torch || !py::hasattr(torch, "Tensor")) return nullptr;  // not (yet fully) imported
  py::object raw = py::getattr(torch.attr("_C"), "_cuda_getCurrentRawStream", py::none());
  api = new TorchApi{torch,
                     py::object(torch.attr("Tensor")).release().ptr(),
                     raw,
                     torch.attr("empty_like"),
                     torch.attr("empty"),
                     py::make_tuple(py::str("dtype"), py::str("device"))};
  return api;
}

CupyApi* cupy_api() {
  static CupyApi* api = nullptr;
  if (api != nullptr) return api;
  py::object cupy = imported_module(names().cupy);
  if (!cupy || !py::hasattr(cupy, "ndarray") || !py::hasattr(cupy, "cuda")) return nullptr;
  py::object cuda = cupy.attr("cuda");
  api = new CupyApi{cupy, py::object(cupy.attr("ndarray")).release().ptr(),
                    cuda.attr("get_current_stream"), cuda.attr("runtime").attr("getDevice"),
                    cuda.attr("Device")};
  return api;
}

/// torch.device("cuda", index), made once per index.
py::handle torch_cuda_device(const TorchApi& api, int index) {
  static auto* devices = new std::vector<py::object>();
  const auto slot = static_cast<std::size_t>(index);
  if (slot < devices->size() && (*devices)[slot]) return (*devices)[slot];
  // Made before the table is touched: the call may let another thread run (and resize it).
  py::object device = api.module.attr("device")("cuda", index);
  if (devices->size() <= slot) devices->resize(slot + 1);
  (*devices)[slot] = device;
  return (*devices)[slot];
}

/// numpy's (and so cupy's) name of `dtype` as a str, made once per dtype; a null handle for the
/// types numpy lacks (bfloat16, fp8). Passed to cupy instead of the caller's dtype object, which
/// numpy may read otherwise than groupcoord ("float" is float64 to numpy, float32 here).
py::handle numpy_dtype_name(DType dtype) {
  static auto* names = new std::vector<py::object>(static_cast<std::size_t>(kNumDTypes));
  switch (dtype) {
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return py::handle();
    default:
      break;
  }
  py::object& name = (*names)[static_cast<std::size_t>(dtype)];
  if (!name) name = py::str(dtype_name(dtype));
  return name;
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

/// cupy.ndarray(dims, dtype) on device `index` (what cupy.empty does); its address in *data.
py::object new_cupy_array(const CupyApi& api, int index, py::handle dims, py::handle dtype,
                          std::uintptr_t* data) {
  py::object array = on_cupy_device(api, index, [&] {
    PyObject* args[] = {nullptr, dims.ptr(), dtype.ptr()};
    py::object made = steal(PyObject_Vectorcall(api.ndarray_type, args + 1,
                                                2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    if (!made) throw py::error_already_set();
    return made;
  });
  py::object memory = get_attr(array.ptr(), cupy_members().data);
  if (!memory) throw py::error_already_set();
  *data = to_address(get_attr(memory.ptr(), cupy_members().ptr));
  return array;
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

/// The ints of a tuple (torch.Size is one), false for anything else (a Python error may be set).
bool read_ints(const py::object& seq, Shape* out) {
  if (!seq || !PyTuple_Check(seq.ptr())) return false;
  const Py_ssize_t n = PyTuple_GET_SIZE(seq.ptr());
  out->resize(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long value = PyLong_AsLongLong(PyTuple_GET_ITEM(seq.ptr(), i));
    if (value == -1 && PyErr_Occurred()) return false;
    (*out)[static_cast<std::size_t>(i)] = value;
  }
  return true;
}

/// An int attribute or call result as a C int; false on error (a Python error may be set).
bool read_int(const py::object& value, int* out) {
  if (!value) return false;
  const long index = PyLong_AsLong(value.ptr());
  if (index == -1 && PyErr_Occurred()) return false;
  *out = static_cast<int>(index);
  return true;
}

bool read_address(const py::object& value, void** out) {
  if (!value) return false;
  const unsigned long long address = PyLong_AsUnsignedLongLong(value.ptr());
  if (address == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return false;
  *out = reinterpret_cast<void*>(static_cast<std::uintptr_t>(address));
  return true;
}

/// A view of a CPU array's memory that keeps the array alive. Host collectives may finish on a
/// helper thread after the caller has returned (blocking_call.h), so a CPU view owns what it views,
/// as an import through DLPack does; its last reference may die on any thread
/// (deferred_release.h). `strides` null: compact. Needs the GIL.
Tensor owning_cpu_view(PyObject* owner, void* data, const Shape& shape, const Shape* strides,
                       DType dtype) {
  auto release = [owner](void*) { release_reference(owner); };
  Py_INCREF(owner);
  try {
    return strides != nullptr
               ? Tensor::from_blob(data, shape, *strides, dtype, Device::cpu(), release)
               : Tensor::from_blob(data, shape, dtype, Device::cpu(), release);
  } catch (const std::invalid_argument&) {
    // Refused before the deleter was attached (any later failure has run it already).
    Py_DECREF(owner);
    throw;
  }
}

/// Whether a torch tensor that is not on CUDA is a plain CPU tensor this path may read: on the
/// CPU and not requiring grad (DLPack refuses that, and says why). Two calls.
bool plain_torch_cpu(PyObject* obj) {
  TorchMembers& n = torch_members();
  py::object is_cpu = get_attr(obj, n.is_cpu);
  if (!is_cpu || is_cpu.ptr() != Py_True) return false;
  py::object grad = get_attr(obj, n.requires_grad);
  return grad && grad.ptr() == Py_False;
}

/// torch: is_cuda, is_neg(), dtype, shape, is_contiguous() (and stride() when it is not),
/// get_device(), data_ptr() — seven calls on CUDA (only when `cuda`: a CUDA view owns nothing);
/// on the CPU plain_torch_cpu's two instead of get_device(). A tensor with its negative bit set (a
/// lazily negated view, such as `.conj().imag`) is refused with out->negative set: its memory
/// holds the values un-negated, and torch 1.13's DLPack export passes them on as they are.
bool read_torch(PyObject* obj, bool cuda, FrameworkArray* out) {
  TorchMembers& n = torch_members();
  py::object is_cuda = get_attr(obj, n.is_cuda);
  if (!is_cuda) return false;
  const bool on_cuda = is_cuda.ptr() == Py_True;
  if (on_cuda ? !cuda : !plain_torch_cpu(obj)) return false;
  py::object negative = call_method(obj, n.is_neg);
  if (!negative || negative.ptr() != Py_False) {
    out->negative = negative && negative.ptr() == Py_True;
    return false;
  }
  py::object dtype_object = get_attr(obj, n.dtype);
  if (!dtype_object) return false;
  const std::optional<DType> dtype = dtype_of(dtype_object, Framework::Torch);
  if (!dtype) return false;
  Shape shape, strides;  // torch strides count elements, as groupcoord's
  py::object shape_object = get_attr(obj, n.shape);
  if (!read_ints(shape_object, &shape)) return false;
  // A contiguous tensor's strides are the compact ones (up to those of size-1 dimensions, which
  // address nothing); is_contiguous() is the cheaper call (H100 host: 89 ns against 117).
  py::object contiguous = call_method(obj, n.is_contiguous);
  if (!contiguous) return false;
  const bool compact = contiguous.ptr() == Py_True;
  if (!compact && !read_ints(call_method(obj, n.stride), &strides)) return false;
  int index = 0;
  void* data = nullptr;
  if ((on_cuda && !read_int(call_method(obj, n.get_device), &index)) ||
      !read_address(call_method(obj, n.data_ptr), &data)) {
    return false;
  }
  out->framework = Framework::Torch;
  if (on_cuda) {
    out->tensor = compact ? Tensor::from_blob(data, shape, *dtype, Device::cuda(index))
                          : Tensor::from_blob(data, shape, strides, *dtype, Device::cuda(index));
  } else {
    out->tensor = owning_cpu_view(obj, data, shape, compact ? nullptr : &strides, *dtype);
  }
  out->shape = std::move(shape_object);
  out->dtype = std::move(dtype_object);
  return true;
}

/// cupy: dtype, shape, strides, data, data.ptr, data.device_id — attribute reads only.
bool read_cupy(PyObject* obj, FrameworkArray* out) {
  CupyMembers& n = cupy_members();
  py::object dtype_object = get_attr(obj, n.dtype);
  if (!dtype_object) return false;
  const std::optional<DType> dtype = dtype_of(dtype_object, Framework::Cupy);
  if (!dtype) return false;
  Shape shape, strides;  // cupy strides count bytes
  py::object shape_object = get_attr(obj, n.shape);
  if (!read_ints(shape_object, &shape) || !read_ints(get_attr(obj, n.strides), &strides)) {
    return false;
  }
  const auto item = static_cast<std::int64_t>(dtype_size(*dtype));
  for (std::int64_t& stride : strides) {
    if (stride < 0 || stride % item != 0) return false;  // DLPack's path copies or refuses
    stride /= item;
  }
  py::object memory = get_attr(obj, n.data);  // a cupy.cuda.MemoryPointer
  if (!memory) return false;
  int index = 0;
  void* data = nullptr;
  if (!read_int(get_attr(memory.ptr(), n.device_id), &index) ||
      !read_address(get_attr(memory.ptr(), n.ptr), &data)) {
    return false;
  }
  out->framework = Framework::Cupy;
  out->tensor = Tensor::from_blob(data, shape, strides, *dtype, Device::cuda(index));
  out->shape = std::move(shape_object);
  out->dtype = std::move(dtype_object);
  return true;
}

}  // namespace

bool read_framework_array(py::handle obj, FrameworkArray* out, bool borrowed) {
  bool ok = false;
  try {
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
    if (const TorchApi* torch = torch_api(); torch != nullptr && type == torch->tensor_type) {
      ok = read_torch(obj.ptr(), /*cuda=*/borrowed, out);
    } else if (!borrowed) {
      ok = false;  // a CUDA view does not own its memory
    } else if (const CupyApi* cupy = cupy_api(); cupy != nullptr && type == cupy->ndarray_type) {
      ok = read_cupy(obj.ptr(), out);
    }
  } catch (const py::error_already_set&) {
    // A tensor whose memory these calls cannot describe (sparse, meta, ...): DLPack's path
    // reports it properly.
    ok = false;
  } catch (const py::cast_error&) {
    ok = false;
  }
  if (!ok) PyErr_Clear();
  return ok;
}

std::uintptr_t framework_current_stream(Framework framework, int index) {
  if (framework == Framework::Torch) {
    const TorchApi* api = torch_api();
    GC_ASSERT(api != nullptr, "torch's current stream asked for, but torch is not imported");
    if (!api->raw_stream.is_none()) return to_address(call_with_int(api->raw_stream.ptr(), index));
    return api->module.attr("cuda")
        .attr("current_stream")(index)
        .attr("cuda_stream")
        .cast<std::uintptr_t>();
  }
  CupyApi* api = cupy_api();
  GC_ASSERT(api != nullptr, "cupy's current stream asked for, but cupy is not imported");
  if (api->stream_takes_device != 0) {
    py::object stream = call_with_int(api->get_current_stream.ptr(), index);
    if (stream) {
      api->stream_takes_device = 1;
      return to_address(get_attr(stream.ptr(), names().ptr));
    }
    py::error_already_set error;
    if (api->stream_takes_device == 1 || !error.matches(PyExc_TypeError)) throw error;
    api->stream_takes_device = 0;  // cupy < 10: one current stream, read on the device
  }
  return on_cupy_device(
      *api, index, [&] { return api->get_current_stream().attr("ptr").cast<std::uintptr_t>(); });
}

std::uintptr_t framework_call_stream(py::handle stream, Framework framework, Device device) {
  const std::uintptr_t current = framework_current_stream(framework, device.index);
  if (stream.is_none()) return current;
  const std::uintptr_t chosen = stream_handle(stream);
  order_streams(device, current, chosen);
  return chosen;
}

py::object framework_empty(Framework framework, py::handle like, const Tensor& like_tensor,
                           py::handle dtype_object, const Shape& shape, py::handle shape_object,
                           Tensor* view) {
  py::object out;
  std::uintptr_t data = 0;
  if (framework == Framework::Torch) {
    // torch's caching allocator on torch's current stream, like's dtype and device. On the H200
    // host torch.empty_like(x) took 3.9 µs, x.new_empty(tuple) 5.0 µs and x.new_empty(x.shape)
    // 6.0 µs (bench_host_overhead.py's breakdown): empty_like where it gives the layout we
    // need (same shape, compact input: the result is compact too), else new_empty of a tuple.
    if (shape == like_tensor.shape() && like_tensor.is_contiguous()) {
      PyObject* args[] = {nullptr, like.ptr()};
      out = steal(PyObject_Vectorcall(torch_api()->empty_like.ptr(), args + 1,
                                      1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    } else {
      py::object dims = int_tuple(shape);
      PyObject* args[] = {like.ptr(), dims.ptr()};
      out = steal(PyObject_VectorcallMethod(names().new_empty, args,
                                            2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
    }
    if (!out) throw py::error_already_set();
    data = to_address(call_method(out.ptr(), torch_members().data_ptr));
  } else {
    py::object dims =
        shape_object ? py::reinterpret_borrow<py::object>(shape_object) : int_tuple(shape);
    out = new_cupy_array(*cupy_api(), like_tensor.device().index, dims, dtype_object, &data);
  }
  if (like_tensor.device().is_cpu()) {
    *view = owning_cpu_view(out.ptr(), reinterpret_cast<void*>(data), shape, nullptr,
                            like_tensor.dtype());
  } else {
    *view = Tensor::from_blob(reinterpret_cast<void*>(data), shape, like_tensor.dtype(),
                              like_tensor.device());
  }
  return out;
}

py::object framework_new(Framework framework, const Shape& shape, py::handle dtype_object,
                         DType dtype, Device device, Tensor* view) {
  // torch gets the caller's torch dtype (from which `dtype` was read); cupy the canonical name.
  if ((framework == Framework::Torch) != is_torch_dtype(dtype_object)) return py::object();
  py::object dims = int_tuple(shape);
  py::object out;
  std::uintptr_t data = 0;
  if (framework == Framework::Torch) {
    const TorchApi* api = torch_api();
    if (api == nullptr) return py::object();
    PyObject* args[] = {nullptr, dims.ptr(), dtype_object.ptr(),
                        torch_cuda_device(*api, device.index).ptr()};
    out = steal(PyObject_Vectorcall(api->empty.ptr(), args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                    api->dtype_device_names.ptr()));
    if (!out) throw py::error_already_set();  // out of memory, say: the caller's to see
    data = to_address(call_method(out.ptr(), torch_members().data_ptr));
  } else {
    CupyApi* api = cupy_api();
    const py::handle name = numpy_dtype_name(dtype);
    if (api == nullptr || !name) return py::object();
    out = new_cupy_array(*api, device.index, dims, name, &data);
  }
  *view = Tensor::from_blob(reinterpret_cast<void*>(data), shape, dtype, device);
  return out;
}

py::object framework_block(Framework framework, Device device, std::size_t nbytes, void** data) {
  py::object block;
  if (framework == Framework::Torch) {
    const TorchApi* torch = torch_api();
    GC_CHECK(torch != nullptr, "framework_block: torch is not imported");
    const TorchApi& api = *torch;
    // torch.empty(nbytes, dtype=torch.uint8, device=torch.device("cuda", index))
    py::object torch_device = api.module.attr("device")("cuda", device.index);
    block = api.module.attr("empty")(nbytes, py::arg("dtype") = api.module.attr("uint8"),
                                     py::arg("device") = torch_device);
    *data = reinterpret_cast<void*>(to_address(call_method(block.ptr(), torch_members().data_ptr)));
  } else {
    const CupyApi* cupy = cupy_api();
    GC_CHECK(cupy != nullptr, "framework_block: cupy is not imported");
    const CupyApi& api = *cupy;
    block = on_cupy_device(api, device.index, [&] {
      return py::object(api.module.attr("cuda").attr("alloc")(nbytes));
    });
    *data = reinterpret_cast<void*>(to_address(get_attr(block.ptr(), names().ptr)));
  }
  return block;
}

std::optional<Framework> framework_named(const ArrayLibrary& library) {
  if (library.name == "torch") return Framework::Torch;
  if (library.name == "cupy") return Framework::Cupy;
  return std::nullopt;
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
