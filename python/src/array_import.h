// Python arrays in: anything with __dlpack__ (torch, cupy, jax, numpy, groupcoord.Tensor), CPU or
// CUDA, becomes a groupcoord::Tensor sharing its memory (no copy).
//
// torch and cupy CUDA arrays imported with Ownership::Borrowed skip DLPack: a non-owning view
// valid for the call, on the library's current stream (framework_array.h).
//
// numpy arrays go through the buffer protocol instead of numpy's own __dlpack__: numpy < 2
// refuses to export bool and read-only arrays through DLPack, and the buffer protocol is cheaper.
// A numpy array with negative strides is copied when only read; written in place, it is refused.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>

#include "array_library.h"
#include "framework_array.h"
#include "groupcoord/tensor.h"
#include "stream_arg.h"

namespace groupcoord {
namespace python {

/// Names used in error messages: "<owner>.<op>: <arg> ...".
struct ArgContext {
  const std::string& owner;  ///< e.g. "GroupCoordinator(tp:0)"
  const char* op;            ///< e.g. "all_reduce"
  const char* arg;           ///< e.g. "input_"
};

/// Whether the call writes into the array (broadcast, recv into).
enum class Access { Read, Write };

/// Whether the Tensor must keep the array's memory alive (Shared: anything that may outlive the
/// call, such as isend buffers and abandoned host collectives) or may merely view it for a call
/// that enqueues CUDA work inline (Borrowed: torch/cupy CUDA arrays skip DLPack).
enum class Ownership { Shared, Borrowed };

/// A Python array as a Tensor, with how to give results back.
struct ImportedArray {
  Tensor tensor;
  const ArrayLibrary* library = nullptr;  ///< the caller's library (null: device default)
  StreamHandle stream;                    ///< CUDA: the stream the call runs on
  /// Set when the array came through the torch/cupy fast path (the tensor is a borrowed view).
  std::optional<Framework> framework;
  pybind11::handle object;  ///< the Python array (borrowed: valid during the call)
  /// Fast path: the array's shape and dtype objects (FrameworkArray), for results like it.
  pybind11::object shape_object;
  pybind11::object dtype_object;
};

/// True for anything import_array accepts (numpy array, groupcoord.Tensor, __dlpack__).
bool is_array(pybind11::handle obj);

/// Imports `obj` (see the file comment). `stream` is the call's `stream=` argument. Throws
/// std::invalid_argument (ValueError) naming ctx for a non-array, an unsupported dtype or
/// device, or a read-only array with Access::Write.
ImportedArray import_array(pybind11::handle obj, const ArgContext& ctx, Access access,
                           pybind11::handle stream, Ownership ownership = Ownership::Shared);

}  // namespace python
}  // namespace groupcoord
