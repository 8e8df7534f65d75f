// The CUDA stream a call runs on. Every tensor call takes `stream=`: an int handle
// (torch.cuda.Stream.cuda_stream, cupy.cuda.Stream.ptr), or an object with `cuda_stream`,
// `__cuda_stream__` (CUDA Python's protocol) or `ptr`. Without it, a call on CUDA tensors runs on
// the current stream of the caller's library (torch's or cupy's, read directly: see
// framework_array.h), else on groupcoord's current stream. On CPU the argument is accepted and
// ignored.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <utility>

#include "array_library.h"
#include "groupcoord/device.h"

#ifdef GROUPCOORD_WITH_CUDA
#include "groupcoord/cuda/stream.h"
#endif

namespace groupcoord {
namespace python {

/// A stream handle, or nothing (CPU).
using StreamHandle = std::optional<std::uintptr_t>;

/// The stream for a call on `device` (see the file comment): always a handle on CUDA, nothing
/// on CPU. `library` is the caller's array library (may be null). Throws std::invalid_argument
/// for a `stream` of an unknown kind.
StreamHandle resolve_stream(pybind11::handle stream, const ArrayLibrary* library, Device device);

/// The handle of a `stream=` argument that is not None (see the file comment). Throws
/// std::invalid_argument for an object of an unknown kind.
std::uintptr_t stream_handle(pybind11::handle stream);

/// groupcoord's current stream for `device` on this thread (CUDA builds and devices; nothing
/// elsewhere).
StreamHandle groupcoord_stream(Device device);

/// The value to pass as `stream=` to a producer's __dlpack__ (DLPack: 0 is ambiguous, the
/// legacy default stream is 1; 2, the per-thread default stream, and real handles pass as they
/// are).
std::uintptr_t dlpack_stream_argument(std::uintptr_t handle);

/// Runs `fn` with `stream` current for `device` (CUDA builds; elsewhere just runs it).
template <typename Fn>
auto with_stream(Device device, StreamHandle stream, Fn&& fn) -> decltype(fn()) {
#ifdef GROUPCOORD_WITH_CUDA
  if (device.is_cuda() && stream) {
    CudaStreamGuard guard(device, *stream);
    return fn();
  }
#endif
  return fn();
}

}  // namespace python
}  // namespace groupcoord
