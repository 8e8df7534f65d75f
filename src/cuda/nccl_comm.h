// NcclComm: one non-blocking NCCL communicator over the ranks of a Gloo ProcessGroup, with a
// watchdog so that nothing waits forever (DESIGN.md §3).
//
// Creation (collective over the group): every rank loads NCCL and checks its device, the ranks
// share whether that worked and which NCCL version they loaded, rank 0 makes the unique id and
// broadcasts it over the group, and every rank runs ncclCommInitRankConfig with blocking = 0,
// polling ncclCommGetAsyncError until success or the group's timeout (then ncclCommAbort and
// TimeoutError naming the group).
//
// Operations: enqueue() issues one NCCL call (or a group of them) on a stream, settles
// ncclInProgress by polling with the group's timeout, and records a CUDA event after it. A
// watchdog thread checks ncclCommGetAsyncError and the oldest event still in flight; on an error,
// or when an operation has not completed within the timeout, it aborts the communicator and
// marks it broken. Every later call, and every wait done by our code (wait_event, synchronize),
// then throws TimeoutError or DistributedError naming the group and the operation. After an
// abort the NCCL kernels give up, so the streams drain instead of hanging.
//
// Teardown (destroy, the destructor) cannot deadlock: the watchdog stops, then ncclCommFinalize
// is polled for a bounded time (min(timeout, 10 s)) and followed by ncclCommDestroy, or the
// communicator is aborted.
//
// Collective rule: create() and every collective enqueued must be called by every rank of the
// group, in the same order. enqueue() may be called from several threads, but NCCL itself
// requires collectives of one communicator to be issued in one order on every rank.
//
// During CUDA graph capture no event is recorded (the capture turns operations into graph nodes;
// the watchdog cannot observe replays) and NCCL's own error checks remain.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuda/nccl_api.h"
#include "cuda/symmetric_memory.h"
#include "groupcoord/device.h"
#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace cuda {

/// One NCCL call (or several, for a group), issued with the communicator's handle.
using NcclCall = std::function<ncclResult_t(const NcclApi& api, ncclComm_t comm)>;

/// A non-blocking NCCL communicator with a watchdog. See the file comment.
class NcclComm {
 public:
  /// Collective over `group`: builds the communicator on `device`; `name` (the coordinator's
  /// unique name) appears in every error. Throws std::invalid_argument for a bad device,
  /// TimeoutError when initialisation runs past the group's timeout, DistributedError when NCCL
  /// cannot be loaded or fails (on any rank: the others learn about it and throw too).
  static std::shared_ptr<NcclComm> create(std::shared_ptr<ProcessGroup> group, Device device,
                                          std::string name);

