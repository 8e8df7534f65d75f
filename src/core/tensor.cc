// Tensor construction, metadata and views. Copies are in tensor_copy.cc, DLPack in dlpack.cc.
#include "groupcoord/tensor.h"

#include <array>
#include <limits>
#include <sstream>
#include <utility>

#include "core/shape.h"
#include "groupcoord/allocator.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace {

const char* device_type_name(DeviceType type) { return type == DeviceType::CPU ? "cpu" : "cuda"; }

/// Returns a block to the allocator that made it. It runs in a destructor: errors are logged.
struct AllocatorDeleter {
  std::shared_ptr<Allocator> allocator;
  std::size_t nbytes;
  Device device;

  void operator()(void* ptr) const {
    try {
      allocator->deallocate(ptr, nbytes, device);
    } catch (const std::exception& e) {
      GC_LOG(Error, "Tensor: deallocating ", nbytes, " bytes on ", device.str(),
             " failed: ", e.what());
    } catch (...) {
      GC_LOG(Error, "Tensor: deallocating ", nbytes, " bytes on ", device.str(), " failed");
    }
  }
};

/// Calls an engine's from_blob deleter; it runs in a destructor, so errors are logged.
struct BlobDeleter {
  std::function<void(void*)> deleter;

  void operator()(void* ptr) const {
    try {
      deleter(ptr);
    } catch (const std::exception& e) {
      GC_LOG(Error, "Tensor: from_blob deleter threw: ", e.what());
    } catch (...) {
      GC_LOG(Error, "Tensor: from_blob deleter threw");
    }
  }
};

/// Bytes of `numel` elements of `dtype`, checked against size_t overflow.
std::size_t checked_nbytes(std::int64_t numel, DType dtype, const char* op) {
  const std::size_t element = dtype_size(dtype);
  GC_CHECK(static_cast<std::uint64_t>(numel) <= std::numeric_limits<std::size_t>::max() / element,
           op, ": ", numel, " elements of ", dtype_name(dtype), " overflow size_t");
  return static_cast<std::size_t>(numel) * element;
}

/// Rejects a CUDA device with a negative ordinal.
void check_device(Device device, const char* op) {
  GC_CHECK(device.is_cpu() || device.index >= 0, op, ": invalid device index ", device.index);
}

/// What both from_blob overloads check (after the shape): a data pointer for a non-empty tensor,
/// the device and the dtype; then the owner that runs `deleter` (none without one).
std::shared_ptr<void> blob_owner(void* ptr, std::int64_t numel, const Shape& shape, DType dtype,
                                 Device device, std::function<void(void*)> deleter) {
  const char* op = "Tensor::from_blob";
  GC_CHECK(ptr != nullptr || numel == 0, op, ": null data pointer for shape ",
           detail::shape_str(shape));
  check_device(device, op);
  dtype_size(dtype);  // rejects an out-of-range DType value before anything is owned
  if (!deleter) return nullptr;
  return std::shared_ptr<void>(ptr, BlobDeleter{std::move(deleter)});
}

}  // namespace

Tensor::Tensor(std::shared_ptr<void> owner, void* base, Shape shape, Shape strides,
               std::int64_t offset, DType dtype, Device device)
    : owner_(std::move(owner)),
      base_(base),
      layout_(std::make_shared<const Layout>(Layout{std::move(shape), std::move(strides)})),
      offset_(offset),
      dtype_(dtype),
      device_(device),
      defined_(true) {}

Tensor::Tensor(std::shared_ptr<void> owner, void* base, std::shared_ptr<const Layout> layout,
               std::int64_t offset, DType dtype, Device device)
    : owner_(std::move(owner)),
      base_(base),
      layout_(std::move(layout)),
      offset_(offset),
      dtype_(dtype),
      device_(device),
      defined_(true) {}

namespace {

/// A thread's recent compact layouts (Tensor::compact_layout). `gone` outlives the cache: it is
/// trivially destructible, so a tensor made by a later thread_local or static destructor of the
/// thread sees it set and bypasses the destroyed cache.
template <typename Layout>
struct RecentLayouts {
  static constexpr std::size_t kSize = 8;
  std::array<std::shared_ptr<const Layout>, kSize> layouts;
  std::size_t next = 0;
  static inline thread_local bool gone = false;
  ~RecentLayouts() { gone = true; }
};

}  // namespace

std::shared_ptr<const Tensor::Layout> Tensor::compact_layout(const Shape& shape) {
  // A collective called in a loop returns results of one shape every call: a few recent layouts
  // per thread spare each result the three allocations of a new one.
  using Recent = RecentLayouts<Layout>;
  auto make = [&] {
    return std::make_shared<const Layout>(Layout{shape, detail::compact_strides(shape)});
  };
  if (Recent::gone) return make();
  thread_local Recent recent;
  for (const std::shared_ptr<const Layout>& layout : recent.layouts) {
    if (layout != nullptr && layout->shape == shape) return layout;
  }
  std::shared_ptr<const Layout> made = make();
  recent.layouts[recent.next++ % Recent::kSize] = made;
  return made;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  const std::int64_t numel = detail::checked_numel(shape, "Tensor::empty");
  const std::size_t nbytes = checked_nbytes(numel, dtype, "Tensor::empty");
  check_device(device, "Tensor::empty");
  std::shared_ptr<Allocator> allocator = get_allocator(device.type);
  GC_CHECK(allocator != nullptr, "Tensor::empty: no allocator registered for ",
           device_type_name(device.type), "; install one with set_allocator");
  void* ptr = allocator->allocate(nbytes, device);
  // If making the control block throws, shared_ptr hands `ptr` to the deleter: no leak.
  std::shared_ptr<void> owner(ptr, AllocatorDeleter{std::move(allocator), nbytes, device});
  GC_ASSERT(ptr != nullptr || nbytes == 0, "Tensor::empty: allocator for ", device.str(),
            " returned nullptr for ", nbytes, " bytes");
  return Tensor(std::move(owner), ptr, compact_layout(shape), 0, dtype, device);
}

