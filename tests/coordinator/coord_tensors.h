// Tensor helpers of the coordinator tests: build tensors from a value function and read them back
// as doubles, for every DType the tests use (values are small integers, exact in every type).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "element_values.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace testing {

/// The five dtypes the collective tests cover.
const std::vector<DType>& test_dtypes();

/// The reference value of element `i` of rank `rank`'s input: a small integer in [-5, 17], exact
/// in every dtype, and sums of up to 8 of them too.
double rank_value(int rank, std::int64_t i);

/// A compact CPU tensor with element i (row-major) = value(i).
Tensor make_tensor(const Shape& shape, DType dtype,
                   const std::function<double(std::int64_t)>& value);

/// The elements in row-major (logical) order, whatever the strides.
std::vector<double> tensor_values(const Tensor& tensor);

/// gtest helper: `tensor` has `shape`, `dtype` and exactly `expected` (row-major).
void expect_tensor(const Tensor& tensor, const Shape& shape, DType dtype,
                   const std::vector<double>& expected, const std::string& what);

}  // namespace testing
}  // namespace groupcoord
