// Python dtype arguments (recv's `dtype`) to groupcoord::DType.
#pragma once

#include <pybind11/pybind11.h>

#include "groupcoord/dtype.h"

namespace groupcoord {
namespace python {

/// Accepts a string ("float32", "bf16", "torch.float16", ...), a torch.dtype, a numpy dtype or
/// scalar type (np.float32, np.dtype("int64")), or a Python type numpy understands (float, bool).
/// Throws std::invalid_argument (ValueError) naming `what` for anything else.
DType dtype_from_python(pybind11::handle dtype, const char* what);

/// True when `dtype` is a torch.dtype (the caller then wants torch tensors back).
bool is_torch_dtype(pybind11::handle dtype);

}  // namespace python
}  // namespace groupcoord
