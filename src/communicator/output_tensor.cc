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

void check_output(const OpLabel& where, const Tensor& out, const Shape& shape, DType dtype,
                  Device device) {
  GC_CHECK(out.defined(), where, ": out is an undefined tensor");
  GC_CHECK(out.device() == device, where, ": out must be on ", device.str(), ", got ", out.str());
  GC_CHECK(out.dtype() == dtype, where, ": out has dtype ", dtype_name(out.dtype()),
           ", the result has dtype ", dtype_name(dtype));
  GC_CHECK(out.shape() == shape, where, ": out has shape ", detail::shape_str(out.shape()),
           ", the result has shape ", detail::shape_str(shape));
  GC_CHECK(out.is_contiguous(), where, ": out must be contiguous, got strides ",
           detail::shape_str(out.strides()));
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
