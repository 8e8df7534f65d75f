// Tensor copies. Host memory only for now: a later CUDA layer adds device copies.
#include <utility>

#include "core/shape.h"
#include "core/strided_copy.h"
#include "groupcoord/check.h"
#include "groupcoord/tensor.h"

namespace groupcoord {

Tensor Tensor::contiguous() const {
  check_defined("Tensor::contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  check_defined("Tensor::clone");
  GC_CHECK(device_.is_cpu(), "Tensor::clone: copying ", str(),
           " is not supported yet (host tensors only)");
  Tensor copy = empty(shape_, dtype_, device_);
  copy.copy_from(*this);
  return copy;
}

Tensor& Tensor::copy_from(const Tensor& src) {
  check_defined("Tensor::copy_from");
  src.check_defined("Tensor::copy_from (source)");
  GC_CHECK(shape_ == src.shape_, "Tensor::copy_from: shape mismatch, destination ",
           detail::shape_str(shape_), " vs source ", detail::shape_str(src.shape_));
  GC_CHECK(dtype_ == src.dtype_, "Tensor::copy_from: dtype mismatch, destination ",
           dtype_name(dtype_), " vs source ", dtype_name(src.dtype_));
  GC_CHECK(device_.is_cpu() && src.device_.is_cpu(), "Tensor::copy_from: copying ", src.str(),
           " into ", str(), " is not supported yet (host tensors only)");
  detail::copy_strided(data_ptr(), strides_, src.data_ptr(), src.strides_, shape_, element_size());
  return *this;
}

}  // namespace groupcoord
