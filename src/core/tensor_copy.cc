// Tensor copies. Host-to-host copies run here; a copy with a device tensor on either side goes to
// the function a device layer registered for that device type (device_copy.h).
#include <utility>

#include "core/shape.h"
#include "core/strided_copy.h"
#include "groupcoord/check.h"
#include "groupcoord/device_copy.h"
#include "groupcoord/tensor.h"

namespace groupcoord {

namespace {

const char* device_type_name(DeviceType type) { return type == DeviceType::CPU ? "cpu" : "cuda"; }

// The registered copy for the device side of a copy between `dst` and `src` (at least one of them
// is not on the CPU); std::invalid_argument naming `op` when the device layer registered none.
DeviceCopyFn device_copy_for(const char* op, const Tensor& dst, const Tensor& src) {
  const DeviceType type = dst.device().is_cpu() ? src.device().type : dst.device().type;
  DeviceCopyFn fn = get_device_copy(type);
  GC_CHECK(fn != nullptr, op, ": copying ", src.str(), " into ", dst.str(),
           " is not supported: no ", device_type_name(type), " copy function is registered (the ",
           device_type_name(type), " layer registers one when initialised; see device_copy.h)");
  return fn;
}

}  // namespace

Tensor Tensor::contiguous() const {
  check_defined("Tensor::contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  check_defined("Tensor::clone");
  if (!device_.is_cpu()) device_copy_for("Tensor::clone", *this, *this);  // fail before allocating
  Tensor copy = empty(shape(), dtype_, device_);
  copy.copy_from(*this);
  return copy;
}

Tensor& Tensor::copy_from(const Tensor& src) {
  check_defined("Tensor::copy_from");
  src.check_defined("Tensor::copy_from (source)");
  GC_CHECK(shape() == src.shape(), "Tensor::copy_from: shape mismatch, destination ",
           detail::shape_str(shape()), " vs source ", detail::shape_str(src.shape()));
  GC_CHECK(dtype_ == src.dtype_, "Tensor::copy_from: dtype mismatch, destination ",
           dtype_name(dtype_), " vs source ", dtype_name(src.dtype_));
  if (device_.is_cpu() && src.device_.is_cpu()) {
    detail::copy_strided(data_ptr(), strides(), src.data_ptr(), src.strides(), shape(),
                         element_size());
    return *this;
  }
  device_copy_for("Tensor::copy_from", *this, src)(src, *this);
  return *this;
}

}  // namespace groupcoord
