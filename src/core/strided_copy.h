// Element-wise copy between two host memory layouts (private to core).
#pragma once

#include <cstddef>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace detail {

/// Copies the elements of a `shape`-shaped array laid out at `src` with `src_strides` into
/// `dst` laid out with `dst_strides` (strides in elements of `element_size` bytes). Host memory
/// only. Dimensions that are back-to-back on both sides are merged first, so compact layouts
/// degrade to one memmove and transposes to a 2-d loop.
void copy_strided(void* dst, const Shape& dst_strides, const void* src, const Shape& src_strides,
                  const Shape& shape, std::size_t element_size);

}  // namespace detail
}  // namespace groupcoord
