// NcclComm: one NCCL communicator over the ranks of a Gloo ProcessGroup, with a watchdog so that
// nothing waits forever (docs/architecture.md), and a hot path that costs what a raw NCCL call
// costs.
//
// Why blocking: NCCL runs every group of a non-blocking communicator (blocking = 0) on a thread
// it creates for that call and returns ncclInProgress, so each collective paid a thread creation
// and our polling (about 130 µs of host time). A blocking communicator issues the call inline, as
// torch's default NCCL process group does. But blocking initialisation has no deadline, so:
//
// Creation (collective over the group): every rank loads NCCL and checks its device, the ranks
// share whether that worked and which NCCL version they loaded, rank 0 makes the unique id and
// broadcasts it over the group, every rank runs ncclCommInitRankConfig with blocking = 0 and
// polls it (deadline: the group's timeout), then splits that communicator into a blocking one
// (ncclCommSplit runs on the non-blocking parent's thread, so it is polled with the same
// deadline) and retires the parent. On expiry the parent is aborted (which aborts the child's
// initialisation too) and TimeoutError names the group.
//
// Operations: every NCCL call goes through call_nccl(), which serialises the calls of this
// communicator (NCCL requires it) and publishes "op X is inside NCCL until T" in two atomics. A
// watchdog thread aborts the communicator when a call is still inside NCCL past its deadline (a
// peer that never joins a connection NCCL sets up lazily), when ncclCommGetAsyncError reports an
// error, or when the oldest operation tracked on a stream (a CUDA event recorded after it) has not
// completed within the timeout. Every later call, and every wait done by our code (wait_event,
// synchronize), then throws TimeoutError or DistributedError naming the group and the operation.
// After an abort NCCL's kernels give up, so the streams drain instead of hanging.
//
// The abort of a call that is still inside NCCL comes from the watchdog thread while the caller's
// thread is in NCCL: NCCL's abort flag makes that call return, which is what torch's watchdog
// relies on too; NCCL documents only non-blocking communicators for aborting at any point, and
// this is the one place where we accept that. It happens only on the failure path (a deadline
// already missed).
//
// Shrink (collective over the survivors, after a peer died or left): shrink() first agrees over
// the survivors' new CPU group on whether every one of them can keep its communicator, then runs
// ncclCommShrink on it (a watched call: the group's timeout) with a non-blocking config, and ends
// as creation does (split into a blocking communicator, the non-blocking one retired). The old
// communicator is then abandoned: aborted without ncclCommFinalize, which would wait for the dead
// peer, its windows kept with their memory (deregistering is collective with that peer too). A
// communicator that the watchdog aborted has no handle left (ncclCommAbort frees it), so it
// cannot be shrunk: every survivor is then told to create a fresh one.
//
// Teardown (destroy, the destructor) cannot deadlock: operations in flight are drained (bounded),
// windows are deregistered and the communicator is finalized and destroyed under the same
// watched calls (limit min(timeout, 10 s)), or the communicator is aborted.
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
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "cuda/nccl/in_flight_ring.h"
#include "cuda/nccl/nccl_api.h"
#include "cuda/nccl/symmetric_allocation.h"
#include "groupcoord/device.h"
#include "groupcoord/process_group.h"
#include "groupcoord/tensor.h"

namespace groupcoord {
namespace cuda {

/// One NCCL call (or several, for a group), issued with the communicator's handle; owning, for
/// calls collected into a group.
using NcclCall = std::function<ncclResult_t(const NcclApi& api, ncclComm_t comm)>;

/// A borrowed NCCL call for the hot path: it refers to the caller's callable instead of copying
/// it (a std::function would allocate for most lambdas), so it is valid only during the call it
/// is passed to.
class NcclCallRef {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, NcclCallRef>>>
  NcclCallRef(F&& call)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
      : callable_(const_cast<void*>(static_cast<const void*>(std::addressof(call)))),
        invoke_([](void* callable, const NcclApi& api, ncclComm_t comm) {
          return (*static_cast<std::remove_reference_t<F>*>(callable))(api, comm);
        }) {}

  ncclResult_t operator()(const NcclApi& api, ncclComm_t comm) const {
    return invoke_(callable_, api, comm);
  }

