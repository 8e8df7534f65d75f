#include "communicator/output_tensor.h"

#include "core/shape.h"
#include "groupcoord/check.h"

namespace groupcoord {
namespace comm {

Shape gathered_shape(const Shape& shape, int dim, int world_size) {
  Shape out = shape;
  out[dim] *= world_size;
  return out;
}

Shape scattered_shape(const Shape& shape, int dim, int world_size) {
  Shape out = shape;
  out[dim] /= world_size;
  return out;
}

Tensor write_into(const Tensor& out, const Tensor& result) {
  if (result.data_ptr() != out.data_ptr() || result.strides() != out.strides()) {
    Tensor target = out;
    target.copy_from(result);
  }
  return out;
}

}  // namespace comm
}  // namespace groupcoord
