// NcclComm operations, waits and teardown. Creation is in nccl_comm_init.cc, the watchdog and
// the failure handling in nccl_watchdog.cc.
#include "cuda/nccl/nccl_comm.h"

#include <algorithm>

#include "cuda/nccl/poll_pause.h"
#include "cuda/nccl/steady_nanoseconds.h"
#include "cuda/runtime/capture_status.h"
#include "cuda/runtime/cuda_check.h"
#include "cuda/runtime/device_guard.h"
#include "groupcoord/check.h"
#include "groupcoord/logging.h"

namespace groupcoord {
namespace cuda {

namespace {

// Teardown waits at most this long for ncclCommFinalize, as ProcessGroup::destroy does.
constexpr std::chrono::milliseconds kFinalizeLimit{10000};

// Our own waits give the watchdog (which polls every few ms) the chance to report first, so the
// error names the operation that hung rather than the wait.
constexpr std::chrono::milliseconds kWaitSlack{500};

// A caller that found the in-flight ring full waits until this many entries are free again, so
// that it does not come back on the very next call.
constexpr std::size_t kRingSlack = 64;

}  // namespace

NcclComm::~NcclComm() {
  try {
    destroy();
  } catch (const std::exception& e) {
    GC_LOG(Warn, name_, ": destroying the NCCL communicator failed: ", e.what());
  }
}

void NcclComm::enqueue(const char* op, cudaStream_t stream, NcclCallRef call, Tensor keepalive) {
  std::vector<Tensor> released;  // destroyed after the lock below is released
  // One lock for the call and its tracking: the ring has one producer at a time. The operation's
  // deadline counts from the start of the call.
  std::lock_guard<std::mutex> serial(call_mutex_);
  const std::int64_t now_ns = coarse_steady_nanoseconds();
  const ncclResult_t result = call_nccl_serialised(op, timeout_, call, false, now_ns);
  if (result != ncclSuccess) fail_call(op, result);
  track(op, stream, now_ns, keepalive, released);
}

void NcclComm::enqueue_group(const char* op, cudaStream_t stream,
                             const std::vector<NcclCall>& calls, Tensor keepalive) {
  enqueue(
      op, stream,
      [&calls](const NcclApi& api, ncclComm_t comm) {
        ncclResult_t result = api.GroupStart();
        if (result != ncclSuccess) return result;
        for (const NcclCall& call : calls) {
          result = call(api, comm);
          if (result != ncclSuccess) {
            api.GroupEnd();  // closes the group; NCCL reports the failure again there
            return result;
          }
        }
        return api.GroupEnd();
      },
      std::move(keepalive));
}

ncclResult_t NcclComm::call_nccl(const char* op, std::chrono::milliseconds limit, NcclCallRef call,
                                 bool teardown) {
  std::lock_guard<std::mutex> serial(call_mutex_);
  return call_nccl_serialised(op, limit, call, teardown, coarse_steady_nanoseconds());
}

ncclResult_t NcclComm::call_nccl_serialised(const char* op, std::chrono::milliseconds limit,
                                            NcclCallRef call, bool teardown, std::int64_t now_ns) {
  // An operation's fast path: one atomic load says the communicator is usable. Why it is not,
  // and teardown's calls (allowed once destroyed_ is set), take mutex_.
  ncclComm_t comm = teardown ? nullptr : live_comm_.load(std::memory_order_acquire);
  if (comm == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (teardown) {
      if (broken_) throw_broken(op);
    } else {
      throw_if_unusable_locked(op);
    }
    comm = comm_;
  }
  GC_CHECK(comm != nullptr, name_, " ", op, ": the NCCL communicator is gone");
  watched_op_.store(op, std::memory_order_relaxed);
  watched_deadline_.store(now_ns + std::chrono::nanoseconds(limit).count(),
                          std::memory_order_release);
  const ncclResult_t result = call(*api_, comm);
  watched_deadline_.store(0, std::memory_order_release);
  if (result != ncclSuccess) {
    // The watchdog may have aborted the communicator while the call waited: that is the error.
    std::lock_guard<std::mutex> lock(mutex_);
    if (broken_) throw_broken(op);
  }
  return result;
}

void NcclComm::fail_call(const char* op, ncclResult_t result) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_) throw_broken(op);
  ncclResult_t state = ncclSuccess;
  if (comm_ != nullptr) api_->CommGetAsyncError(comm_, &state);
  // Argument and usage errors leave the communicator as it was; anything else (a peer gone, a
  // CUDA or system error) leaves it in an unknown state.
  const bool refused = result == ncclInvalidArgument || result == ncclInvalidUsage;
  if (state != ncclSuccess || !refused) {
    const ncclResult_t cause = state != ncclSuccess ? state : result;
    break_locked(false, std::string(op) + " failed in NCCL: " + nccl_result_text(cause) +
                            last_error_locked());
    throw_broken(op);
  }
  GC_THROW(DistributedError, name_, " ", op, ": NCCL refused the call: ", nccl_result_text(result),
           last_error_locked());
}

