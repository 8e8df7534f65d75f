// DLPack import and export (DLPack 0.6 structs; type codes of DLPack 1.x, see dtype.cc).
#include <dlpack/dlpack.h>

#include <utility>

#include "core/shape.h"
#include "groupcoord/check.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace {

/// Owns an imported DLManagedTensor: calls the producer's deleter once, when the last tensor
/// sharing it dies. A NULL deleter means the producer needs no notification.
struct ImportOwner {
  DLManagedTensor* managed = nullptr;

  ImportOwner() = default;
  ImportOwner(const ImportOwner&) = delete;
  ImportOwner& operator=(const ImportOwner&) = delete;
  ~ImportOwner() {
    if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  }
};

/// manager_ctx of an exported tensor: the tensor (keeping its memory alive), the shape and
/// stride arrays the DLTensor points into, and the DLManagedTensor itself, in one allocation.
struct ExportContext {
  Tensor tensor;
  Shape shape;
  Shape strides;
  DLManagedTensor managed{};
};

void delete_export_context(DLManagedTensor* self) {
  delete static_cast<ExportContext*>(self->manager_ctx);
}

Device device_from_dlpack(DLDevice device) {
  switch (device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory is host memory
      return Device::cpu();
    case kDLCUDA:
    case kDLCUDAManaged:  // managed memory is addressable from the device that owns the tensor
      GC_CHECK(device.device_id >= 0, "Tensor::from_dlpack: invalid CUDA device id ",
               device.device_id);
      return Device::cuda(device.device_id);
    default:
      break;
  }
  GC_THROW(std::invalid_argument, "Tensor::from_dlpack: unsupported DLPack device type ",
           static_cast<int>(device.device_type),
           " (supported: kDLCPU, kDLCUDAHost, kDLCUDA, kDLCUDAManaged)");
}

DLDevice device_to_dlpack(Device device) {
  if (device.is_cpu()) return DLDevice{kDLCPU, 0};
  return DLDevice{kDLCUDA, device.index};
}

}  // namespace

Tensor Tensor::from_dlpack(DLManagedTensor* managed) {
  const char* op = "Tensor::from_dlpack";
  GC_CHECK(managed != nullptr, op, ": null DLManagedTensor");
  const DLTensor& dl = managed->dl_tensor;
  // Validate and copy everything out before taking ownership, so that a throw leaves the
  // producer's tensor untouched and still owned by the caller.
  GC_CHECK(dl.ndim >= 0, op, ": negative ndim ", dl.ndim);
  GC_CHECK(dl.ndim == 0 || dl.shape != nullptr, op, ": null shape for ndim ", dl.ndim);
  const DType dtype = dtype_from_dlpack(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes);
  const Device device = device_from_dlpack(dl.device);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  const std::int64_t numel = detail::checked_numel(shape, op);
  Shape strides = dl.strides == nullptr ? detail::compact_strides(shape)
                                        : Shape(dl.strides, dl.strides + dl.ndim);
  for (std::int64_t stride : strides) {
    GC_CHECK(stride >= 0, op, ": negative stride ", stride, " in ", detail::shape_str(strides));
  }
  GC_CHECK(dl.data != nullptr || numel == 0, op, ": null data pointer for shape ",
           detail::shape_str(shape));
  void* base = dl.data;
  if (dl.byte_offset != 0) base = static_cast<char*>(dl.data) + dl.byte_offset;

  auto owner = std::make_shared<ImportOwner>();  // may throw: nothing is owned yet
  owner->managed = managed;                      // from here on nothing throws
  return Tensor(std::move(owner), base, std::move(shape), std::move(strides), 0, dtype, device);
}

DLManagedTensor* Tensor::to_dlpack() const {
  check_defined("Tensor::to_dlpack");
  const DLPackTypeCode code = dtype_to_dlpack(dtype_);
  auto* context = new ExportContext{*this, shape(), strides(), {}};
  DLManagedTensor& managed = context->managed;
  managed.dl_tensor.data = data_ptr();
  managed.dl_tensor.device = device_to_dlpack(device_);
  managed.dl_tensor.ndim = dim();
  managed.dl_tensor.dtype = DLDataType{code.code, code.bits, 1};
  managed.dl_tensor.shape = context->shape.data();
  managed.dl_tensor.strides = context->strides.data();
  managed.dl_tensor.byte_offset = 0;
  managed.manager_ctx = context;
  managed.deleter = delete_export_context;
  return &managed;
}

}  // namespace groupcoord
