#include "communicator/dim_layout.h"

#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

Tensor move_dim_to_front(const Tensor& tensor, int dim) {
  if (dim == 0 && tensor.is_contiguous()) return tensor;  // the common case: no view to build
  return tensor.movedim(dim, 0).contiguous();
}

Tensor move_dim_from_front(const Tensor& front, int dim) {
  if (dim == 0 && front.is_contiguous()) return front;
  return front.movedim(0, dim).contiguous();
}

std::int64_t elements_per_index(const Shape& shape, int dim) {
  std::int64_t count = 1;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d != dim) count *= shape[d];
  }
  return count;
}

}  // namespace comm
}  // namespace groupcoord