 private:
  void* callable_;
  ncclResult_t (*invoke_)(void* callable, const NcclApi& api, ncclComm_t comm);
};

/// A window registered on a communicator, with the memory it covers.
struct RegisteredWindow {
  std::shared_ptr<SymmetricAllocation> memory;
  ncclWindow_t handle = nullptr;
  std::int64_t sequence = 0;  ///< registration order (equal on every rank)
};

/// Keeps `windows` and their memory for the life of the process: for windows that cannot be
/// deregistered safely (a kernel or a peer may still read them), whose memory must never be freed.
void keep_windows_forever(std::vector<RegisteredWindow> windows);

/// What the communicator's teardown needs from whoever registered windows on it (the CUDA
/// communicator's SymmetricMemory, which refers to the NcclComm: NcclComm sees only this view of
/// it, so that neither class depends on the other).
class WindowOwner {
 public:
  virtual ~WindowOwner() = default;
  /// Waits up to `limit` for the last use of the windows (a copy out of one) to complete; false
  /// when it did not.
  virtual bool wait_idle(std::chrono::milliseconds limit) = 0;
  /// Hands over every window, newest first, for deregistration; later calls see none.
  virtual std::vector<RegisteredWindow> take_windows() = 0;
};

/// A blocking NCCL communicator created within a deadline, with a watchdog. See the file comment.
class NcclComm : public std::enable_shared_from_this<NcclComm> {
 public:
  /// Collective over `group`: builds the communicator on `device`; `name` (the coordinator's
  /// unique name) appears in every error. Throws std::invalid_argument for a bad device,
  /// TimeoutError when initialisation runs past the group's timeout, DistributedError when NCCL
  /// cannot be loaded or fails (on any rank: the others learn about it and throw too).
  static std::shared_ptr<NcclComm> create(std::shared_ptr<ProcessGroup> group, Device device,
                                          std::string name);

  /// Collective over `new_group` (the survivors' CPU group, already shrunk: its ranks are this
  /// group's in order without `excluded`, which are ranks of this communicator): the communicator
  /// over the survivors, or nullptr on every survivor when any of them cannot make it (the caller
  /// then creates a fresh one). The survivors first agree (an all_reduce Min over `new_group`) on
  /// whether each can shrink: ncclCommShrink loaded, and this communicator neither destroyed nor
  /// aborted (an abort by the watchdog frees NCCL's handle: nothing is left to shrink). Then:
  ///  * `excluded` empty (only the world ranks were renumbered): NCCL refuses an empty list, and
  ///    none is needed: this communicator itself, now over `new_group`, is returned.
  ///  * otherwise ncclCommShrink (NCCL_SHRINK_ABORT when a survivor still had operations in
  ///    flight after a short wait: they involve the dead peer and would never finish, else
  ///    NCCL_SHRINK_DEFAULT) within the group's timeout, then the blocking split as in create();
  ///    the survivors agree on the outcome (any failure: nullptr everywhere), and this
  ///    communicator is abandon()ed, also when nullptr is returned.
  /// Throws std::invalid_argument for an `excluded` that does not match `new_group`, and what the
  /// CPU group's collectives throw (this communicator is then abandoned too).
  std::shared_ptr<NcclComm> shrink(const std::vector<int>& excluded,
                                   std::shared_ptr<ProcessGroup> new_group);
  /// Releases the communicator without waiting for any peer: aborts it (no ncclCommFinalize) and
  /// destroys it, keeping its registered windows and their memory for the life of the process
  /// (deregistering is a collective). `why` is the error later calls report. For a communicator
  /// whose group lost a member. Idempotent; a no-op once destroyed.
  void abandon(const std::string& why);

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
  /// The CPU group the communicator was built over (agreements, symmetric_empty); after a
  /// shrink() that excluded nobody, the survivors' new group.
  ProcessGroup& group() const { return *group_; }
  /// Makes destroy() deregister `owner`'s windows before the communicator goes (nullptr: none).
  /// Detaching (nullptr) waits for a destroy() that is using the owner, so an owner may detach
  /// from its destructor.
  void set_window_owner(WindowOwner* owner);

  /// Collective: registers [data, data + bytes) (ncclMemAlloc memory) as a window with `flags`
  /// (NCCL_WIN_COLL_SYMMETRIC or NCCL_WIN_DEFAULT) for `op`. The ranks first check over the CPU
  /// group that all of them register the same size (an std::invalid_argument on every rank
  /// otherwise), then NCCL's call is watched against the timeout. DistributedError when NCCL
  /// registers nothing (it refuses windows for this communicator) or fails. Not during CUDA graph
  /// capture. `ready` false (this rank could not allocate the memory) makes every rank throw after
  /// the meeting, so that no rank enters NCCL's registration alone.
  ncclWindow_t register_window(void* data, std::size_t bytes, int flags, const char* op,
                               bool ready = true);
  /// Drops the in-flight entries whose work has completed (releasing their keepalive tensors)
  /// now, rather than at the watchdog's next round.
  void release_completed();

