// Host-side helpers of the CUDA tests: element values of every DType, and moving tensors between
// host and device with the plain CUDA runtime (cudaMemcpy), so that checks do not depend on the
// copy code under test.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace testing {

/// Writes `value` (a small integer, exact in every DType) as `dtype` at `out`.
void encode_value(DType dtype, double value, void* out);
/// Reads one `dtype` element at `in` as a double (bool: 0 or 1).
double decode_value(DType dtype, const void* in);

/// A compact CUDA tensor on `device` whose row-major element i holds value(i).
Tensor device_tensor(const Shape& shape, DType dtype, Device device,
                     const std::function<double(std::int64_t)>& value);
/// Shorthand for Float32.
Tensor device_floats(const Shape& shape, Device device,
                     const std::function<double(std::int64_t)>& value);

/// The elements of a contiguous CUDA tensor, row-major, decoded. Waits for the device's current
/// stream first (results of collectives are ready in stream order).
std::vector<double> host_values(const Tensor& tensor);

/// Row-major index of `coords` in `shape`.
std::int64_t flat_index(const Shape& shape, const std::vector<std::int64_t>& coords);
/// Coordinates of row-major index `index` in `shape`.
std::vector<std::int64_t> coords_of(const Shape& shape, std::int64_t index);
/// Product of the sizes.
std::int64_t count_of(const Shape& shape);

/// Number of CUDA devices (0 without a driver); tests skip when it is 0.
int visible_gpus();
/// The message GTEST_SKIP prints when no GPU is visible.
inline const char* kNoGpuMessage =
    "no CUDA device visible (cudaGetDeviceCount failed or returned 0): skipping the GPU test";

}  // namespace testing
}  // namespace groupcoord
