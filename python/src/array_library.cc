#include "array_library.h"

#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>

#include "groupcoord/check.h"

namespace py = pybind11;

namespace groupcoord {
namespace python {
namespace {

// Every table below is touched with the GIL held only. Entries are leaked on purpose: they hold
// Python objects that must not be released after the interpreter is gone.
using LibraryTable = std::map<std::string, const ArrayLibrary*, std::less<>>;
LibraryTable& libraries() {
  static auto* table = new LibraryTable();
  return *table;
}

std::unordered_map<PyTypeObject*, const ArrayLibrary*>& type_cache() {
  static auto* table = new std::unordered_map<PyTypeObject*, const ArrayLibrary*>();
  return *table;
}

std::string g_cpu_default;   // empty: torch once the process has imported it, else numpy
std::string g_cuda_default;  // empty: torch when importable, else cupy, else dlpack

const ArrayLibrary* make_library(const std::string& name) {
  auto* library = new ArrayLibrary{name, ArrayLibrary::Kind::Raw, py::object()};
  if (name == "numpy") {
    py::module_::import("numpy");  // ImportError now rather than at the first result
    library->kind = ArrayLibrary::Kind::Numpy;
  } else if (name != "dlpack") {
    py::module_ module = py::module_::import(name.c_str());
    GC_CHECK(py::hasattr(module, "from_dlpack"), "array library '", name,
             "' has no from_dlpack function");
    library->kind = ArrayLibrary::Kind::DLPack;
    library->from_dlpack = module.attr("from_dlpack");
  }
  return library;
}

/// Root module name of obj's type ("torch" for torch.nn.Parameter).
std::string root_module(py::handle type) {
  py::object module = py::getattr(type, "__module__", py::none());
  if (!py::isinstance<py::str>(module)) return "";
  std::string name = module.cast<std::string>();
  return name.substr(0, name.find('.'));
}

const ArrayLibrary* library_for_type(py::handle type) {
  const std::string root = root_module(type);
  if (root == "numpy") return &library_by_name("numpy");
  if (root == "groupcoord") return &library_by_name("dlpack");
  py::dict modules = py::module_::import("sys").attr("modules");
  if (root.empty() || !modules.contains(root.c_str())) return nullptr;
  if (!py::hasattr(modules[root.c_str()], "from_dlpack")) return nullptr;
  return &library_by_name(root);
}

// A torch program gets torch tensors on the CPU too, as vLLM gives it; a program that never
// imported torch gets numpy (looked up each time: torch may be imported later).
std::string auto_cpu_default() {
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  return PyDict_GetItemString(modules, "torch") != nullptr ? "torch" : "numpy";
}

std::string auto_cuda_default() {
  for (const char* name : {"torch", "cupy"}) {
    try {
      py::module_::import(name);
      return name;
    } catch (const py::error_already_set&) {
    }
  }
  return "dlpack";
}

void check_device_type(const std::string& device_type) {
  GC_CHECK(device_type == "cpu" || device_type == "cuda",
           "device_type must be 'cpu' or 'cuda', got '", device_type, "'");
}

}  // namespace

const ArrayLibrary& library_by_name(std::string_view name) {
  auto& table = libraries();
  auto it = table.find(name);
  if (it != table.end()) return *it->second;
  const ArrayLibrary* library = nullptr;
  try {
    library = make_library(std::string(name));
  } catch (const py::error_already_set& e) {
    GC_CHECK(false, "array library '", name, "' cannot be used: ", e.what());
  }
  table.emplace(std::string(name), library);
  return *library;
}

const ArrayLibrary* library_of(py::handle obj) {
  PyTypeObject* type = Py_TYPE(obj.ptr());
  auto& cache = type_cache();
  auto it = cache.find(type);
  if (it != cache.end()) return it->second;
  const ArrayLibrary* library = library_for_type(py::handle(reinterpret_cast<PyObject*>(type)));
  Py_INCREF(type);  // the cache keys on the address: keep the type alive
  cache.emplace(type, library);
  return library;
}

const ArrayLibrary& default_library(Device device) {
  if (device.is_cpu()) {
    return library_by_name(g_cpu_default.empty() ? auto_cpu_default() : g_cpu_default);
  }
  if (g_cuda_default.empty()) g_cuda_default = auto_cuda_default();
  return library_by_name(g_cuda_default);
}

void set_default_library(const std::string& name, const std::string& device_type) {
  check_device_type(device_type);
  library_by_name(name);  // validates
  (device_type == "cpu" ? g_cpu_default : g_cuda_default) = name;
}

std::string default_library_name(const std::string& device_type) {
  check_device_type(device_type);
  if (device_type == "cpu") return default_library(Device::cpu()).name;
  return default_library(Device::cuda(0)).name;
}

const ArrayLibrary& library_or_default(const ArrayLibrary* library, Device device) {
  return library != nullptr ? *library : default_library(device);
}

const ArrayLibrary* optional_library(py::handle name) {
  if (name.is_none()) return nullptr;
  GC_CHECK(py::isinstance<py::str>(name), "array_library must be a string, got ",
           py::repr(name).cast<std::string>());
  return &library_by_name(name.cast<std::string>());
}

bool is_numpy_array(py::handle obj) {
  static PyTypeObject* ndarray = nullptr;
  if (ndarray == nullptr) {
    PyObject* numpy = PyImport_GetModule(py::str("numpy").ptr());  // new ref or null
    if (numpy == nullptr) {
      PyErr_Clear();
      return false;
    }
    PyObject* type = PyObject_GetAttrString(numpy, "ndarray");
    Py_DECREF(numpy);
    if (type == nullptr) {
      PyErr_Clear();
      return false;
    }
    ndarray = reinterpret_cast<PyTypeObject*>(type);  // kept: numpy is never unloaded
  }
  return PyObject_TypeCheck(obj.ptr(), ndarray) != 0;
}

}  // namespace python
}  // namespace groupcoord
