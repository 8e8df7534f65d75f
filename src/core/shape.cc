// Shape arithmetic: element counts, compact strides, view compatibility.
#include "core/shape.h"

#include <limits>
#include <sstream>

#include "groupcoord/check.h"

namespace groupcoord {
namespace detail {

std::int64_t checked_numel(const Shape& shape, const char* op) {
  std::int64_t numel = 1;
  for (std::int64_t size : shape) {
    GC_CHECK(size >= 0, op, ": negative size ", size, " in shape ", shape_str(shape));
  }
  for (std::int64_t size : shape) {
    if (size == 0) return 0;  // an empty dimension makes any other size harmless
  }
  for (std::int64_t size : shape) {
    GC_CHECK(numel <= std::numeric_limits<std::int64_t>::max() / size, op,
             ": element count of shape ", shape_str(shape), " overflows int64");
    numel *= size;
  }
  return numel;
}

Shape compact_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    // Empty dimensions still get the stride a size-1 dimension would, as torch does.
    stride *= shape[i] > 1 ? shape[i] : 1;
  }
  return strides;
}

bool is_compact(const Shape& shape, const Shape& strides) {
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

Shape infer_shape(const Shape& requested, std::int64_t numel, const char* op) {
  Shape shape = requested;
  int infer_at = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      GC_CHECK(infer_at < 0, op, ": only one dimension can be -1 in shape ", shape_str(requested));
      infer_at = static_cast<int>(i);
    } else {
      GC_CHECK(shape[i] >= 0, op, ": invalid size ", shape[i], " in shape ", shape_str(requested));
    }
  }
  if (infer_at >= 0) {
    Shape known_shape = shape;
    known_shape[infer_at] = 1;
    const std::int64_t known = checked_numel(known_shape, op);
    // With a 0 elsewhere the -1 could be anything, so torch refuses it as well.
    GC_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(requested),
             " is invalid for a tensor of ", numel, " elements");
    shape[infer_at] = numel / known;
  }
  GC_CHECK(checked_numel(shape, op) == numel, op, ": shape ", shape_str(requested),
           " is invalid for a tensor of ", numel, " elements");
  return shape;
}

// Walks the old dimensions from the innermost outwards, grouping runs that are laid out
// back-to-back in memory ("chunks"; size-1 dimensions join any chunk). Each chunk is a plain
// 1-d run with a base stride, so the new dimensions can be carved out of it in any way that
// multiplies up to the chunk's element count, and only in such a way.
std::optional<Shape> view_strides(const Shape& shape, const Shape& strides,
                                  const Shape& new_shape) {
  Shape new_strides(new_shape.size());
  std::int64_t numel = 1;
  for (std::int64_t size : shape) numel *= size;
  if (numel == 0 || shape.empty()) return compact_strides(new_shape);  // nothing to lay out

  int new_dim = static_cast<int>(new_shape.size()) - 1;
  std::int64_t chunk_stride = strides.back();
  std::int64_t chunk_numel = 1;
  for (int dim = static_cast<int>(shape.size()) - 1; dim >= 0; --dim) {
    chunk_numel *= shape[dim];
    const bool chunk_ends =
        dim == 0 || (shape[dim - 1] != 1 && strides[dim - 1] != chunk_numel * chunk_stride);
    if (!chunk_ends) continue;
    std::int64_t carved = 1;
    while (new_dim >= 0 && (carved < chunk_numel || new_shape[new_dim] == 1)) {
      new_strides[new_dim] = carved * chunk_stride;
      carved *= new_shape[new_dim];
      --new_dim;
    }
    if (carved != chunk_numel) return std::nullopt;
    if (dim > 0) {
      chunk_stride = strides[dim - 1];
      chunk_numel = 1;
    }
  }
  if (new_dim != -1) return std::nullopt;
  return new_strides;
}

int wrap_dim(int dim, int ndim, const char* op) {
  GC_CHECK(ndim > 0, op, ": dim ", dim, " given for a 0-d tensor, which has no dimensions");
  GC_CHECK(dim >= -ndim && dim < ndim, op, ": dim ", dim, " out of range for a tensor with ", ndim,
           " dimensions (expected [", -ndim, ", ", ndim - 1, "])");
  return dim < 0 ? dim + ndim : dim;
}

namespace {
template <typename T>
std::string list_str(const std::vector<T>& values) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}
}  // namespace

std::string shape_str(const Shape& shape) { return list_str(shape); }

std::string ranks_str(const std::vector<int>& ranks) { return list_str(ranks); }

}  // namespace detail
}  // namespace groupcoord