std::string NcclComm::last_error_locked() const {
  if (comm_ == nullptr || api_->GetLastError == nullptr) return "";
  const char* text = api_->GetLastError(comm_);
  return text != nullptr && *text != '\0' ? std::string(": ") + text : std::string();
}

void NcclComm::track(const char* op, cudaStream_t stream, std::int64_t now_ns, Tensor& keepalive,
                     std::vector<Tensor>& released) {
  // The operation is enqueued: from here on a failure must not free its buffer.
  try {
    if (stream_is_capturing(stream, name_, " ", op)) return;  // a graph node: nothing runs yet
    for (;;) {
      // No notify: while operations are in flight the watchdog wakes every few milliseconds
      // anyway, and waking it per call would cost a system call on the hot path.
      cudaError_t error = cudaSuccess;
      switch (in_flight_.push(op, stream, now_ns, keepalive, &error)) {
        case InFlightRing::Push::kDone:
          return;
        case InFlightRing::Push::kCudaError:
          GC_CUDA_CHECK(error, name_, " ", op, ": recording the completion event");
          return;
        case InFlightRing::Push::kFull:
          wait_for_ring_room(op, released);
          break;
      }
    }
  } catch (...) {
    if (keepalive.defined()) keep_forever(std::move(keepalive));
    throw;
  }
}

void NcclComm::wait_for_ring_room(const char* op, std::vector<Tensor>& released) {
  RelaxedCaptureMode relaxed;  // event queries must not invalidate another thread's capture
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + kWaitSlack;
  for (int round = 0;; ++round) {
    in_flight_.reap(released);
    if (in_flight_.room() >= kRingSlack) return;
    check_usable(op);  // the watchdog may have aborted: the oldest operation hung
    if (std::chrono::steady_clock::now() >= deadline) {
      break_comm(true, std::string(op) +
                           ": the GPU did not complete the oldest of the "
                           "operations in flight within the group's timeout");
      check_usable(op);
    }
    poll_pause(round);
  }
}

void NcclComm::wait_event(cudaEvent_t event, const char* op, std::chrono::milliseconds timeout,
                          bool abort_on_expiry) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int round = 0;; ++round) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) {
      // After an abort NCCL's kernels quit early, so a completed event proves nothing then.
      std::lock_guard<std::mutex> lock(mutex_);
      if (broken_) throw_broken(op);
      return;
    }
    if (state != cudaErrorNotReady) {
      GC_CUDA_CHECK(state, name_, " ", op, ": waiting for the operation");
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (destroyed_.load() || broken_) throw_if_unusable_locked(op);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      if (abort_on_expiry) {
        break_comm(true, std::string(op) + " did not complete within " +
                             std::to_string(timeout.count()) + " ms");
        std::lock_guard<std::mutex> lock(mutex_);
        throw_broken(op);
      }
      GC_THROW(TimeoutError, name_, " ", op, ": the operation did not complete within ",
               timeout.count(), " ms (it is still running)");
    }
    poll_pause(round);
  }
}

