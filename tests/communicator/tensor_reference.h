// Sequential references for the communicator tests: tensors filled from a formula every rank can
// evaluate for every other rank, and element-wise comparison against such a formula. Nothing here
// calls the code under test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "element_values.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace testing {

/// Value at a multi-index.
using IndexFn = std::function<double(const Shape& index)>;

/// Calls fn for every multi-index of `shape`, row-major.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& fn);

/// Small integer-valued test datum of rank `rank` at linear position `i`: exact in every dtype
/// tested (|value| <= 11, so sums over 4 ranks stay exact in fp16/bf16).
double datum(int rank, std::int64_t i);

/// Writes fn(index) into every element of `tensor` (any strides), converted to its dtype.
void fill(const Tensor& tensor, const IndexFn& fn);
/// A compact tensor of `shape` filled with datum(rank, linear index).
Tensor rank_tensor(const Shape& shape, DType dtype, int rank);
/// The same values as rank_tensor, in a non-contiguous view (built with movedim).
Tensor rank_tensor_strided(const Shape& shape, DType dtype, int rank);

/// Element at `index` (any strides) as a double.
double read(const Tensor& tensor, const Shape& index);

/// Empty string when `actual` has `shape` and `dtype` and every element equals fn(index);
/// otherwise a description of the first difference.
std::string compare(const Tensor& actual, const Shape& shape, DType dtype, const IndexFn& fn);

}  // namespace testing
}  // namespace groupcoord