  /// Issues `call` (one NCCL call) on `stream` and tracks it as `op`; `keepalive` is held until
  /// the operation completes. The caller has made device() current (its DeviceGuard: one per
  /// call, not one per layer, on the hot path). Throws when the communicator is broken or
  /// destroyed, when NCCL reports an error (DistributedError; the communicator is aborted if NCCL
  /// says it is broken) or when the call stays inside NCCL past the timeout (TimeoutError,
  /// aborted).
  void enqueue(const char* op, cudaStream_t stream, NcclCallRef call, Tensor keepalive = {});
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
  NcclComm(const NcclApi& api, std::shared_ptr<ProcessGroup> group, Device device,
           std::string name);

  // ---- creation (and the end of a shrink) ----
  /// ncclCommInitRankConfig with blocking = 0, polled until the deadline.
  ncclComm_t init_parent(const ncclUniqueId& id, std::chrono::steady_clock::time_point deadline);
  /// Polls the non-blocking `comm`, whose set-up call returned `state`, until NCCL reports it
  /// ready; past `deadline` aborts it and throws TimeoutError, on an error aborts it and throws
  /// DistributedError. `what` names the step and `hint` says what to check, in the messages.
  void wait_initialised(ncclComm_t comm, ncclResult_t state,
                        std::chrono::steady_clock::time_point deadline, const char* what,
                        const char* hint);
  /// ncclCommSplit of `parent` into a blocking communicator, polled until the deadline; aborts
  /// `parent` and throws on failure.
  ncclComm_t split_blocking(ncclComm_t parent, std::chrono::steady_clock::time_point deadline);
  /// Finalizes and destroys the non-blocking `parent` within a bounded time, else aborts it.
  void retire_parent(ncclComm_t parent);
  /// The blocking communicator made from the initialised non-blocking `parent` (split_blocking),
  /// and `parent` retired.
  ncclComm_t finish_init(ncclComm_t parent, std::chrono::steady_clock::time_point deadline);
  /// Makes the blocking `comm` this communicator's handle (the in-flight ring's events first).
  void adopt(ncclComm_t comm);
  /// Starts the watchdog thread (once, after adopt()).
  void start_watchdog();
  /// Collective: shares each rank's readiness and NCCL version; throws on every rank when any
  /// rank is not ready or the versions differ.
  static void agree_on_readiness(ProcessGroup& group, const std::string& name,
                                 std::exception_ptr local_error, int version);
  /// Collective: rank 0's unique id (or its failure) on every rank.
  ncclUniqueId exchange_unique_id();
  /// The blocking communicator (see the file comment), within the group's timeout.
  void init_communicator(const ncclUniqueId& id);

  // ---- operations (nccl_comm.cc) ----
  /// Runs `call` with the communicator's handle, serialised with this communicator's other NCCL
  /// calls and watched: still inside NCCL after `limit`, the watchdog aborts the communicator.
  /// Returns NCCL's result. Throws when the communicator is unusable before the call (`teardown`:
  /// destroy() may still use it) or was broken during it.
  ncclResult_t call_nccl(const char* op, std::chrono::milliseconds limit, NcclCallRef call,
                         bool teardown = false);
  /// call_nccl for a caller that holds call_mutex_; `now_ns` is coarse_steady_nanoseconds() at the
  /// call.
  ncclResult_t call_nccl_serialised(const char* op, std::chrono::milliseconds limit,
                                    NcclCallRef call, bool teardown, std::int64_t now_ns);
  /// Throws for a call of `op` that returned `result` != ncclSuccess: the communicator is aborted
  /// (TimeoutError / DistributedError) when NCCL reports it broken, else DistributedError says
  /// NCCL refused the call.
  [[noreturn]] void fail_call(const char* op, ncclResult_t result);
  /// Records an event for `op` (issued at `now_ns`) on `stream` for the watchdog (skipped during
  /// capture). Requires call_mutex_ (the ring has one producer at a time). Buffers of entries
  /// reaped meanwhile go to `released`, which the caller destroys after unlocking.
  void track(const char* op, cudaStream_t stream, std::int64_t now_ns, Tensor& keepalive,
             std::vector<Tensor>& released);
  /// track() found the ring full: frees completed entries, else waits for the oldest one (the
  /// GPU is thousands of operations behind) within the timeout.
  void wait_for_ring_room(const char* op, std::vector<Tensor>& released);
  /// Keeps a buffer that the GPU may still use reachable until the process ends.
  static void keep_forever(Tensor buffer);
  /// ": <ncclGetLastError>" or "" when NCCL has nothing to add. Requires mutex_.
  std::string last_error_locked() const;
  /// Teardown: finalizes and destroys the communicator with watched calls when `operations_done`
  /// and it is healthy, else aborts it. True when it was released cleanly.
  bool close_communicator(bool operations_done, std::chrono::milliseconds limit);

