// InFlightRing: the NCCL operations of one communicator whose completion has not been observed
// yet, for its watchdog (docs/cuda.md, "The hot path").
//
// Why a ring: every collective adds an entry on the caller's thread and the watchdog removes it
// later, so this is the one structure both touch on every call. A locked deque made the caller
// wait whenever the watchdog was reaping (one cudaEventQuery per entry, under the lock). Here the
// caller (one at a time: NcclComm serialises its calls) writes a slot and publishes it with one
// release store, and the consumer (the watchdog, or a caller that frees completed work early)
// never blocks it. Each slot owns its CUDA event for good, so no event pool is needed either.
//
// Reaping queries entries oldest first, per stream handle, and stops at the first one still
// running on that handle: later entries there are almost surely running too, so skipping them
// only delays their release to a later pass. It never infers completion from a later entry (a
// handle value may name several streams: the per-thread default stream, a destroyed stream's
// reused handle), so a buffer is released only when its own event says so.
//
// A full ring (the host thousands of operations ahead of the GPU) is the caller's to resolve:
// push() refuses, the caller reaps and, if still full, waits for the oldest entry (NcclComm
// does so within its deadline).
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "groupcoord/tensor.h"

namespace groupcoord {
namespace cuda {

class InFlightRing {
 public:
  /// What a pass of reap() saw.
  struct Scan {
    std::size_t pending = 0;          ///< entries not seen complete after the pass
    std::size_t failed = 0;           ///< of those, entries whose event reported an error
    const char* oldest_op = nullptr;  ///< the longest-waiting pending entry (nullptr: none)
    std::int64_t oldest_enqueued_ns = 0;
    const char* failed_op = nullptr;  ///< an entry whose event reported a CUDA error
    cudaError_t failure = cudaSuccess;
  };

  /// `capacity` is rounded up to a power of two.
  explicit InFlightRing(std::size_t capacity);
  /// Destroys the slots' events; the owner has released the entries first (release_all).
  ~InFlightRing();
  InFlightRing(const InFlightRing&) = delete;
  InFlightRing& operator=(const InFlightRing&) = delete;

  enum class Push { kDone, kFull, kCudaError };

  /// Creates every slot's event now, with the owner's device current, so that no operation pays
  /// for one (push() creates a missing one itself). Returns the first error; the slots without
  /// an event then get theirs in push().
  cudaError_t create_events();

  // ---- producer: one thread at a time ----------------------------------------------------------
  /// Records the slot's event on `stream` after the operation `op` (a string literal) and
  /// publishes the entry, which takes `keepalive` and holds it until the operation is seen
  /// complete. kFull: the ring is full, nothing was recorded. kCudaError: creating or recording
  /// the event failed with `*error`, nothing was published.
  Push push(const char* op, cudaStream_t stream, std::int64_t enqueued_ns, Tensor& keepalive,
            cudaError_t* error);

  // ---- consumers: serialised among themselves; never block the producer --------------------------
  /// Queries the pending entries, releases the completed ones and reports what is left. The
  /// keepalive tensors of completed entries are moved into `released`, for the caller to destroy
  /// once it holds no lock (their deleters may take other locks, e.g. Python's).
  Scan reap(std::vector<Tensor>& released);
  /// True when no entry is pending (a snapshot).
  bool empty() const;
  /// Free slots: the capacity less the entries not yet released. Producer only.
  std::size_t room() const;
  /// Teardown, when no producer is left: releases every entry. Entries still running (when
  /// `all_completed` is false their events are asked) hand their keepalive to `keep`, because
  /// the GPU may still touch that memory. Returns how many were still running.
  std::size_t release_all(bool all_completed, const std::function<void(Tensor)>& keep);

 private:
  struct Slot {
    const char* op = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t event = nullptr;  ///< created on the slot's first use, kept until destruction
    std::int64_t enqueued_ns = 0;
    Tensor keepalive;
    bool done = false;  ///< written by consumers only, reset by the producer before publishing
  };

  Slot& slot(std::uint64_t index) { return slots_[index & mask_]; }
  /// Marks the completed entries of `stream` among [from, to) done, oldest first, up to the first
  /// one still running. Requires consumer_mutex_.
  void reap_stream(cudaStream_t stream, std::uint64_t from, std::uint64_t to, Scan& scan,
                   std::vector<Tensor>& released);

  std::vector<Slot> slots_;
  std::uint64_t mask_;
  /// Next slot the producer fills; entries [head_, tail_) are published.
  std::atomic<std::uint64_t> tail_{0};
  /// Oldest entry not yet released; only consumers move it.
  std::atomic<std::uint64_t> head_{0};

  std::mutex consumer_mutex_;
  /// Scratch of reap(), reused so that a pass allocates nothing once warm. Requires
  /// consumer_mutex_.
  std::vector<cudaStream_t> streams_;
};

}  // namespace cuda
}  // namespace groupcoord
