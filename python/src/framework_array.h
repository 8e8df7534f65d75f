// torch and cupy CUDA arrays without DLPack: the binding's fast path. A torch.Tensor or
// cupy.ndarray on a CUDA device is read through a few cheap attribute calls (data pointer, shape,
// strides, dtype, device) into a non-owning groupcoord::Tensor; the library's current stream is
// read directly (torch._C._cuda_getCurrentRawStream, cupy.cuda.get_current_stream); results are
// allocated by the library itself (torch's caching allocator, cupy's memory pool), so they count
// in torch.cuda.memory_allocated() and follow torch's CUDA graph pools. Nothing here waits on the
// host.
//
// Cost, per array (the hot path of every CUDA collective called from Python): torch: `is_cuda`,
// `is_neg()`, `dtype`, `shape`, `is_contiguous()` (`stride()` only when false), `get_device()`,
// `data_ptr()`; cupy: `dtype`, `shape`, `strides`, `data`, `data.ptr`, `data.device_id`. Each is
// one call of the member's descriptor, looked up once per version of the class (type_member.h:
// no name lookup, no temporary strings, no bound-method objects); nothing else touches Python.
//
// Lifetime, as in vLLM's pynccl: the view is valid for the call only. The work is enqueued in
// stream order on the call's stream, and the caller keeps its arrays alive until that work is done,
// as torch's own collectives require (torch's caching allocator hands a freed block out again only
// in the order of the stream it was allocated on).
//
// torch CPU tensors (an engine on CPUs calls a collective per layer) take the same path, with two
// more attribute reads (is_cpu, requires_grad: what DLPack would refuse goes there and is refused
// with its reason) and a view that holds a reference to the tensor: host collectives may
// finish on a helper thread after the caller returned (blocking_call.h). Results for them come from
// torch.empty_like / new_empty, as on CUDA. Measured on the CPU (Debian's torch 1.13, 1-element
// all_reduce, 2 ranks): 6.95 µs per call through DLPack, 9.03 µs with out=.
//
// torch and cupy are never imported here: their types are looked up in sys.modules, so an object
// can be a torch tensor only once torch is imported. Exact types only: subclasses (such as
// torch.nn.Parameter), other devices and dtypes groupcoord lacks take the DLPack path.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>

#include "array_library.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace python {

/// The libraries with a fast path.
enum class Framework { Torch, Cupy };

/// A torch or cupy CUDA array, read (see the file comment).
struct FrameworkArray {
  Framework framework = Framework::Torch;
  Tensor tensor;  ///< non-owning view, valid while the Python object lives
  /// The array's own shape object (torch.Size / tuple), reused for a result of the same shape.
  pybind11::object shape;
  /// The array's dtype object (torch.dtype / numpy.dtype), for cupy results.
  pybind11::object dtype;
  /// Set when a torch tensor was refused for its negative bit (the caller raises).
  bool negative = false;
};

/// Reads `obj` when it is exactly a torch.Tensor or cupy.ndarray on a CUDA device, or a plain
/// torch CPU tensor, with a dtype and (cupy) strides groupcoord can hold; false otherwise (the
/// caller takes the DLPack path). A CPU view owns a reference to the tensor; a CUDA view owns
/// nothing and is read only when `borrowed` (the caller enqueues inline, see the file comment).
bool read_framework_array(pybind11::handle obj, FrameworkArray* out, bool borrowed = true);

/// The framework's current stream on CUDA device `index` (the framework is imported).
std::uintptr_t framework_current_stream(Framework framework, int index);

/// The stream a call on a framework array of `device` runs on: `stream=` when given, after
/// ordering the framework's current stream before it (what __dlpack__(stream=...) would have
/// done: the producer's pending work comes first), else the framework's current stream.
std::uintptr_t framework_call_stream(pybind11::handle stream, Framework framework, Device device);

/// A new uninitialised C-contiguous array of `shape`, with the dtype and device of `like` (a
/// `framework` array read as `like_tensor`), from that library (torch: torch.empty_like(like)
/// for a compact `like` of that shape, else like.new_empty(shape), on torch's current stream;
/// cupy: cupy.ndarray(shape, dtype) — what cupy.empty does — on like's device); `*view` is set
/// to a non-owning view of it. `dtype_object`: like's dtype object (FrameworkArray::dtype; used
/// for cupy). `shape_object`: `shape` as a Python tuple when the caller has one (may be null:
/// built from `shape`; used for cupy).
pybind11::object framework_empty(Framework framework, pybind11::handle like,
                                 const Tensor& like_tensor, pybind11::handle dtype_object,
                                 const Shape& shape, pybind11::handle shape_object, Tensor* view);

/// A new compact array of `framework` with `shape` and `dtype` on CUDA device `device`, for a
/// result the C++ call writes into (recv): torch.empty(shape, dtype=, device=) with the torch
/// dtype object `dtype_object` (which `dtype` was read from), or cupy.ndarray(shape, numpy's name
/// of `dtype`) on that device. `*view` gets a view of its memory. A null object (no Python error
/// set) when the framework cannot make it (a dtype it lacks, a dtype object of another
/// library); the caller then takes the general path.
pybind11::object framework_new(Framework framework, const Shape& shape,
                               pybind11::handle dtype_object, DType dtype, Device device,
                               Tensor* view);

/// A new uninitialised block of `nbytes` bytes on CUDA device `device` from `framework`'s
/// allocator (torch: torch.empty(nbytes, dtype=torch.uint8) on torch's current stream; cupy:
/// cupy.cuda.alloc(nbytes) on that device); `*data` is set to its address. The returned object
/// owns the block. Needs the GIL and the framework imported.
pybind11::object framework_block(Framework framework, Device device, std::size_t nbytes,
                                 void** data);

/// The framework named by an array library ("torch", "cupy"), nullopt for any other.
std::optional<Framework> framework_named(const ArrayLibrary& library);

/// "torch" or "cupy" as an array library (for results that still go through DLPack).
const ArrayLibrary& framework_library(Framework framework);

}  // namespace python
}  // namespace groupcoord
