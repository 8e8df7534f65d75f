// Tensor: a shared-ownership view of an n-d array (docs/architecture.md). It is what collectives
// read and write, and what crosses the C++/Python boundary through DLPack.
//
// A Tensor is a small value (offset, dtype, device) plus two reference-counted handles: one on
// the memory it views and one on its shape and strides. Copying a Tensor allocates nothing and
// shares both (collectives copy their results and keepalives on every call); views (narrow,
// movedim, reshape when possible) share the memory and get a layout of their own. Strides and
// the storage offset are in elements, as in torch and DLPack.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "groupcoord/device.h"
#include "groupcoord/dtype.h"

namespace groupcoord {

/// Sizes (or strides) of a tensor, outermost dimension first.
using Shape = std::vector<std::int64_t>;

/// Shared-ownership n-d array. A default-constructed Tensor is undefined (defined() is false);
/// every other member except defined() and str() requires a defined tensor.
///
/// Copies (contiguous() of a non-contiguous tensor, clone(), copy_from(), reshape() that cannot
/// be a view) run on the host for CPU tensors; a copy with a non-CPU side goes to the function
/// registered for that device type (device_copy.h; the CUDA layer registers its kernels), and
/// throws std::invalid_argument when none is.
class Tensor {
 public:
  /// An undefined tensor.
  Tensor() = default;

  // ---- construction -------------------------------------------------------------------------

  /// A new compact (row-major) tensor with uninitialised contents, allocated by the allocator
  /// installed for `device.type` (see allocator.h), to which the memory returns when the last
  /// reference dies. Throws std::invalid_argument for a negative size or when no allocator is
  /// installed for the device type.
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::cpu());

  /// A compact tensor over existing memory at `ptr`. Without a deleter the tensor does not own
  /// the memory (a view of engine memory that must outlive every reference); with one, the
  /// deleter is called once with `ptr` when the last reference dies. `ptr` may be null only
  /// when the shape has no elements.
  static Tensor from_blob(void* ptr, const Shape& shape, DType dtype, Device device = Device::cpu(),
                          std::function<void(void*)> deleter = {});

  /// As above with explicit (non-negative) strides, in elements, one per dimension.
  static Tensor from_blob(void* ptr, const Shape& shape, const Shape& strides, DType dtype,
                          Device device = Device::cpu(), std::function<void(void*)> deleter = {});

  /// Takes ownership of a DLPack tensor: the producer's deleter is called exactly once, when the
  /// last reference to the result (or to any view of it) dies. Accepts NULL strides (compact),
  /// a byte_offset, kDLCPU / kDLCUDAHost (as CPU) and kDLCUDA / kDLCUDAManaged (as CUDA).
  /// Throws std::invalid_argument for a null pointer, an unsupported device or type (complex,
  /// lanes > 1, ...) or bad sizes/strides; on a throw, ownership stays with the caller.
  static Tensor from_dlpack(DLManagedTensor* managed);

  /// Exports this tensor as a new DLManagedTensor (data = data_ptr(), byte_offset 0, explicit
  /// strides). Its manager_ctx keeps this tensor's memory alive; the consumer must call its
  /// deleter exactly once, which frees what this call allocated and drops that reference.
  DLManagedTensor* to_dlpack() const;

  // ---- metadata -----------------------------------------------------------------------------

  /// True unless default-constructed.
  bool defined() const { return defined_; }
  /// Sizes, outermost first.
  const Shape& shape() const { return layout_ ? layout_->shape : no_shape(); }
  /// Strides in elements.
  const Shape& strides() const { return layout_ ? layout_->strides : no_shape(); }
  /// Size of dimension `dim`; negative dims count from the end (-1 is the last).
  std::int64_t size(int dim) const;
  /// Stride of dimension `dim`, in elements; negative dims count from the end.
  std::int64_t stride(int dim) const;
  /// Number of dimensions.
  int dim() const { return static_cast<int>(shape().size()); }
  /// Number of elements (1 for a 0-d tensor).
  std::int64_t numel() const;
  /// numel() * element_size(): the bytes of the elements, not of the memory they span.
  std::size_t nbytes() const;
  /// Bytes per element.
  std::size_t element_size() const { return dtype_size(dtype_); }
  /// Element type.
  DType dtype() const { return dtype_; }
  /// Where the memory lives.
  Device device() const { return device_; }
  /// Offset of element [0, ..., 0] from the start of the underlying memory, in elements.
  std::int64_t storage_offset() const { return offset_; }
  /// True when the elements are laid out row-major without gaps (size-1 dims' strides are
  /// ignored; an empty tensor is contiguous), as torch defines it.
  bool is_contiguous() const;

  /// Address of element [0, ..., 0] (storage offset included).
  void* data_ptr() const;
  /// data_ptr() as T*. No dtype check: the caller picks a T matching dtype() (uint16_t for
  /// float16/bfloat16, uint8_t for fp8/bool, ...).
  template <typename T>
  T* data_ptr() const {
    return static_cast<T*>(data_ptr());
  }

  /// "Tensor(shape=[2, 3], dtype=float32, device=cpu)", or "Tensor(undefined)".
  std::string str() const;

  // ---- views --------------------------------------------------------------------------------

  /// A view with dimension `src` moved to position `dst` (torch.movedim for single dims).
  Tensor movedim(int src, int dst) const;
  /// A view of `length` elements of dimension `dim` starting at `start` (negative `start`
  /// counts from the end, as in torch.narrow).
  Tensor narrow(int dim, std::int64_t start, std::int64_t length) const;
  /// The same elements with a new shape; one size may be -1 (inferred). A view when the
  /// strides allow it, otherwise a compact copy (as torch.reshape).
  Tensor reshape(const Shape& shape) const;

  // ---- copies -------------------------------------------------------------------------------

  /// This tensor if already contiguous, otherwise a compact copy.
  Tensor contiguous() const;
  /// A compact copy with its own memory (same device, from that device's allocator).
  Tensor clone() const;
  /// Copies `src` into this tensor element by element; same shape and dtype required, any
  /// strides on either side. Returns *this. The two must not partially overlap.
  Tensor& copy_from(const Tensor& src);

 private:
  /// Shape, strides and offset must already be valid for the memory behind `base`.
  Tensor(std::shared_ptr<void> owner, void* base, Shape shape, Shape strides, std::int64_t offset,
         DType dtype, Device device);

  /// Sizes and strides, immutable once made, shared by every copy of the tensor.
  struct Layout {
    Shape shape;
    Shape strides;
  };

  /// As above, with a layout that already exists.
  Tensor(std::shared_ptr<void> owner, void* base, std::shared_ptr<const Layout> layout,
         std::int64_t offset, DType dtype, Device device);

  /// Throws std::invalid_argument naming `op` if this tensor is undefined.
  void check_defined(const char* op) const;
  /// The (empty) shape and strides of an undefined tensor.
  static const Shape& no_shape();
  /// The compact layout of `shape`, shared with the recent tensors of this thread that had it.
  static std::shared_ptr<const Layout> compact_layout(const Shape& shape);

  /// Keeps the memory alive (null for a non-owning view of engine memory).
  std::shared_ptr<void> owner_;
  /// Byte address of storage element 0 (before the storage offset).
  void* base_ = nullptr;
  std::shared_ptr<const Layout> layout_;
  std::int64_t offset_ = 0;
  DType dtype_ = DType::Float32;
  Device device_;
  bool defined_ = false;
};

}  // namespace groupcoord
