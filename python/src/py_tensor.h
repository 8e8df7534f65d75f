// groupcoord.Tensor: a groupcoord-owned array as a Python object. It is the DLPack exporter
// behind every result (torch.from_dlpack(t), cupy.from_dlpack(t), np.from_dlpack(t) all take it)
// and is returned as is when no library applies (e.g. bfloat16 results for numpy).
#pragma once

#include <pybind11/pybind11.h>

#include "array_library.h"
#include "groupcoord/tensor.h"
#include "stream_arg.h"

namespace groupcoord {
namespace python {

/// The Python-side object: the tensor and, on CUDA, the stream its producing call ran on (what
/// __dlpack__ orders a consumer's stream after).
struct PyTensor {
  Tensor tensor;
  StreamHandle stream;
};

/// Registers groupcoord.Tensor.
void bind_tensor(pybind11::module_& module);

/// `tensor` as `library`'s array type, without copying: a numpy.ndarray over the memory, or
/// library.from_dlpack(groupcoord.Tensor). dtypes numpy lacks (bfloat16, fp8) and CUDA tensors
/// asked for as numpy come back as groupcoord.Tensor. `stream`: the stream a CUDA tensor was
/// produced on (default: groupcoord's current stream).
pybind11::object export_tensor(const Tensor& tensor, const ArrayLibrary& library,
                               StreamHandle stream = std::nullopt);

/// `values` as a tuple of Python ints (shapes, strides).
pybind11::tuple int_tuple(const Shape& values);

}  // namespace python
}  // namespace groupcoord
