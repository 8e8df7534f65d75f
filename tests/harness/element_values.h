// Elements of any DType as doubles, and row-major indices: what every suite's reference values
// and comparisons are made of (the cpu, cuda and coordinator suites all build on these).
#pragma once

#include <cstdint>

#include "groupcoord/dtype.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace testing {

/// The element of `dtype` at `where` (host memory), as a double. std::logic_error on a DType
/// value outside the enum.
double read_element(const void* where, DType dtype);
/// Stores `value` at `where` as one element of `dtype` (rounded as the dtype's conversion does;
/// integers truncate, bool is value != 0).
void write_element(void* where, DType dtype, double value);

/// The number of elements of `shape`.
std::int64_t element_count(const Shape& shape);
/// The row-major index of element `flat` of `shape`.
Shape unravel(std::int64_t flat, const Shape& shape);
/// The row-major position of `index` in `shape`.
std::int64_t ravel(const Shape& index, const Shape& shape);

}  // namespace testing
}  // namespace groupcoord
