// Where all_reduce, all_gather and reduce_scatter write their result: the caller's `out=` array,
// or — for torch and cupy CUDA inputs — a new array from the caller's own library
// (framework_array.h). Either way the C++ call writes into it (its out= overload) and the call
// returns that Python object itself: no DLPack round trip, no groupcoord-owned result memory.
// Other inputs without `out=` keep the C++ call's own result, exported as the caller's type.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>

#include "array_import.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace python {

/// The array a call writes into, and what it returns.
struct OutputArray {
  pybind11::object object;  ///< returned by the call (`out` itself when given)
  Tensor tensor;            ///< the C++ view the call writes
};

/// `out` when it is not None: imported for writing (its shape, dtype, device and contiguity are
/// checked by the C++ call, which raises ValueError naming the group and op). A torch/cupy `out`
/// of the input's library and device is read on the fast path without a second stream lookup
/// (the call runs on `in.stream`, already ordered after that library's current stream). Else,
/// for an input that came through the fast path and a known result `shape` (null: unknown), a
/// new array of `in`'s library. Else nullopt: the C++ call allocates the result. `stream` is the
/// call's `stream=`.
std::optional<OutputArray> output_array(pybind11::handle out, const ImportedArray& in,
                                        const Shape* shape, const ArgContext& ctx,
                                        pybind11::handle stream);

/// all_gather's result shape (`dim` multiplied by `world_size`); nullopt when `dim` is out of
/// range (the C++ call then names the error).
std::optional<Shape> gathered_shape(const Shape& shape, int dim, int world_size);

/// reduce_scatter's result shape (`dim` divided by `world_size`); nullopt when `dim` is out of
/// range or does not divide (the C++ call then names the error).
std::optional<Shape> scattered_shape(const Shape& shape, int dim, int world_size);

/// `dim` counted from the front, or -1 when out of range for `rank` dimensions.
int wrapped_dim(int dim, std::size_t rank);

}  // namespace python
}  // namespace groupcoord