void NcclComm::synchronize(cudaStream_t stream, const char* op) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    throw_if_unusable_locked(op);
  }
  DeviceGuard guard(device_);
  GC_CHECK(!stream_is_capturing(stream, name_, " ", op), name_, " ", op,
           ": cannot wait for a stream that is being captured into a CUDA graph");
  // An event of its own (not a hot path): one that a failed wait leaves pending is never reused.
  cudaEvent_t event = nullptr;
  GC_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), name_, " ", op,
                ": creating a CUDA event");
  try {
    GC_CUDA_CHECK(cudaEventRecord(event, stream), name_, " ", op);
    wait_event(event, op, timeout_ + kWaitSlack, /*abort_on_expiry=*/true);
  } catch (...) {
    cudaEventDestroy(event);
    throw;
  }
  cudaEventDestroy(event);
}

void NcclComm::throw_if_unusable_locked(const char* op) const {
  if (destroyed_.load()) {
    GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator was destroyed");
  }
  if (broken_) throw_broken(op);
  if (comm_ == nullptr) {
    GC_THROW(DistributedError, name_, " ", op, ": the NCCL communicator is not initialised");
  }
}

void NcclComm::check_usable(const char* op) const {
  std::lock_guard<std::mutex> lock(mutex_);
  throw_if_unusable_locked(op);
}

bool NcclComm::is_broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return broken_;
}

void NcclComm::destroy() {
  if (destroyed_.exchange(true)) return;
  live_comm_.store(nullptr, std::memory_order_release);
  // A caller that passed the usability check before destroyed_ was set finishes its call and
  // its tracking first; later callers see destroyed_. (A call hung inside NCCL holds the lock
  // until the watchdog aborts it, within the timeout.)
  { std::lock_guard<std::mutex> serial(call_mutex_); }
  // Symmetric windows go first, once nothing in flight (NCCL calls, and the copies out of the
  // scratch that follow them) can still touch them. Their memory is freed only after the
  // communicator is gone, when `windows` goes out of scope. The watchdog keeps running until the
  // end: the teardown calls are watched like any other.
  const auto limit = std::min(timeout_, kFinalizeLimit);
  const bool operations_done =
      drain_in_flight(limit) && (!symmetric_ || symmetric_->wait_idle(limit));
  std::vector<RegisteredWindow> windows;
  if (symmetric_) windows = symmetric_->take_windows();  // before mutex_: leases lock the other way
  {
    DeviceGuard guard(device_);  // NCCL frees device memory of this device
    release_windows(windows, limit, operations_done);
  }
  const bool clean = close_communicator(operations_done, limit);
  {
    std::lock_guard<std::mutex> lock(watchdog_mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  release_in_flight(clean);
}

bool NcclComm::close_communicator(bool operations_done, std::chrono::milliseconds limit) {
  bool healthy = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    healthy = comm_ != nullptr && !broken_;
  }
  if (healthy && operations_done) {
    try {
      DeviceGuard guard(device_);
      const auto finalize = [](const NcclApi& api, ncclComm_t c) { return api.CommFinalize(c); };
      if (call_nccl("finalize", limit, finalize, /*teardown=*/true) == ncclSuccess) {
        ncclComm_t comm = nullptr;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          std::swap(comm, comm_);
        }
        const ncclResult_t destroyed = api_->CommDestroy(comm);
        if (destroyed != ncclSuccess) {
          GC_LOG(Warn, name_, ": ncclCommDestroy failed: ", nccl_result_text(destroyed));
        }
        return true;
      }
    } catch (const std::exception& e) {
      GC_LOG(Warn, name_, ": finalizing the NCCL communicator failed: ", e.what());
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ != nullptr) {
    GC_LOG(Warn, name_, ": releasing the NCCL communicator by aborting it (",
           operations_done ? "finalize failed" : "operations were still running", ")");
    cudaSetDevice(device_.index);
    api_->CommAbort(comm_);
    comm_ = nullptr;
  }
  return false;
}

}  // namespace cuda
}  // namespace groupcoord