  /// Calls destroy(); logs rather than throws.
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  const std::string& name() const { return name_; }
  Device device() const { return device_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  /// Deadline of initialisation, of each operation and of each wait.
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// ncclGetVersion of the loaded NCCL.
  int nccl_version() const { return api_->version; }
  /// The CPU group the communicator was built over (agreements, symmetric_empty).
  ProcessGroup& group() const { return *group_; }
  /// This communicator's symmetric memory (DESIGN.md §5; off unless enabled and agreed).
  SymmetricMemory& symmetric() const { return *symmetric_; }

  /// Collective: registers [data, data + bytes) (ncclMemAlloc memory) as a window with `flags`
  /// (NCCL_WIN_COLL_SYMMETRIC or NCCL_WIN_DEFAULT) for `op`. The ranks first check over the CPU group that all of them register the same size (an
  /// std::invalid_argument on every rank otherwise), then NCCL's call is settled within the
  /// timeout. DistributedError when NCCL registers nothing (it refuses windows for this
  /// communicator) or fails. Not during CUDA graph capture.
  /// `ready` false (this rank could not allocate the memory) makes every rank throw after the
  /// meeting, so that no rank enters NCCL's registration alone.
  ncclWindow_t register_window(void* data, std::size_t bytes, int flags, const char* op,
                               bool ready = true);
  /// Drops the in-flight entries whose work has completed (releasing their keepalive tensors)
  /// now, rather than at the watchdog's next round.
  void release_completed();

  /// Issues `call` (one NCCL call) on `stream` and tracks it as `op`; `keepalive` is held until
  /// the operation completes. Throws when the communicator is broken or destroyed, when NCCL
  /// reports an error (DistributedError; the communicator is aborted if NCCL says it is broken)
  /// or when ncclInProgress does not settle within the timeout (TimeoutError, aborted).
  void enqueue(const char* op, cudaStream_t stream, const NcclCall& call, Tensor keepalive = {});
  /// As enqueue() for several calls between ncclGroupStart and ncclGroupEnd.
  void enqueue_group(const char* op, cudaStream_t stream, const std::vector<NcclCall>& calls,
                     Tensor keepalive = {});

  /// Waits on the host for `event`, polling, at most `timeout`. Throws the communicator's error
  /// as soon as it is broken, and TimeoutError naming `op` when the wait runs out; with
  /// `abort_on_expiry` the communicator is then aborted (an operation that does not finish within
  /// the group's timeout is what the watchdog is for), else the operation keeps running.
  void wait_event(cudaEvent_t event, const char* op, std::chrono::milliseconds timeout,
                  bool abort_on_expiry);
  /// Waits (as wait_event, with timeout()) for everything enqueued so far on `stream`.
  void synchronize(cudaStream_t stream, const char* op);

  /// Throws DistributedError after destroy(), or the stored TimeoutError / DistributedError when
  /// the communicator is broken; `op` is the operation being attempted.
  void check_usable(const char* op) const;
  /// True once the communicator has been aborted after an error or a timeout.
  bool is_broken() const;

  /// Stops the watchdog and releases the communicator (see the file comment). Idempotent; later
  /// operations throw DistributedError. Not collective, but peers still using the communicator
  /// will see their operations fail.
  void destroy();

 private:
  /// An operation whose completion event has not been observed yet.
  struct InFlight {
    std::string op;
    cudaEvent_t event;
    std::chrono::steady_clock::time_point enqueued;
    Tensor keepalive;
  };

  NcclComm(const NcclApi& api, std::shared_ptr<ProcessGroup> group, Device device,
           std::string name);

  // ---- creation (nccl_comm_init.cc) ----
  /// Collective: shares each rank's readiness and NCCL version; throws on every rank when any
  /// rank is not ready or the versions differ.
  static void agree_on_readiness(ProcessGroup& group, const std::string& name,
                                 std::exception_ptr local_error, int version);
  /// Collective: rank 0's unique id (or its failure) on every rank.
  ncclUniqueId exchange_unique_id();
  /// ncclCommInitRankConfig (non-blocking), settled within the timeout.
  void init_communicator(const ncclUniqueId& id);

  // ---- operations (nccl_comm.cc) ----
  /// Polls ncclCommGetAsyncError after a call that returned `result` until it settles.
  void settle(const char* op, ncclResult_t result);
  /// Records an event for `op` on `stream` for the watchdog (skipped during capture).
  void track(const char* op, cudaStream_t stream, Tensor keepalive);
  /// An event from the pool (or a new one).
  cudaEvent_t take_event();
  /// ": <ncclGetLastError>" or "" when NCCL has nothing to add. Requires mutex_.
  std::string last_error_locked() const;
  /// ncclCommFinalize polled for at most `limit`; true when it completed. Requires mutex_.
  bool finalize_locked(std::chrono::milliseconds limit);

  // ---- failure handling (nccl_watchdog.cc) ----
  /// Aborts the communicator and records why; the first reason wins. Requires mutex_.
  void break_locked(bool timed_out, const std::string& reason);
  /// As break_locked, taking mutex_.
  void break_comm(bool timed_out, const std::string& reason);
  /// check_usable() for a caller that holds mutex_.
  void throw_if_unusable_locked(const char* op) const;
  /// Throws the stored error for an attempt at `op`; requires broken_.
  [[noreturn]] void throw_broken(const char* op) const;
  /// The watchdog thread's body.
  void watchdog_loop();
  /// One round: async error, completed and expired operations.
  void watchdog_check();
  /// Releases completed in-flight entries after teardown; leaks (and logs) the others.
  void release_in_flight(bool all_completed);

  // ---- symmetric windows (nccl_comm_windows.cc) ----
  /// Waits up to `limit` for every in-flight operation to complete; false when some did not.
  bool drain_in_flight(std::chrono::milliseconds limit);
  /// Teardown: deregisters `windows` (bounded, newest first), before the communicator goes. Windows
  /// that cannot be deregistered safely are leaked with their memory (logged); the others' memory
  /// stays with the caller until the communicator is destroyed.
  void release_windows_locked(std::vector<RegisteredWindow>& windows,
                              std::chrono::milliseconds limit, bool operations_done);

  const NcclApi* api_;
  std::shared_ptr<ProcessGroup> group_;
  Device device_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_;

  /// Guards comm_ and the broken state: NCCL calls, aborts and teardown take it.
  mutable std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  bool broken_ = false;
  bool broken_by_timeout_ = false;
  std::string broken_reason_;
  std::atomic<bool> destroyed_{false};

  /// Guards in_flight_, event_pool_ and stop_; the watchdog waits on wake_.
  std::mutex in_flight_mutex_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> event_pool_;
  bool stop_ = false;
  std::thread watchdog_;

  /// Created last in create(); windows are deregistered first in destroy().
  std::unique_ptr<SymmetricMemory> symmetric_;
};

}  // namespace cuda
}  // namespace groupcoord
