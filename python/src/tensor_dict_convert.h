// Tensor dictionaries between Python and C++ (vLLM's dict[str, torch.Tensor | Any]): array values
// become Tensors (no copy), every other value is pickled into Bytes; order is kept both ways.
#pragma once

#include <pybind11/pybind11.h>

#include "array_import.h"
#include "groupcoord/tensor_dict.h"

namespace groupcoord {
namespace python {

/// A Python dict as a TensorDict, with the stream of its first CUDA tensor (if any).
struct ImportedTensorDict {
  TensorDict dict;
  StreamHandle stream;
  Device device = Device::cpu();  ///< of the first CUDA tensor, else CPU
};

/// Keys must be str; throws std::invalid_argument (ValueError) naming ctx otherwise, or when
/// `dict` is not a dict.
ImportedTensorDict tensor_dict_from_python(pybind11::handle dict, const ArgContext& ctx,
                                           pybind11::handle stream);

/// One value back to Python: a Tensor exported with `library` (null: its device's default), or
/// unpickled Bytes.
pybind11::object value_to_python(const TensorDictValue& value, const ArrayLibrary* library,
                                 StreamHandle stream);

/// A TensorDict as a new Python dict (see value_to_python).
pybind11::dict tensor_dict_to_python(const TensorDict& dict, const ArrayLibrary* library,
                                     StreamHandle stream);

}  // namespace python
}  // namespace groupcoord
