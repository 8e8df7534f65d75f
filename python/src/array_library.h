// Array libraries: how a result goes back to Python. A call returns its results as the type of
// its input (numpy in, numpy out; torch in, torch out; ...). Calls without an array input (recv,
// received tensor dictionaries) use the default library of the result's device, which
// set_default_array_library() changes.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>

#include "groupcoord/device.h"

namespace groupcoord {
namespace python {

/// One way of handing tensors to Python. Instances live for the whole process.
struct ArrayLibrary {
  enum class Kind {
    Numpy,   ///< numpy.ndarray built directly over the memory (zero copy, writable)
    DLPack,  ///< module.from_dlpack(groupcoord.Tensor) (torch, cupy, jax, ...)
    Raw,     ///< the groupcoord.Tensor exporter itself
  };
  std::string name;  ///< "numpy", "torch", "cupy", "dlpack" (raw), or a module name
  Kind kind = Kind::Raw;
  pybind11::object from_dlpack;  ///< Kind::DLPack only
};

/// The library of `obj`'s type (cached per type): numpy for numpy arrays, "dlpack" for
/// groupcoord.Tensor, else the root module of the type when it has a from_dlpack function; null
/// when none applies (the device default is used then).
const ArrayLibrary* library_of(pybind11::handle obj);

/// The library named `name`: "numpy", "dlpack", or an importable module with from_dlpack
/// ("torch", "cupy", ...). Throws std::invalid_argument when it cannot be used. Libraries live
/// as long as the process. (The name is a string_view, taken by value: a `const std::string&`
/// parameter made GCC 13 warn of a dangling reference wherever a literal was passed.)
const ArrayLibrary& library_by_name(std::string_view name);

/// The library for results on `device` that have no input to mirror.
const ArrayLibrary& default_library(Device device);
/// Changes default_library for every device of `device_type` ("cpu" or "cuda"). Throws
/// std::invalid_argument for an unknown name or device type.
void set_default_library(const std::string& name, const std::string& device_type);
/// Name of default_library for a device type ("cpu" or "cuda").
std::string default_library_name(const std::string& device_type);

/// `library` when given, else default_library(device).
const ArrayLibrary& library_or_default(const ArrayLibrary* library, Device device);

/// `name` (None: null) as a library; lets a call override the default ("array_library=").
const ArrayLibrary* optional_library(pybind11::handle name);

/// True when numpy is imported and `obj` is a numpy.ndarray (or subclass). Never imports numpy.
bool is_numpy_array(pybind11::handle obj);

}  // namespace python
}  // namespace groupcoord
