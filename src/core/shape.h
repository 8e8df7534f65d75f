// Shape arithmetic shared by the Tensor implementation (private to core).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace detail {

/// Product of the sizes; throws std::invalid_argument naming `op` for a negative size or a
/// product that overflows int64.
std::int64_t checked_numel(const Shape& shape, const char* op);

/// Row-major strides (in elements) of a compact tensor of `shape`.
Shape compact_strides(const Shape& shape);

/// True when `strides` describe a row-major layout without gaps for `shape`, ignoring the
/// strides of size-1 dimensions; any layout of an empty shape counts as contiguous.
bool is_compact(const Shape& shape, const Shape& strides);

/// Replaces a single -1 in `requested` by the size that makes the element count `numel`;
/// throws std::invalid_argument (naming `op`) for several -1s, other negative sizes or a count
/// that does not match.
Shape infer_shape(const Shape& requested, std::int64_t numel, const char* op);

/// Strides that let a tensor of (`shape`, `strides`) be viewed as `new_shape` (same numel)
/// without moving data, or nullopt when the memory layout does not allow it.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape);

/// Wraps a possibly negative `dim` into [0, ndim); throws std::invalid_argument naming `op`.
int wrap_dim(int dim, int ndim, const char* op);

/// "[2, 3]".
std::string shape_str(const Shape& shape);

/// "[0, 2]": a list of ranks for messages.
std::string ranks_str(const std::vector<int>& ranks);

}  // namespace detail
}  // namespace groupcoord
