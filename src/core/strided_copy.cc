// Host strided copy: merge dimensions, then walk the outer ones with an odometer and copy the
// innermost one with a loop specialised by element size.
#include "core/strided_copy.h"

#include <cstdint>
#include <cstring>

namespace groupcoord {
namespace detail {
namespace {

/// One dimension of the copy: its size and its strides in bytes on both sides.
struct Dim {
  std::int64_t size;
  std::int64_t dst_stride;
  std::int64_t src_stride;
};

/// Drops size-1 dimensions and merges neighbours that are contiguous on both sides.
std::vector<Dim> merge_dims(const Shape& shape, const Shape& dst_strides, const Shape& src_strides,
                            std::int64_t element_size) {
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    const Dim dim{shape[i], dst_strides[i] * element_size, src_strides[i] * element_size};
    if (!dims.empty()) {
      Dim& outer = dims.back();
      if (outer.dst_stride == dim.dst_stride * dim.size &&
          outer.src_stride == dim.src_stride * dim.size) {
        outer = Dim{outer.size * dim.size, dim.dst_stride, dim.src_stride};
        continue;
      }
    }
    dims.push_back(dim);
  }
  if (dims.empty()) dims.push_back(Dim{1, element_size, element_size});
  return dims;
}

/// Copies `count` elements of type T between byte-strided rows. memcpy of a fixed size keeps
/// this free of alignment and aliasing assumptions and compiles to a plain load/store.
template <typename T>
void copy_row(char* dst, std::int64_t dst_stride, const char* src, std::int64_t src_stride,
              std::int64_t count) {
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(dst + i * dst_stride, src + i * src_stride, sizeof(T));
  }
}

void copy_row_any(char* dst, std::int64_t dst_stride, const char* src, std::int64_t src_stride,
                  std::int64_t count, std::size_t element_size) {
  switch (element_size) {
    case 1:
      return copy_row<std::uint8_t>(dst, dst_stride, src, src_stride, count);
    case 2:
      return copy_row<std::uint16_t>(dst, dst_stride, src, src_stride, count);
    case 4:
      return copy_row<std::uint32_t>(dst, dst_stride, src, src_stride, count);
    case 8:
      return copy_row<std::uint64_t>(dst, dst_stride, src, src_stride, count);
    default:
      for (std::int64_t i = 0; i < count; ++i) {
        std::memcpy(dst + i * dst_stride, src + i * src_stride, element_size);
      }
  }
}

}  // namespace

void copy_strided(void* dst, const Shape& dst_strides, const void* src, const Shape& src_strides,
                  const Shape& shape, std::size_t element_size) {
  for (std::int64_t size : shape) {
    if (size == 0) return;
  }
  const auto elem = static_cast<std::int64_t>(element_size);
  const std::vector<Dim> dims = merge_dims(shape, dst_strides, src_strides, elem);
  const Dim& inner = dims.back();
  if (dims.size() == 1 && inner.dst_stride == elem && inner.src_stride == elem) {
    std::memmove(dst, src, static_cast<std::size_t>(inner.size) * element_size);
    return;
  }
  // Odometer over the outer dimensions, carrying byte offsets along (integers rather than
  // pointers, so no intermediate pointer ever leaves the arrays).
  const std::size_t outer = dims.size() - 1;
  std::vector<std::int64_t> index(outer, 0);
  char* const dst_base = static_cast<char*>(dst);
  const char* const src_base = static_cast<const char*>(src);
  std::int64_t dst_offset = 0;
  std::int64_t src_offset = 0;
  while (true) {
    copy_row_any(dst_base + dst_offset, inner.dst_stride, src_base + src_offset, inner.src_stride,
                 inner.size, element_size);
    std::size_t d = outer;
    while (true) {
      if (d == 0) return;  // every outer index wrapped around: done
      --d;
      dst_offset += dims[d].dst_stride;
      src_offset += dims[d].src_stride;
      if (++index[d] < dims[d].size) break;
      dst_offset -= dims[d].dst_stride * dims[d].size;
      src_offset -= dims[d].src_stride * dims[d].size;
      index[d] = 0;
    }
  }
}

}  // namespace detail
}  // namespace groupcoord