Tensor Tensor::from_blob(void* ptr, const Shape& shape, DType dtype, Device device,
                         std::function<void(void*)> deleter) {
  const std::int64_t numel = detail::checked_numel(shape, "Tensor::from_blob");
  std::shared_ptr<void> owner = blob_owner(ptr, numel, shape, dtype, device, std::move(deleter));
  // The layout from the thread's recent ones, as results get: the Python binding wraps each
  // compact input and out= array this way on every call.
  return Tensor(std::move(owner), ptr, compact_layout(shape), 0, dtype, device);
}

Tensor Tensor::from_blob(void* ptr, const Shape& shape, const Shape& strides, DType dtype,
                         Device device, std::function<void(void*)> deleter) {
  const char* op = "Tensor::from_blob";
  const std::int64_t numel = detail::checked_numel(shape, op);
  GC_CHECK(strides.size() == shape.size(), op, ": ", strides.size(), " strides ",
           detail::shape_str(strides), " for ", shape.size(), "-d shape ",
           detail::shape_str(shape));
  for (std::int64_t stride : strides) {
    GC_CHECK(stride >= 0, op, ": negative stride ", stride, " in ", detail::shape_str(strides));
  }
  std::shared_ptr<void> owner = blob_owner(ptr, numel, shape, dtype, device, std::move(deleter));
  return Tensor(std::move(owner), ptr, shape, strides, 0, dtype, device);
}

const Shape& Tensor::no_shape() {
  static const Shape* empty = new Shape();  // leaked: undefined tensors may outlive statics
  return *empty;
}

void Tensor::check_defined(const char* op) const {
  GC_CHECK(defined_, op, ": the tensor is undefined (default-constructed)");
}

std::int64_t Tensor::size(int dim) const {
  check_defined("Tensor::size");
  return shape()[detail::wrap_dim(dim, this->dim(), "Tensor::size")];
}

std::int64_t Tensor::stride(int dim) const {
  check_defined("Tensor::stride");
  return strides()[detail::wrap_dim(dim, this->dim(), "Tensor::stride")];
}

std::int64_t Tensor::numel() const {
  std::int64_t numel = 1;
  for (std::int64_t size : shape()) numel *= size;  // validated when the shape was made
  return numel;
}

std::size_t Tensor::nbytes() const { return static_cast<std::size_t>(numel()) * element_size(); }

bool Tensor::is_contiguous() const { return detail::is_compact(shape(), strides()); }

void* Tensor::data_ptr() const {
  check_defined("Tensor::data_ptr");
  if (offset_ == 0) return base_;  // also keeps a null base (empty tensor) free of arithmetic
  return static_cast<char*>(base_) + offset_ * static_cast<std::int64_t>(element_size());
}

std::string Tensor::str() const {
  if (!defined_) return "Tensor(undefined)";
  std::ostringstream out;
  out << "Tensor(shape=" << detail::shape_str(shape()) << ", dtype=" << dtype_name(dtype_)
      << ", device=" << device_.str() << ")";
  return out.str();
}

Tensor Tensor::movedim(int src, int dst) const {
  check_defined("Tensor::movedim");
  const int n = dim();
  src = detail::wrap_dim(src, n, "Tensor::movedim (source)");
  dst = detail::wrap_dim(dst, n, "Tensor::movedim (destination)");
  Shape shape = this->shape();
  Shape strides = this->strides();
  // Take `src` out and put it back at `dst`; the others keep their relative order.
  shape.erase(shape.begin() + src);
  strides.erase(strides.begin() + src);
  shape.insert(shape.begin() + dst, this->shape()[src]);
  strides.insert(strides.begin() + dst, this->strides()[src]);
  return Tensor(owner_, base_, std::move(shape), std::move(strides), offset_, dtype_, device_);
}

Tensor Tensor::narrow(int dim, std::int64_t start, std::int64_t length) const {
  check_defined("Tensor::narrow");
  const int d = detail::wrap_dim(dim, this->dim(), "Tensor::narrow");
  const std::int64_t size = shape()[d];
  GC_CHECK(start >= -size && start <= size, "Tensor::narrow: start ", start,
           " out of range for dim ", dim, " of size ", size);
  if (start < 0) start += size;
  GC_CHECK(length >= 0 && length <= size - start, "Tensor::narrow: length ", length, " from start ",
           start, " exceeds dim ", dim, " of size ", size);
  Shape shape = this->shape();
  shape[d] = length;
  return Tensor(owner_, base_, std::move(shape), strides(), offset_ + start * strides()[d], dtype_,
                device_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  check_defined("Tensor::reshape");
  const Shape new_shape = detail::infer_shape(shape, numel(), "Tensor::reshape");
  std::optional<Shape> strides = detail::view_strides(this->shape(), this->strides(), new_shape);
  if (strides) {
    return Tensor(owner_, base_, new_shape, std::move(*strides), offset_, dtype_, device_);
  }
  Tensor compact = contiguous();
  return Tensor(compact.owner_, compact.base_, new_shape, detail::compact_strides(new_shape),
                compact.offset_, dtype_, device_);
}

}  // namespace groupcoord
