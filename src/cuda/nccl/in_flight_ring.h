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
// Reaping costs event queries, and a query takes the driver's lock that the caller's launches
// need too: one query per completed entry (the first design) made the watchdog spend about a
// microsecond of CPU per operation on the H100 host and slowed the caller by 2.5 µs a call in a
// sustained loop. So entries carry their stream's unique id (cuStreamGetId; a handle value may
// name several streams over time, an id never does), completion is monotone along one stream,
// and a pass finds each stream's boundary between completed and running entries by a binary
// search: O(log n) queries per stream and pass. Entries without an id (the per-thread default
// stream, a driver that cannot say) are queried one by one, oldest first, up to the first one
// still running, as before: their completion is never inferred from another entry's.
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
    std::size_t queries = 0;  ///< event queries the pass made (what reaping costs)
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

  // ---- consumers: serialised among themselves; never block the producer
  // --------------------------
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
  /// Which entries share one stream: its unique id where the driver gave one, else the handle.
  struct StreamKey {
    cudaStream_t stream = nullptr;
    unsigned long long id = 0;
    bool has_id = false;
    bool operator==(const StreamKey& o) const {
      return has_id == o.has_id && (has_id ? id == o.id : stream == o.stream);
    }
  };

  struct Slot {
    const char* op = nullptr;
    StreamKey stream;
    cudaEvent_t event = nullptr;  ///< created on the slot's first use, kept until destruction
    std::int64_t enqueued_ns = 0;
    Tensor keepalive;
    bool done = false;  ///< written by consumers only, reset by the producer before publishing
  };

  Slot& slot(std::uint64_t index) { return slots_[index & mask_]; }
  /// Marks the completed entries of `stream` among [from, to) done and releases them. Requires
  /// consumer_mutex_.
  void reap_stream(const StreamKey& stream, std::uint64_t from, std::uint64_t to, Scan& scan,
                   std::vector<Tensor>& released);
  /// How many of entries_ (one stream's pending entries, oldest first) have completed: for a
  /// stream without an id, queried one by one up to the first still running; with an id, a
  /// binary search for the boundary. Stops at the first CUDA error, which it records in `scan`.
  std::size_t completed_prefix(bool by_boundary, Scan& scan);
  /// Queries entry `index`'s event: cudaSuccess when complete, cudaErrorNotReady while running,
  /// else the CUDA error (recorded in `scan`).
  cudaError_t query(std::uint64_t index, Scan& scan);

  std::vector<Slot> slots_;
  std::uint64_t mask_;
  /// Next slot the producer fills; entries [head_, tail_) are published.
  std::atomic<std::uint64_t> tail_{0};
  /// Oldest entry not yet released; only consumers move it.
  std::atomic<std::uint64_t> head_{0};

  std::mutex consumer_mutex_;
  /// Scratch of reap(), reused so that a pass allocates nothing once warm: the streams with
  /// pending entries, and one stream's pending entries in order. Require consumer_mutex_.
  std::vector<StreamKey> streams_;
  std::vector<std::uint64_t> entries_;
};

}  // namespace cuda
}  // namespace groupcoord
