#include "py_tensor.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "groupcoord/check.h"
#include "stream_order.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace groupcoord {
namespace python {
namespace {

constexpr const char* kCapsuleName = "dltensor";

/// Frees a capsule nobody consumed (consumers rename it to "used_dltensor").
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

py::capsule make_capsule(const Tensor& tensor) {
  DLManagedTensor* managed = tensor.to_dlpack();
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, &capsule_destructor);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

/// numpy's name for `dtype`, or nullptr when numpy has no such type.
const char* numpy_name(DType dtype) {
  switch (dtype) {
    case DType::BFloat16:
    case DType::Float8E4M3:
    case DType::Float8E5M2:
      return nullptr;
    default:
      return dtype_name(dtype);
  }
}

const py::dtype& numpy_dtype(DType dtype) {
  static auto* cache = new std::map<DType, py::dtype>();  // leaked: holds Python objects
  auto it = cache->find(dtype);
  if (it == cache->end()) it = cache->emplace(dtype, py::dtype(numpy_name(dtype))).first;
  return it->second;
}

/// A writable numpy array over the tensor's memory; the array's base keeps the tensor alive.
py::object to_numpy(const Tensor& tensor) {
  GC_CHECK(tensor.device().is_cpu() && numpy_name(tensor.dtype()) != nullptr,
           "groupcoord.Tensor.numpy: numpy cannot hold a ", dtype_name(tensor.dtype()),
           " tensor on ", tensor.device().str());
  std::vector<py::ssize_t> shape(tensor.shape().begin(), tensor.shape().end());
  std::vector<py::ssize_t> strides;
  for (std::int64_t stride : tensor.strides()) {
    strides.push_back(static_cast<py::ssize_t>(stride * tensor.element_size()));
  }
  py::capsule base(new Tensor(tensor), [](void* owned) { delete static_cast<Tensor*>(owned); });
  return py::array(numpy_dtype(tensor.dtype()), std::move(shape), std::move(strides),
                   tensor.data_ptr(), base);
}

/// DLPack device codes: kDLCPU 1, kDLCUDA 2.
py::tuple dlpack_device(const Tensor& tensor) {
  const Device device = tensor.device();
  if (device.is_cpu()) return py::make_tuple(static_cast<int>(kDLCPU), 0);
  return py::make_tuple(static_cast<int>(kDLCUDA), device.index);
}

/// The consumer's stream of __dlpack__(stream=...) on CUDA, as the DLPack / Array API standard
/// numbers them: None is the legacy default stream, -1 asks for no ordering (nullopt), 0 is not
/// allowed (ambiguous), 1 the legacy default stream, 2 the per-thread default stream, anything
/// else a cudaStream_t.
std::optional<std::uintptr_t> consumer_stream(py::handle stream) {
  if (stream.is_none()) return kLegacyDefaultStream;
  GC_CHECK(py::isinstance<py::int_>(stream),
           "groupcoord.Tensor.__dlpack__: stream must be None or an int, got ",
           py::repr(stream).cast<std::string>());
  const auto value = stream.cast<long long>();
  if (value == -1) return std::nullopt;
  GC_CHECK(value > 0, "groupcoord.Tensor.__dlpack__: stream=", value,
           " is not a CUDA stream number (DLPack: None or 1 for the legacy default stream, 2 "
           "for the per-thread default stream, -1 for no synchronisation, or a stream handle; "
           "0 is ambiguous and not allowed)");
  return static_cast<std::uintptr_t>(value);
}

/// __dlpack__: a legacy "dltensor" capsule (DLPack 0.6). On CUDA, where the consumer's stream
/// is not the one the tensor was produced on, the consumer's stream is made to wait for the
/// producer's with an event: never a host synchronisation.
py::capsule dlpack(const PyTensor& self, py::handle stream, py::handle /*max_version*/,
                   py::handle dl_device, py::handle /*copy*/) {
  if (!dl_device.is_none()) {
    GC_CHECK(dl_device.equal(dlpack_device(self.tensor)),
             "groupcoord.Tensor.__dlpack__: ", "cannot export ", self.tensor.device().str(),
             " memory to device ", py::repr(dl_device).cast<std::string>());
  }
  if (self.tensor.device().is_cuda()) {
    const std::optional<std::uintptr_t> consumer = consumer_stream(stream);
    if (consumer && self.stream) order_streams(self.tensor.device(), *self.stream, *consumer);
  }
  return make_capsule(self.tensor);
}

/// numpy's __array_interface__ (CPU tensors of numpy dtypes): np.asarray(t) is a zero-copy view.
py::dict array_interface(const PyTensor& self) {
  const Tensor& t = self.tensor;
  const char* name = numpy_name(t.dtype());
  if (!t.device().is_cpu() || name == nullptr) {
    throw py::attribute_error("__array_interface__: only CPU tensors of numpy dtypes have one");
  }
  Shape byte_strides;
  for (std::int64_t stride : t.strides()) {
    byte_strides.push_back(stride * static_cast<std::int64_t>(t.element_size()));
  }
  return py::dict("shape"_a = int_tuple(t.shape()), "strides"_a = int_tuple(byte_strides),
                  "typestr"_a = numpy_dtype(t.dtype()).attr("str"),
                  "data"_a = py::make_tuple(reinterpret_cast<std::uintptr_t>(t.data_ptr()), false),
                  "version"_a = 3);
}

}  // namespace

py::tuple int_tuple(const Shape& values) {
  py::tuple out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = py::int_(values[i]);
  return out;
}

py::object export_tensor(const Tensor& tensor, const ArrayLibrary& library, StreamHandle stream) {
  if (!stream) stream = groupcoord_stream(tensor.device());  // CUDA: made on groupcoord's stream
  switch (library.kind) {
    case ArrayLibrary::Kind::Numpy:
      if (tensor.device().is_cpu() && numpy_name(tensor.dtype()) != nullptr) {
        return to_numpy(tensor);
      }
      break;
    case ArrayLibrary::Kind::DLPack:
      if (tensor.dtype() == DType::Bool && library.name == "torch") {
        // torch before 2.x has no bool in DLPack ("Unsupported code 6"): the bytes as uint8,
        // viewed as bool again on torch's side (same size; works with every version).
        const Tensor bytes =
            Tensor::from_blob(tensor.data_ptr(), tensor.shape(), tensor.strides(), DType::UInt8,
                              tensor.device(), [keep = tensor](void*) {});
        // torch is imported (the result goes to it); sys.modules runs no import machinery.
        py::object torch =
            py::reinterpret_steal<py::object>(PyImport_GetModule(py::str("torch").ptr()));
        if (!torch) throw py::error_already_set();
        return library.from_dlpack(py::cast(PyTensor{bytes, stream}))
            .attr("view")(torch.attr("bool"));
      }
      return library.from_dlpack(py::cast(PyTensor{tensor, stream}));
    case ArrayLibrary::Kind::Raw:
      break;
  }
  return py::cast(PyTensor{tensor, stream});
}

void bind_tensor(py::module_& module) {
  py::class_<PyTensor>(module, "Tensor", R"doc(
An array owned by groupcoord (a C++ groupcoord::Tensor), exported through DLPack.

Results come back as the caller's array type; this object is what they are made from, and what a
call returns when no library applies (e.g. bfloat16 results asked for as numpy, or
``array_library="dlpack"``). Convert it without copying with ``torch.from_dlpack(t)``,
``cupy.from_dlpack(t)``, ``np.from_dlpack(t)`` (read-only in numpy < 2) or ``np.asarray(t)``
(writable, CPU). It is also accepted as an input by every call.)doc")
      .def_property_readonly(
          "shape", [](const PyTensor& self) { return int_tuple(self.tensor.shape()); },
          "Sizes, outermost first.")
      .def_property_readonly(
          "strides", [](const PyTensor& self) { return int_tuple(self.tensor.strides()); },
          "Strides in elements (as torch; numpy counts bytes).")
      .def_property_readonly(
          "dtype",
          [](const PyTensor& self) { return std::string(dtype_name(self.tensor.dtype())); },
          "Element type name: 'float32', 'bfloat16', ...")
      .def_property_readonly(
          "device", [](const PyTensor& self) { return self.tensor.device().str(); },
          "'cpu' or 'cuda:N'.")
      .def("__dlpack__", &dlpack, py::kw_only(), "stream"_a = py::none(),
           "max_version"_a = py::none(), "dl_device"_a = py::none(), "copy"_a = py::none(),
           R"doc(
DLPack export: a 'dltensor' capsule sharing this tensor's memory. ``stream`` (CUDA) is the
consumer's stream as the DLPack standard numbers them: None or 1 the legacy default stream, 2 the
per-thread default stream, -1 no synchronisation, else a ``cudaStream_t`` handle; 0 raises
ValueError. When it differs from the stream the tensor was made on, the consumer's stream waits
for that one through a CUDA event (no host synchronisation).)doc")
      .def(
          "__dlpack_device__", [](const PyTensor& self) { return dlpack_device(self.tensor); },
          "(device_type, device_id) as DLPack codes: (1, 0) for CPU, (2, N) for CUDA N.")
      .def_property_readonly("__array_interface__", &array_interface,
                             "numpy's array interface (CPU tensors of numpy dtypes).")
      .def(
          "numpy", [](const PyTensor& self) { return to_numpy(self.tensor); },
          "A writable numpy view of a CPU tensor (no copy).")
      .def("__repr__", [](const PyTensor& self) { return "groupcoord." + self.tensor.str(); });
}

}  // namespace python
}  // namespace groupcoord
