// SymmetricMemory: the NCCL symmetric-memory state of one CUDA communicator, whose windows are
// registered on its NcclComm (docs/cuda.md; vLLM's
// pynccl_allocator with the per-communicator fix of the upstream change).
//
// * Settings are agreed at creation (collective): the path is on only when every rank asked for
//   it and can use it, and every rank has the same sizes; otherwise it is off everywhere, with the
//   reason logged and reported in stats().
// * Windows: each registration is keyed by the allocation's base address in this communicator's
//   own registry, so one communicator never registers the same memory twice, while two
//   communicators over the same memory each register it once. Registration is a collective NCCL
//   call without a timeout of its own: the ranks first agree on it over the CPU group (which has
//   the group's deadline), then NCCL's call is watched against the same deadline (nccl_comm.h).
//   Nothing is registered during CUDA graph capture.
// * Scratch: one persistent window, allocated and registered at the first routed call (or by
//   reserve_scratch), grown only as a collective step outside capture; a call that does not fit
//   during capture takes the regular path (counted as a fallback). Grown-out scratch windows are
//   kept until the communicator is destroyed, because graphs captured earlier still point at them.
//   A lease serialises the calls that use the scratch and orders them across streams.
// * Pool: symmetric_empty tensors come from further windows through a deterministic allocator;
//   memory a tensor gave back is reused only once every rank gave it back (agreed at the next
//   symmetric_empty), so the offsets stay equal across ranks.
// * Teardown (NcclComm::destroy, through the WindowOwner view of this class): take_windows() hands
//   the windows over for deregistration before the communicator goes; the memory is freed after
//   that, when the last tensor over it dies.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/nccl/nccl_comm.h"
#include "cuda/nccl/symmetric_allocation.h"
#include "cuda/symmetric/symmetric_block_allocator.h"
#include "cuda/symmetric/symmetric_config.h"
#include "groupcoord/symmetric_memory.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace cuda {

/// See the file comment. Owned by the CUDA communicator next to its NcclComm, on which it
/// registers its windows (and which deregisters them through WindowOwner at teardown); every
/// method except stats() and in_window() is called by the communicator's operations (collective
/// where noted).
class SymmetricMemory final : public WindowOwner {
 public:
  /// Exclusive use of the scratch for one call; empty (no data) when the call must take the
  /// regular path. finish() orders later users of the scratch after this call's work on `stream`.
  class Lease {
   public:
    Lease() = default;
    explicit operator bool() const { return base_ != nullptr; }
    char* data() const { return base_; }
    /// Records that the call's last use of the scratch is enqueued on `stream`.
    void finish(cudaStream_t stream);
    /// Calls finish() unless it ran: work may have been enqueued before an exception.
    ~Lease();
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&&) = delete;

   private:
    friend class SymmetricMemory;
    std::unique_lock<std::mutex> lock_;
    SymmetricMemory* owner_ = nullptr;
    char* base_ = nullptr;
    cudaStream_t stream_ = nullptr;
    bool finished_ = false;
  };

  /// Collective over `owner`'s group: reads the settings and capabilities of every rank and
  /// agrees on them (see the file comment). Never throws for a refusal; only for bad settings
  /// (std::invalid_argument naming the variable) or a failed CPU collective.
  SymmetricMemory(NcclComm& owner, const NcclApi& api);
  /// Detaches from the communicator, whose destroy() then finds no windows to deregister; windows
  /// still registered (no destroy() came first) are kept with their memory, and logged.
  ~SymmetricMemory() override;
  SymmetricMemory(const SymmetricMemory&) = delete;
  SymmetricMemory& operator=(const SymmetricMemory&) = delete;

  bool enabled() const { return enabled_.load(); }
  AllReduceRouting all_reduce_routing() const { return settings_.all_reduce; }
  SymmetricMemoryStats stats() const;

  /// Collective when it has to grow the scratch: a lease on at least `bytes` of scratch for `op`
  /// on `stream`, or an empty lease (a fallback is counted) when the path is off, the size is
  /// above the limit, or the scratch is too small during graph capture.
  Lease lease_scratch(std::size_t bytes, cudaStream_t stream, const char* op);
  /// Collective: makes the scratch at least `bytes` (outside capture). std::invalid_argument when
  /// the path is off, during capture, or above GROUPCOORD_SYMM_SCRATCH_MAX_BYTES.
  void reserve_scratch(std::size_t bytes);
  /// True when [ptr, ptr + bytes) lies in a window of this communicator's pool.
  bool in_pool(const void* ptr, std::size_t bytes) const;
  /// Counts one collective that ran on window buffers.
  void count_symmetric_call(bool zero_copy);

  /// Collective (same shape and dtype on every rank): an uninitialised tensor inside a pool
  /// window. std::invalid_argument when the path is off, when ranks ask for different sizes, or
  /// when a new window would be needed during capture.
  Tensor empty(const Shape& shape, DType dtype, bool capturing);

  /// Collective and idempotent per allocation: registers `memory` as a symmetric window of this
  /// communicator unless it already is (the count in stats() grows only for a new registration).
  void register_allocation(const std::shared_ptr<SymmetricAllocation>& memory, const char* op);
  /// Collective: ncclMemAlloc of `bytes` and its registration. A rank whose allocation fails
  /// still meets the others, and then every rank throws (nobody registers alone).
  std::shared_ptr<SymmetricAllocation> allocate_window(std::size_t bytes, const char* op,
                                                       const char* what);

  /// Teardown: every window of this communicator, newest first, leaving none behind. Later calls
  /// see the path as off.
  std::vector<RegisteredWindow> take_windows() override;
  /// Waits up to `limit` for the last use of the scratch (the copy out of it) to complete.
  bool wait_idle(std::chrono::milliseconds limit) override;

 private:
  struct PoolState;

  /// Collective: the settings every rank uses (see the constructor).
  void agree(const NcclApi& api);
  /// Collective: a new scratch of `bytes`, registered; the old one is retired, not freed.
  void grow_scratch_locked(std::size_t bytes, const char* op);
  /// Collective: the ids every rank has given back (the intersection), released in the pool.
  void release_agreed_blocks(std::size_t bytes, const char* op);

  NcclComm& owner_;
  const NcclApi* api_;
  SymmetricSettings settings_;
  std::atomic<bool> enabled_{false};
  std::string disabled_reason_;

  /// Guards the registry, the counters and the pool's bookkeeping.
  mutable std::mutex mutex_;
  std::map<const void*, RegisteredWindow> windows_;
  std::int64_t next_sequence_ = 0;
  /// The counters of stats() (enabled, disabled_reason and window_kind are filled in there).
  SymmetricMemoryStats counters_;

  /// Held by a Lease for the duration of one call; guards the scratch fields.
  std::mutex scratch_mutex_;
  std::shared_ptr<SymmetricAllocation> scratch_;
  std::vector<std::shared_ptr<SymmetricAllocation>> retired_scratch_;
  cudaEvent_t scratch_event_ = nullptr;
  cudaStream_t scratch_stream_ = nullptr;
  bool scratch_event_pending_ = false;

  /// Shared with the deleters of pool tensors, which may outlive this object.
  std::shared_ptr<PoolState> pool_;
};

}  // namespace cuda
}  // namespace groupcoord
