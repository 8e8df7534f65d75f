// Results of CUDA calls made from torch or cupy, in that library's own allocator. While a call
// on a torch/cupy array runs, Tensor::empty on the calling thread takes its CUDA blocks from
// the caller's framework (a ScopedAllocator around the call): results then count in
// torch.cuda.memory_allocated(), are reused in torch's stream order, and during a CUDA graph
// capture come from the graph's pool (torch) or cupy's pool on the capture stream, so they stay
// valid for every replay. Without this they would be cudaMallocAsync blocks, which a capture
// records as graph allocation nodes that cupy's graphs cannot replay.
//
// The GIL: allocate takes it (the call runs with it released, on the thread that holds the
// scope). deallocate may run on any thread, GIL or not (a result's last reference can be a
// watchdog's): it drops the block's reference through deferred_release.h, which never waits for
// the GIL (that thread may hold a lock a Python thread waits on with the GIL) and leaks it once
// the interpreter has begun finalising (torch's allocator may be gone); the next allocate drops
// what was queued too.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <optional>

#include "framework_array.h"
#include "groupcoord/allocator.h"

namespace groupcoord {
namespace python {

/// Blocks from torch's or cupy's CUDA allocator for groupcoord tensors.
class FrameworkAllocator final : public Allocator {
 public:
  /// The process-wide allocator of `framework` (one per framework, never destroyed).
  static const std::shared_ptr<Allocator>& of(Framework framework);

  explicit FrameworkAllocator(Framework framework);
  ~FrameworkAllocator() override;

  void* allocate(std::size_t nbytes, Device device) override;
  void deallocate(void* ptr, std::size_t nbytes, Device device) override;

  /// Blocks handed out and not yet given back (deallocate may still queue their release).
  std::size_t live_blocks() const;

 private:
  struct State;
  Framework framework_;
  std::unique_ptr<State> state_;
};

/// While this lives, CUDA results go to the allocator of `library` when that is torch or cupy
/// and `device` is a CUDA device (the library results are returned as); nothing changes
/// otherwise. Construct it on the thread that runs the call, before the call.
class FrameworkResults {
 public:
  FrameworkResults(const ArrayLibrary* library, Device device);

 private:
  std::optional<ScopedAllocator> scope_;
};

}  // namespace python
}  // namespace groupcoord