  // ---- failure handling (the watchdog) ----
  /// Marks the communicator broken for `reason` and aborts it (on its device). Requires mutex_
  /// and !broken_.
  void abort_locked(bool timed_out, const std::string& reason);
  /// Aborts the communicator, logs and records why; the first reason wins. Requires mutex_.
  void break_locked(bool timed_out, const std::string& reason);
  /// As break_locked, taking mutex_.
  void break_comm(bool timed_out, const std::string& reason);
  /// check_usable() for a caller that holds mutex_.
  void throw_if_unusable_locked(const char* op) const;
  /// Throws the stored error for an attempt at `op`; requires broken_.
  [[noreturn]] void throw_broken(const char* op) const;
  /// The watchdog thread's body.
  void watchdog_loop();
  /// One round: a call stuck in NCCL, async error, completed and expired operations.
  void watchdog_check();
  /// Aborts the communicator when a call has been inside NCCL past its deadline.
  void check_watched_call();
  /// Releases the in-flight entries after teardown; leaks (and logs) the buffers of the others.
  void release_in_flight(bool all_completed);

  // ---- symmetric windows ----
  /// Waits up to `limit` for every in-flight operation to complete; false when some did not.
  bool drain_in_flight(std::chrono::milliseconds limit);
  /// Teardown: deregisters `windows` (watched calls, newest first), before the communicator goes.
  /// Windows that cannot be deregistered safely are leaked with their memory (logged); the
  /// others' memory stays with the caller until the communicator is destroyed.
  void release_windows(std::vector<RegisteredWindow>& windows, std::chrono::milliseconds limit,
                       bool operations_done);

  const NcclApi* api_;
  std::shared_ptr<ProcessGroup> group_;
  Device device_;
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_;

  /// Serialises this communicator's NCCL calls (call_nccl); taken before mutex_, never held by
  /// the watchdog, so that it can abort a call that hangs.
  std::mutex call_mutex_;
  /// The call inside NCCL now (call_nccl): its op and its deadline in steady-clock nanoseconds
  /// (0: none). Read by the watchdog without locks.
  std::atomic<const char*> watched_op_{nullptr};
  std::atomic<std::int64_t> watched_deadline_{0};

  /// Guards comm_ and the broken state: aborts and state changes take it; never held across a
  /// NCCL call that may wait for peers.
  mutable std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  bool broken_ = false;
  bool broken_by_timeout_ = false;
  std::string broken_reason_;
  std::atomic<bool> destroyed_{false};
  /// comm_ while the communicator is usable (initialised, not broken, not destroyed), else null:
  /// an operation's one check, without mutex_. Cleared under mutex_ before comm_ goes.
  std::atomic<ncclComm_t> live_comm_{nullptr};

  /// Operations enqueued and not yet seen complete: written by callers under call_mutex_, reaped
  /// by the watchdog without blocking them.
  InFlightRing in_flight_;
  /// Guards stop_; the watchdog sleeps on wake_.
  std::mutex watchdog_mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread watchdog_;

  /// Set while shrink() runs ncclCommShrink: the watchdog then checks only that call's deadline
  /// (NCCL_SHRINK_ABORT stops the operations in flight; their errors are expected).
  std::atomic<bool> shrinking_{false};

  /// Whose windows destroy() deregisters first (set_window_owner). window_owner_mutex_ is held
  /// while destroy() uses the owner; it is taken before the owner's own locks, never after.
  std::mutex window_owner_mutex_;
  WindowOwner* window_owner_ = nullptr;
};

}  // namespace cuda
}  // namespace groupcoord
